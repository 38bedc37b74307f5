// ok: differentiate with respect to a placeholder.  ko: with respect to a number.
#include <tenferro/expr.hpp>

void use() {
  using namespace tenferro::expr;
  auto [x] = placeholders<1>();
#ifdef TENFERRO_KO
  (void)derivative(x * x, 2.0);
#else
  (void)derivative(x * x, x);
#endif
}
