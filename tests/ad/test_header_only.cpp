// The eager runtime header-only (no tenferro::eager, no TENFERRO_SEPARATE_COMPILATION): this one
// translation unit defines the whole runtime, and computes a gradient and a functional one.
#include <tenferro/eager.hpp>

#include <iostream>

int main() {
  using namespace tenferro;
  auto ctx = EagerRuntime::create();
  auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}), ctx);
  (x * x).reduce_sum().backward();
  const auto g = x.grad()->as_slice<double>();  // d/dx sum(x^2) = 2x
  auto s = ctx->variable_from(Tensor::from_vec_col_major<double>({}, {1.5}));
  const double ds = ctx->grad(s * s, s).materialized().as_slice<double>()[0];  // 2s
  const bool ok = g[0] == 2.0 && g[1] == 4.0 && g[2] == 6.0 && ds == 3.0;
  std::cout << (ok ? "header-only eager ok\n" : "header-only eager FAILED\n");
  return ok ? 0 : 1;
}
