// ok: as many inputs as placeholders.  ko: one input for an expression of two placeholders.
#include <tenferro/expr.hpp>

void use() {
  using namespace tenferro::expr;
  auto [x, y] = placeholders<2>();
  xt::xarray<double> a = {1.0, 2.0};
#ifdef TENFERRO_KO
  (void)eval(x + y, a);
#else
  (void)eval(x + y, a, a);
#endif
}
