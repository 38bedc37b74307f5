// ok: the gradient over floating inputs.  ko: over integer inputs (derivatives are floating).
#include <tenferro/expr.hpp>

#include <cstdint>

void use() {
  using namespace tenferro::expr;
  auto [x] = placeholders<1>();
#ifdef TENFERRO_KO
  xt::xarray<std::int64_t> a = {1, 2};
#else
  xt::xarray<double> a = {1.0, 2.0};
#endif
  (void)grad(sum(x * x), a);
}
