// A small eager program (a leaf, a product, a sum, backward) as a user writes it. Built three ways:
// by the package consumers against tenferro::eager (TENFERRO_SEPARATE_COMPILATION: it only
// declares the runtime), header-only by the test eager_header_only (it defines the whole runtime),
// and timed by bench/compile_time.sh. The exit code says whether the gradient is right.
#include <tenferro/eager.hpp>

int main() {
  using namespace tenferro;
  auto ctx = EagerRuntime::create();
  auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}), ctx);
  (x * x).reduce_sum().backward();
  const auto g = x.grad()->as_slice<double>();  // d/dx sum(x^2) = 2x
  return g.size() == 3 && g[0] == 2.0 && g[1] == 4.0 && g[2] == 6.0 ? 0 : 1;
}
