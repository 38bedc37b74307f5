// ok: a complex expression of ops with a complex form.  ko: maximum has none (complex numbers
// are not ordered).
#include <tenferro/expr.hpp>

#include <complex>

void use() {
  using namespace tenferro::expr;
  auto [x] = placeholders<1>();
  auto a = xt::xarray<std::complex<double>>::from_shape({2});
  a(0) = {1.0, 2.0};
  a(1) = {-1.0, 0.5};
#ifdef TENFERRO_KO
  (void)eval(maximum(x, x * 2.0), a);
#else
  (void)eval(exp(x) * 2.0, a);
#endif
}
