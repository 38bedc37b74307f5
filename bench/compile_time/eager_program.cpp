// A small eager program (a leaf, a product, a sum, backward) as a user writes it: compiled against
// tenferro::eager (TENFERRO_SEPARATE_COMPILATION), so it only declares the runtime.
#include <tenferro/eager.hpp>

int main() {
  using namespace tenferro;
  auto ctx = EagerRuntime::create();
  auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}), ctx);
  (x * x).reduce_sum().backward();
  return x.grad()->as_slice<double>()[2] == 6.0 ? 0 : 1;
}
