// ad/apply.hpp: a compile-time expression as one tape node — its value and gradients in one fused
// pass, vjp and jvp, higher order through it, and inputs bound as numbers (as_scalar).
#include "../errors.hpp"
#include "../normal_logpdf.hpp"

#include <tenferro/apply.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <cstdint>
#include <random>
#include <vector>

using namespace tenferro;
using tenferro::test::message_of;

namespace {

EagerTensor leaf(const std::shared_ptr<EagerRuntime>& ctx, Shape shape, std::vector<double> data) {
  return EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>(std::move(shape), std::move(data)),
                                       ctx);
}
EagerTensor constant(const std::shared_ptr<EagerRuntime>& ctx, Shape shape, std::vector<double> data) {
  return EagerTensor::from_vec_col_major_in<double>(std::move(shape), std::move(data), ctx);
}
std::vector<double> values(const Tensor& t) {
  const Tensor d = cpu::cast(t, DType::F64);
  auto s = d.as_slice<double>();
  return {s.begin(), s.end()};
}
std::vector<double> values(const EagerTensor& t) { return values(t.materialized()); }
double scalar(const EagerTensor& t) { return values(t).at(0); }

}  // namespace

TEST_CASE("apply: one fused node, its gradients, and higher order through it") {
  namespace ct = tenferro::expr;
  auto ctx = EagerRuntime::create();
  auto [a, b] = ct::placeholders<2>();
  const std::vector<double> xs{0.1, 0.5, -0.3, 1.2}, ys{0.7, -0.2, 0.4, 0.9};
  auto x = leaf(ctx, {4}, xs);
  auto y = leaf(ctx, {4}, ys);
  const auto nodes = live_tape_nodes();
  auto loss = apply(ct::sum(sin(a) * b + exp(a * b)), x, y);
  CHECK(live_tape_nodes() == nodes + 1);
  CHECK(loss.state()->grad_fn->name() == "apply");
  double value = 0;
  for (int i = 0; i < 4; ++i) value += std::sin(xs[i]) * ys[i] + std::exp(xs[i] * ys[i]);
  CHECK(scalar(loss) == Approx(value));
  loss.backward();
  for (int i = 0; i < 4; ++i) {
    CHECK(values(*x.grad())[i] == Approx(std::cos(xs[i]) * ys[i] + std::exp(xs[i] * ys[i]) * ys[i]));
    CHECK(values(*y.grad())[i] == Approx(std::sin(xs[i]) + std::exp(xs[i] * ys[i]) * xs[i]));
  }
  // The same as op by op.
  ctx->clear_grads();
  (x.sin() * y + (x * y).exp()).reduce_sum().backward();
  for (int i = 0; i < 4; ++i) {
    CHECK(values(*x.grad())[i] == Approx(std::cos(xs[i]) * ys[i] + std::exp(xs[i] * ys[i]) * ys[i]));
  }
  // An elementwise apply: vjp and jvp.
  auto e = apply(a * a * b, x, y);
  auto c = constant(ctx, {4}, {1, 2, 3, 4});
  auto dx = ctx->vjp(e, x, c);
  auto tx = ctx->jvp(e, y, c);
  for (int i = 0; i < 4; ++i) {
    CHECK(values(dx)[i] == Approx(2 * xs[i] * ys[i] * (i + 1)));
    CHECK(values(tx)[i] == Approx(xs[i] * xs[i] * (i + 1)));
  }
  // Higher order: the gradient is again one fused node; d²/dx² of sum(a³) = 6a.
  auto cube = apply(ct::sum(a * a * a), x);
  auto g = ctx->grad(cube, x);
  CHECK(g.state()->grad_fn->name() == "apply");
  auto hv = ctx->jvp(g, x, constant(ctx, {4}, {1, 1, 1, 1}));
  for (int i = 0; i < 4; ++i) CHECK(values(hv)[i] == Approx(6 * xs[i]));
  auto third = ctx->grad(ctx->vjp(g, x, constant(ctx, {4}, {1, 0, 0, 0})).reduce_sum(), x);
  CHECK(values(third)[0] == Approx(6));
}

TEST_CASE("apply with as_scalar inputs: numbers of the expression, hoisted, with their gradients") {
  namespace ct = tenferro::expr;
  const auto [x, mu, sigma] = ct::placeholders<3>();
  const auto normal = ct::sum(-0.5 * square((x - mu) / sigma) - log(sigma));
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<double> data(5000);  // several chunks of the fused loop
  for (double& d : data) d = u(rng);
  const tenferro::test::normal_logpdf want(data, 0.3, 1.7);
  for (const DType dtype : {DType::F64, DType::F32}) {
    INFO(dtype_name(dtype));
    const double tol = dtype == DType::F64 ? 1e-12 : 1e-4;
    auto ctx = EagerRuntime::create();
    const auto xs = EagerTensor::from_tensor_in(
        cpu::cast(Tensor::from_vec_col_major<double>({data.size()}, data), dtype), ctx);
    auto m = EagerTensor::requires_grad_in(cpu::cast(Tensor::full({}, 0.3), dtype), ctx);
    auto s = EagerTensor::requires_grad_in(cpu::cast(Tensor::full({}, 1.7), dtype), ctx);
    const EagerTensor loss = apply(normal, xs, as_scalar(m), as_scalar(s));
    CHECK(loss.dtype() == dtype);
    CHECK(scalar(loss) == Approx(want.value).epsilon(tol));
    loss.backward();
    REQUIRE(m.grad()->shape() == Shape{});
    REQUIRE(s.grad()->shape() == Shape{});
    CHECK(m.grad()->dtype() == dtype);
    CHECK(s.grad()->dtype() == dtype);
    CHECK(values(*m.grad())[0] == Approx(want.dmu).epsilon(tol));
    CHECK(values(*s.grad())[0] == Approx(want.dsigma).epsilon(tol));
    {
      NoGradGuard guard;  // the value alone, numbers bound the same way
      CHECK(scalar(apply(normal, xs, as_scalar(m), as_scalar(s))) == Approx(want.value).epsilon(tol));
    }
    // The same node as without as_scalar: vjp, jvp and higher order run its rules on arrays.
    const EagerTensor plain = apply(normal, xs, m, s);
    CHECK(*plain.node_key() == *loss.node_key());
    CHECK(scalar(plain) == Approx(scalar(loss)).epsilon(tol));
    const auto g = ctx->grad(loss, s);  // recorded: differentiable again
    CHECK(scalar(g) == Approx(want.dsigma).epsilon(tol));
    const auto one = EagerTensor::from_tensor_in(cpu::cast(Tensor::full({}, 1.0), dtype), ctx);
    const double h = 1e-5;
    const tenferro::test::normal_logpdf up(data, 0.3, 1.7 + h), down(data, 0.3, 1.7 - h);
    CHECK(scalar(ctx->jvp(g, s, one)) ==
          Approx((up.dsigma - down.dsigma) / (2 * h)).epsilon(dtype == DType::F64 ? 1e-6 : 1e-2));
    // An elementwise expression, and under no_grad (forward only).
    {
      NoGradGuard guard;
      const EagerTensor z = apply((x - mu) / sigma, xs, as_scalar(m), as_scalar(s));
      CHECK(z.shape() == Shape{data.size()});
      CHECK(values(z)[7] == Approx((values(xs)[7] - 0.3) / 1.7).epsilon(tol));
    }
  }
  {
    // Numbers of another dtype than the data (converted to the compute dtype), and a rank-0 view
    // into a larger buffer (its element at the view's offset).
    auto ctx = EagerRuntime::create();
    const auto xs = EagerTensor::from_tensor_in(
        cpu::cast(Tensor::from_vec_col_major<double>({data.size()}, data), DType::F32), ctx);
    const auto mu0 = EagerTensor::from_tensor_in(Tensor::from_vec_col_major<std::int32_t>({}, {0}), ctx);
    const Tensor buffer = Tensor::from_vec_col_major<double>({3}, {9, 1.7, 9});
    const auto s = EagerTensor::requires_grad_in(buffer.as_strided({}, {}, 1), ctx);
    const EagerTensor loss = apply(normal, xs, as_scalar(mu0), as_scalar(s));
    CHECK(loss.dtype() == DType::F64);  // f32 data, i32 and f64 numbers: f64
    const tenferro::test::normal_logpdf at0(values(xs), 0.0, 1.7);
    CHECK(scalar(loss) == Approx(at0.value).epsilon(1e-12));
    loss.backward();
    CHECK(values(*s.grad())[0] == Approx(at0.dsigma).epsilon(1e-12));
    CHECK_FALSE(mu0.grad().has_value());  // an integer operand is a number, with no gradient
    // Complex data: the numbers are arrays of one element to the loop (bound as numbers in f32 and
    // f64 only), with the same value.
    using C = std::complex<double>;
    const auto z = EagerTensor::from_tensor_in(Tensor::from_vec_col_major<C>({2}, {C(1, 2), C(3, -1)}), ctx);
    const auto w = EagerTensor::from_tensor_in(Tensor::from_vec_col_major<C>({}, {C(0, 1)}), ctx);
    const auto zw = apply(ct::sum(x * mu), z, as_scalar(w)).materialized().as_slice<C>()[0];
    CHECK(zw == C(0, 1) * C(4, 1));
  }
  // Only tensors of rank 0 can be numbers; the runtime stays usable. (Init-captures: clang 14
  // cannot capture structured bindings.)
  auto ctx = EagerRuntime::create();
  const auto v = leaf(ctx, {2}, {1, 2});
  const std::string msg = message_of(
      [&, x = x, mu = mu, sigma = sigma] { (void)apply(ct::sum(x * mu * sigma), v, as_scalar(v), v); });
  CHECK(msg.rfind("InvalidArgument in apply", 0) == 0);
  CHECK(msg.find("argument 1") != std::string::npos);
  CHECK(msg.find("[2]") != std::string::npos);
  const auto k = leaf(ctx, {}, {3});
  CHECK(scalar(apply(ct::sum(x * mu * sigma), v, as_scalar(k), v)) == 15);
  // Every input a number.
  const auto both = apply(ct::sum(x * mu + sigma), as_scalar(k), as_scalar(k), as_scalar(k));
  CHECK(scalar(both) == 12);
  both.backward();
  CHECK(values(*k.grad())[0] == 7);  // d/dk (k * k + k) = 2k + 1
}
