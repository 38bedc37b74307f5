// The quickstart: build tensors and print them.
#include <tenferro/tenferro.hpp>

#include <iostream>

int main() {
  using tenferro::Tensor;

  // Column-major: the data lists the first column (1, 2), then the second (3, 4), ...
  Tensor a = Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  std::cout << a << "\n";
  std::cout << "a(1, 2) = " << a.typed<double>()(1, 2) << "\n";

  Tensor s = Tensor::from_vec_col_major<float>({}, {2.5f});
  std::cout << s << "\n";
  std::cout << Tensor::ones({3}, tenferro::DType::I64) << "\n";

  try {
    Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, 4, 5});
  } catch (const tenferro::Error& e) {
    std::cout << "error, as expected: " << e.what() << "\n";
  }
}
