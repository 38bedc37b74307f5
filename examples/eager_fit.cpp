// The eager runtime: fit y = a * sin(b * t) to data by gradient descent with backward(), check a
// Hessian-vector product with jvp(grad(...)), and run the same loss as ONE fused node with apply.
// Exits with 1 when a result is off.
#include <tenferro/apply.hpp>
#include <tenferro/tenferro.hpp>

#include <cmath>
#include <iostream>
#include <vector>

int main() {
  using namespace tenferro;
  namespace ct = tenferro::expr;
  auto ctx = EagerRuntime::create();

  // Data from a = 1.5, b = 0.8.
  std::vector<double> ts, ys;
  for (int i = 0; i < 50; ++i) {
    ts.push_back(0.1 * i);
    ys.push_back(1.5 * std::sin(0.8 * 0.1 * i));
  }
  auto t = EagerTensor::from_vec_col_major_in<double>({50}, ts, ctx);
  auto y = EagerTensor::from_vec_col_major_in<double>({50}, ys, ctx);

  auto a = ctx->variable_from(Tensor::from_vec_col_major<double>({}, {1.0}));
  auto b = ctx->variable_from(Tensor::from_vec_col_major<double>({}, {0.7}));
  auto scalar_of = [](const EagerTensor& e) { return e.materialized().as_slice<double>()[0]; };
  auto loss_of = [&](const EagerTensor& a, const EagerTensor& b) {
    return (a * (b * t).sin() - y).square().reduce_mean();
  };
  // The same loss as ONE fused node: forward and the gradient of every input in one pass. Its
  // value and gradients match the op-by-op graph's.
  auto [A, B, T, Y] = ct::placeholders<4>();
  const auto fused_loss = ct::mean(square(A * sin(B * T) - Y));
  auto op_by_op = loss_of(a, b);
  auto fused = apply(fused_loss, a.broadcast_to({50}), b.broadcast_to({50}), t, y);
  const double fused_gap = std::abs(scalar_of(fused) - scalar_of(op_by_op)) +
                           std::abs(scalar_of(ctx->grad(fused, b)) - scalar_of(ctx->grad(op_by_op, b)));
  std::cout << "loss at the start: " << scalar_of(op_by_op) << " op by op, " << scalar_of(fused)
            << " through apply\n";

  for (int step = 0; step < 3000; ++step) {
    loss_of(a, b).backward();  // one reverse sweep fills a.grad() and b.grad()
    NoGradGuard no_grad;       // the update is not part of any graph
    auto next_a = a - ctx->constant_from(*a.grad()).scale(0.05);
    auto next_b = b - ctx->constant_from(*b.grad()).scale(0.05);
    a = ctx->variable_from(next_a.materialized());
    b = ctx->variable_from(next_b.materialized());
  }
  const double fa = scalar_of(a), fb = scalar_of(b);
  std::cout << "fitted a = " << fa << ", b = " << fb << " (data: 1.5, 0.8)\n";

  // Second order: d/db of dL/db, as a Hessian-vector product and as a gradient of a gradient.
  auto loss = loss_of(a, b);
  auto dldb = ctx->grad(loss, b);
  auto one = ctx->constant_from(Tensor::ones({}));
  auto hvp = ctx->jvp(dldb, b, one);
  auto d2 = ctx->grad(dldb, b);
  std::cout << "dL/db = " << dldb.materialized() << ", d2L/db2 = " << hvp.materialized() << " = "
            << d2.materialized() << "\n";

  const bool ok = std::abs(fa - 1.5) < 1e-6 && std::abs(fb - 0.8) < 1e-6 && fused_gap < 1e-12 &&
                  std::abs(scalar_of(hvp) - scalar_of(d2)) < 1e-9;
  return ok ? 0 : 1;
}
