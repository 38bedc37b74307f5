// An eager program that only knows tenferro as a package: it links tenferro::eager, so this
// translation unit compiles none of the runtime's kernels.
#include <tenferro/eager.hpp>

#include <iostream>

int main() {
  using namespace tenferro;
  auto ctx = EagerRuntime::create();
  auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}), ctx);
  (x * x).reduce_sum().backward();
  const auto grad = x.grad()->as_slice<double>();  // d/dx sum(x^2) = 2x
  const bool ok = grad.size() == 3 && grad[0] == 2.0 && grad[1] == 4.0 && grad[2] == 6.0;
  std::cout << (ok ? "consumer_eager ok\n" : "consumer_eager FAILED\n");
  return ok ? 0 : 1;
}
