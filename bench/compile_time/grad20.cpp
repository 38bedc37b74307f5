// Compile-time benchmark: one translation unit that takes value_and_grad of a 20-node
// expression of three inputs (timed by bench/compile_time.sh).
#include <tenferro/expr.hpp>

#include <iostream>

int main() {
  namespace ct = tenferro::expr;
  auto [x, y, z] = ct::placeholders<3>();
  auto f = ct::sum(sin(x) * y + exp(x * z) - log1p(square(y)) / (z + 2.0) + z);
  static_assert(ct::node_count<decltype(f)> == 20);
  const tenferro::column_major_array<double> a = {0.1, 0.2, 0.3}, b = {1.0, 2.0, 3.0}, c = {0.5, 0.25, 0.125};
  auto [value, grads] = ct::value_and_grad(f, a, b, c);
  std::cout << value << " " << std::get<0>(grads)(0) << " " << std::get<1>(grads)(1) << " "
            << std::get<2>(grads)(2) << "\n";
}
