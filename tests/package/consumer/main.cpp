// A program that only knows tenferro as a package.
#include <tenferro/tenferro.hpp>

#include <iostream>

int main() {
  auto t = tenferro::Tensor::from_vec_col_major<double>({2, 2}, {1, 2, 3, 4});
  const auto typed = t.typed<double>();
  const bool ok = t.size() == 4 && typed(1, 0) == 2.0 && typed(0, 1) == 3.0;
  std::cout << t << (ok ? "\nconsumer ok\n" : "\nconsumer FAILED\n");
  return ok ? 0 : 1;
}
