// ok: an integer expression of ops with an integer form.  ko: exp has none.
#include <tenferro/expr.hpp>

#include <cstdint>

void use() {
  using namespace tenferro::expr;
  auto [x] = placeholders<1>();
  xt::xarray<std::int32_t> a = {1, 2};
#ifdef TENFERRO_KO
  (void)eval(exp(x) * 2, a);
#else
  (void)eval(abs(x) * 2, a);
#endif
}
