// ok: the gradient of a reduction.  ko: of an elementwise expression.
#include <tenferro/expr.hpp>

void use() {
  using namespace tenferro::expr;
  auto [x] = placeholders<1>();
  xt::xarray<double> a = {1.0, 2.0};
#ifdef TENFERRO_KO
  (void)grad(x * x, a);
#else
  (void)grad(sum(x * x), a);
#endif
}
