// The compile-time layer in one program: an expression is a type, its derivative is another
// type, and one fused SIMD loop computes the value and every gradient.
#include <tenferro/tenferro.hpp>

#include <cmath>
#include <iostream>
#include <vector>

int main() {
  namespace ct = tenferro::expr;
  using vec = tenferro::column_major_array<double>;

  auto [x, y] = ct::placeholders<2>();
  auto f = sin(x) * y + exp(x * y);  // a type; nothing is computed yet
  auto dfdx = ct::derivative(f, x);  // another type, simplified at compile time
  std::cout << "f      = " << ct::to_string(f) << "\n";
  std::cout << "df/dx  = " << ct::to_string(dfdx) << "\n";
  static_assert(std::is_same_v<decltype(ct::derivative(y * y, x)), ct::zero>);

  const vec X = {0.1, 0.2, 0.3, 0.4, 0.5};
  const vec Y = {1.0, 0.5, -0.5, 2.0, 1.5};
  std::cout << "f(X, Y) = " << tenferro::Tensor(ct::eval(f, X, Y)) << "\n";

  // Value and both gradients of a scalar loss: one pass over the data.
  auto [loss, grads] = ct::value_and_grad(ct::sum(f), X, Y);
  auto [gx, gy] = grads;
  std::cout << "sum(f) = " << loss << "\n";
  std::cout << "d/dX   = " << tenferro::Tensor(gx) << "\n";
  std::cout << "d/dY   = " << tenferro::Tensor(gy) << "\n";

  // A normal log-density: d/dx, d/dmu and d/dsigma (scalars get the summed adjoint).
  auto [data, mu, sigma] = ct::placeholders<3>();
  auto log_pdf = ct::sum(-0.5 * square((data - mu) / sigma) - log(sigma));
  auto fit = ct::value_and_grad(log_pdf, X, 0.3, 0.2);
  std::cout << "log p  = " << fit.value << ", d/dmu = " << std::get<1>(fit.grad)
            << ", d/dsigma = " << std::get<2>(fit.grad) << "\n";

  // An inner loop that allocates nothing: the value and gradients go into memory it owns (here a
  // plain std::vector seen through xt::adapt), a gradient-descent step at a time.
  std::vector<double> gx_memory(X.size()), gy_memory(Y.size());
  const std::vector<std::size_t> shape{X.size()};
  auto gx_out =
      xt::adapt<xt::layout_type::column_major>(gx_memory.data(), X.size(), xt::no_ownership(), shape);
  auto gy_out =
      xt::adapt<xt::layout_type::column_major>(gy_memory.data(), Y.size(), xt::no_ownership(), shape);
  vec Xs = X, Ys = Y;
  double step_loss = 0;
  for (int step = 0; step < 3; ++step) {
    ct::value_and_grad_into(ct::sum(f), std::tie(step_loss, gx_out, gy_out), Xs, Ys);
    std::cout << "step " << step << ": sum(f) = " << step_loss << "\n";
    Xs -= 0.01 * gx_out;
    Ys -= 0.01 * gy_out;
  }

  // Check against the closed forms, so this example fails loudly if anything is off.
  double expected_loss = 0;
  bool ok = true;
  for (std::size_t i = 0; i < X.size(); ++i) {
    expected_loss += std::sin(X(i)) * Y(i) + std::exp(X(i) * Y(i));
    const double expected_gx = std::cos(X(i)) * Y(i) + std::exp(X(i) * Y(i)) * Y(i);
    ok = ok && std::abs(gx(i) - expected_gx) < 1e-12;
  }
  ok = ok && std::abs(loss - expected_loss) < 1e-12;
  ok = ok && gx_memory[0] != 0.0 && step_loss < loss;  // the steps went downhill
  std::cout << (ok ? "gradients match the closed forms\n" : "MISMATCH\n");
  return ok ? 0 : 1;
}
