// The quickstart: tensors, and a gradient from the compile-time layer.
#include <tenferro/tenferro.hpp>

#include <iostream>

int main() {
  using tenferro::Tensor;
  namespace ct = tenferro::expr;

  // Column-major: the data lists the first column (1, 2), then the second (3, 4), ...
  Tensor a = Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  std::cout << a << "\n";
  std::cout << "a(1, 2) = " << a.typed<double>()(1, 2) << "\n";
  std::cout << Tensor::ones({3}, tenferro::DType::I64) << "\n";

  // An expression is a type; its derivative is another; one fused loop evaluates both.
  auto [x, y] = ct::placeholders<2>();
  auto f = ct::sum(sin(x) * y + exp(x * y));
  std::cout << "d/dx of " << ct::to_string(f) << " = " << ct::to_string(ct::derivative(f, x)) << "\n";
  auto [value, grads] = ct::value_and_grad(f, a.array<double>(), 0.5);
  std::cout << "value = " << value << ", d/dx = " << Tensor(std::get<0>(grads))
            << ", d/dy = " << std::get<1>(grads) << "\n";

  try {
    Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, 4, 5});
  } catch (const tenferro::Error& e) {
    std::cout << "error, as expected: " << e.what() << "\n";
  }
}
