// ad/ops: every eager op's vjp and jvp against central finite differences, in f32 and f64, in
// both rule forms: kernels (backward(), transforms under no_grad) and recorded ops (transforms
// while recording, whose results can be differentiated again). Plus known values of each op.
#include "eager_testing.hpp"

#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using Fn = std::function<EagerTensor(const std::vector<EagerTensor>&)>;

struct op_case {
  std::string name;
  Fn f;
  std::vector<Shape> shapes;
  std::vector<domain> domains;
};

void check_case(const op_case& c, DType dtype) {
  INFO("op " << c.name << " in " << dtype_name(dtype));
  auto ctx = EagerRuntime::create();
  std::mt19937 rng(1234);
  const double tol = dtype == DType::F64 ? 1e-6 : 2e-3;
  const double h = 1e-6;
  std::vector<std::vector<double>> x0;
  std::vector<EagerTensor> inputs;
  for (std::size_t k = 0; k < c.shapes.size(); ++k) {
    x0.push_back(random_values(checked_shape_size(c.shapes[k]).value(), c.domains[k], rng));
    inputs.push_back(EagerTensor::requires_grad_in(make(c.shapes[k], x0[k], dtype), ctx));
  }
  const EagerTensor out = c.f(inputs);
  REQUIRE(out.tracks_grad());

  // f at the inputs (as doubles) with input k moved by t along v, evaluated in f64.
  auto f64_at = [&](std::size_t k, const std::vector<double>& v, double t) {
    NoGradGuard guard;
    std::vector<EagerTensor> moved;
    for (std::size_t j = 0; j < x0.size(); ++j) {
      std::vector<double> xj = x0[j];
      if (j == k) {
        for (std::size_t i = 0; i < xj.size(); ++i) xj[i] += t * v[i];
      }
      moved.push_back(EagerTensor::from_tensor_in(make(c.shapes[j], xj, DType::F64), ctx));
    }
    return as_doubles(c.f(moved).materialized());
  };

  for (std::size_t k = 0; k < inputs.size(); ++k) {
    INFO("input " << k);
    const auto v = random_values(x0[k].size(), {}, rng);
    const auto cot = random_values(out.size(), {}, rng);
    const auto plus = f64_at(k, v, h), minus = f64_at(k, v, -h);
    std::vector<double> fd(plus.size());
    for (std::size_t i = 0; i < fd.size(); ++i) fd[i] = (plus[i] - minus[i]) / (2 * h);
    const double fd_vjp = dot(cot, fd);

    auto tangent = EagerTensor::from_tensor_in(make(c.shapes[k], v, dtype), ctx);
    auto cotangent = EagerTensor::from_tensor_in(make(out.shape(), cot, out.dtype()), ctx);

    // Recorded rules (transforms while recording).
    const auto jt = ctx->jvp(out, inputs[k], tangent);
    require_close(as_doubles(jt.materialized()), fd, tol, "traced jvp");
    const auto vt = ctx->vjp(out, inputs[k], cotangent);
    CHECK(vt.dtype() == dtype);
    CHECK(vt.shape() == c.shapes[k]);
    require_close({dot(as_doubles(vt.materialized()), v)}, {fd_vjp}, tol, "traced vjp");
    {
      // Kernel rules (transforms under no_grad, and backward()).
      NoGradGuard guard;
      const auto jk = ctx->jvp(out, inputs[k], tangent);
      require_close(as_doubles(jk.materialized()), fd, tol, "kernel jvp");
      const auto vk = ctx->vjp(out, inputs[k], cotangent);
      require_close({dot(as_doubles(vk.materialized()), v)}, {fd_vjp}, tol, "kernel vjp");
    }
    ctx->clear_grads();
    out.backward_with(cotangent);
    const Tensor g = *inputs[k].grad();
    CHECK(g.dtype() == dtype);
    require_close({dot(as_doubles(g), v)}, {fd_vjp}, tol, "backward");
  }
}

template <class M>
op_case unary(std::string name, M method, domain d = {}) {
  return {name, [method](const std::vector<EagerTensor>& x) { return (x[0].*method)(); }, {{3, 4}}, {d}};
}
template <class M>
op_case binary(std::string name, M method, Shape a, Shape b, domain da = {}, domain db = {}) {
  return {
      name, [method](const std::vector<EagerTensor>& x) { return (x[0].*method)(x[1]); }, {a, b}, {da, db}};
}

const domain positive{0.3, 2.0};
const domain away_from_zero{0.2, 2.0, true};

std::vector<op_case> all_cases() {
  using T = EagerTensor;
  std::vector<op_case> cases = {
      unary("neg", &T::neg),
      unary("abs", &T::abs, away_from_zero),
      unary("exp", &T::exp),
      unary("log", &T::log, positive),
      unary("sin", &T::sin),
      unary("cos", &T::cos),
      unary("tanh", &T::tanh),
      unary("sqrt", &T::sqrt, positive),
      unary("rsqrt", &T::rsqrt, positive),
      unary("expm1", &T::expm1),
      unary("log1p", &T::log1p, {-0.5, 2.0}),
      unary("square", &T::square),
      unary("sigmoid", &T::sigmoid),
      binary("add", &T::add, {3, 4}, {3, 4}),
      binary("sub", &T::sub, {3, 4}, {4}),
      binary("mul", &T::mul, {3, 1}, {1, 4}),
      binary("div", &T::div, {3, 4}, {}, {}, away_from_zero),
      binary("pow", &T::pow, {3, 4}, {3, 4}, positive, {-1.5, 1.5}),
      binary("maximum", &T::maximum, {3, 4}, {3, 4}),
      binary("minimum", &T::minimum, {3, 4}, {4}),
      {"scale", [](const auto& x) { return x[0].scale(-2.5); }, {{5}}, {{}}},
      {"add_scalar", [](const auto& x) { return x[0] + 1.5; }, {{5}}, {{}}},
      {"rsub_scalar", [](const auto& x) { return 1.5 - x[0]; }, {{5}}, {{}}},
      {"rdiv_scalar", [](const auto& x) { return 2.0 / x[0]; }, {{5}}, {away_from_zero}},
      {"matmul", [](const auto& x) { return x[0].matmul(x[1]); }, {{3, 2}, {2, 4}}, {{}, {}}},
      {"reshape",
       [](const auto& x) {
         return x[0].reshape({2, 6}).sin();
       },
       {{3, 4}},
       {{}}},
      {"transpose",
       [](const auto& x) {
         return x[0].transpose({2, 0, 1}).square();
       },
       {{2, 3, 4}},
       {{}}},
      {"broadcast_to",
       [](const auto& x) {
         return x[0].broadcast_to({3, 2, 4}).sin();
       },
       {{2, 1}},
       {{}}},
      {"sum_to", [](const auto& x) { return x[0].sin().sum_to({4}); }, {{3, 4}}, {{}}},
      {"to f64 and back",
       [](const auto& x) { return x[0].to(DType::F64).exp().to(x[0].dtype()); },
       {{4}},
       {{}}},
  };
  using R = EagerTensor (EagerTensor::*)(const Axes&) const;
  const std::vector<std::pair<std::string, R>> reductions = {{"reduce_sum", &T::reduce_sum},
                                                             {"reduce_prod", &T::reduce_prod},
                                                             {"reduce_max", &T::reduce_max},
                                                             {"reduce_min", &T::reduce_min},
                                                             {"reduce_mean", &T::reduce_mean}};
  for (const auto& [name, method] : reductions) {
    for (const Axes& axes : {Axes{}, Axes{0}, Axes{1}, Axes{0, 2}, Axes{0, 1, 2}}) {
      std::string label = name + " axes {";
      for (auto a : axes) label += std::to_string(a) + ",";
      cases.push_back({label + "}",
                       [m = method, axes](const auto& x) { return (x[0].*m)(axes); },
                       {{2, 3, 2}},
                       {away_from_zero}});
    }
  }
  cases.push_back({"reduce_sum all", [](const auto& x) { return x[0].reduce_sum(); }, {{3, 4}}, {{}}});
  cases.push_back({"reduce_max all", [](const auto& x) { return x[0].reduce_max(); }, {{3, 4}}, {{}}});
  cases.push_back({"reduce_mean all", [](const auto& x) { return x[0].reduce_mean(); }, {{3, 4}}, {{}}});
  return cases;
}

}  // namespace

TEST_CASE("every eager op: vjp and jvp against finite differences, f64") {
  for (const auto& c : all_cases()) check_case(c, DType::F64);
}

TEST_CASE("every eager op: vjp and jvp against finite differences, f32") {
  for (const auto& c : all_cases()) check_case(c, DType::F32);
}

TEST_CASE("op values") {
  auto ctx = EagerRuntime::create();
  auto x = EagerTensor::from_vec_col_major_in<double>({2, 3}, {1, -2, 3, -4, 5, -6}, ctx);
  auto vals = [](const EagerTensor& t) { return as_doubles(t.materialized()); };
  CHECK(vals(x.abs()) == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(vals(x.sign()) == std::vector<double>{1, -1, 1, -1, 1, -1});
  CHECK(vals(x.reduce_sum({0})) == std::vector<double>{-1, -1, -1});
  CHECK(vals(x.reduce_sum({1})) == std::vector<double>{9, -12});
  CHECK(vals(x.reduce_sum({})) == vals(x));
  CHECK(x.reduce_sum().rank() == 0);
  CHECK(vals(x.reduce_sum()) == std::vector<double>{-3});
  CHECK(vals(x.reduce_prod({0})) == std::vector<double>{-2, -12, -30});
  CHECK(vals(x.reduce_max({1})) == std::vector<double>{5, -2});
  CHECK(vals(x.reduce_min()) == std::vector<double>{-6});
  CHECK(vals(x.reduce_mean({0})) == std::vector<double>{-0.5, -0.5, -0.5});
  CHECK(vals(x.transpose({1, 0})) == std::vector<double>{1, 3, 5, -2, -4, -6});
  CHECK(x.reshape({3, 2}).shape() == Shape{3, 2});
  auto m = EagerTensor::from_vec_col_major_in<double>({2, 2}, {1, 3, 2, 4}, ctx);  // [[1, 2], [3, 4]]
  CHECK(vals(m.matmul(m)) == std::vector<double>{7, 15, 10, 22});
  CHECK(vals(x.maximum(x.neg())) == std::vector<double>{1, 2, 3, 4, 5, 6});
  const auto p = vals(m.pow(m));  // within an ulp (expr/ops/math_pow.hpp)
  const std::vector<double> p_want{1, 27, 4, 256};
  for (std::size_t i = 0; i < 4; ++i) CHECK(p[i] == Approx(p_want[i]).epsilon(1e-14));
  // Ties: max splits the cotangent evenly; prod at a zero is the product of the others.
  auto t = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({4}, {2, 1, 2, 0}), ctx);
  t.reduce_max().backward();
  CHECK(as_doubles(*t.grad()) == std::vector<double>{0.5, 0, 0.5, 0});
  ctx->clear_grads();
  t.reduce_prod().backward();
  CHECK(as_doubles(*t.grad()) == std::vector<double>{0, 0, 0, 4});
  // The recorded prod rule at zeros: exact, and differentiable again. prod(t) over [2, 1, 2, 0]:
  // the gradient is [0, 0, 0, 4]; the Hessian is H_ij = Π_{k≠i,j} t_k (i ≠ j), so H·1 is
  // [t1 t2, t0 t2, t0 t1, t1 t2 + t0 t2 + t0 t1] = [2, 4, 2, 8] (the other terms hold t3 = 0).
  const auto g = ctx->grad(t.reduce_prod(), t);
  CHECK(as_doubles(g.materialized()) == std::vector<double>{0, 0, 0, 4});
  const auto hv = ctx->jvp(g, t, ctx->constant_from(Tensor::ones({4})));
  CHECK(as_doubles(hv.materialized()) == std::vector<double>{2, 4, 2, 8});
  auto u = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({2, 3}, {1, 0, 2, 3, 0, 4}), ctx);
  CHECK(as_doubles(ctx->grad(u.reduce_prod({1}).reduce_sum(), u).materialized()) ==
        std::vector<double>{0, 12, 0, 0, 2, 0});  // rows [1, 2, 0] and [0, 3, 4]
  // Threads do not change results.
  auto big = EagerTensor::from_tensor_in(Tensor::full({100000}, 0.1),
                                         EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1)));
  auto big2 = big.detach_into(EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2)));
  CHECK(vals(big.sin().reduce_sum()) == vals(big2.sin().reduce_sum()));
}

TEST_CASE("transpose, reshape and broadcast_to are views of their input's buffer") {
  auto ctx = EagerRuntime::create();
  const auto x = EagerTensor::requires_grad_in(
      Tensor::from_vec_col_major<double>({2, 3}, {1, -2, 3, -4, 5, -6}), ctx);  // [[1, 3, 5], [-2, -4, -6]]
  const Tensor buffer = x.materialized();
  const auto t = x.transpose({1, 0});
  CHECK(t.materialized().shares_storage_with(buffer));
  CHECK(t.materialized().strides() == Strides{2, 1});
  const auto r = x.reshape({3, 2});
  CHECK(r.materialized().shares_storage_with(buffer));
  CHECK(r.materialized().is_contiguous());
  const auto b = x.reshape({2, 3, 1}).broadcast_to({2, 3, 4});
  CHECK(b.materialized().shares_storage_with(buffer));
  CHECK(b.materialized().strides() == Strides{1, 2, 0});
  // Reshaping a non-contiguous view copies once (the transposed elements in order).
  const auto tr = t.reshape({6});
  CHECK_FALSE(tr.materialized().shares_storage_with(buffer));
  CHECK(as_doubles(tr.materialized()) == std::vector<double>{1, 3, 5, -2, -4, -6});

  // Ops read views as the tensors they stand for, and differentiate through them.
  auto vals = [](const EagerTensor& e) { return as_doubles(e.materialized()); };
  CHECK(vals(t.mul(t)) == std::vector<double>{1, 9, 25, 4, 16, 36});
  CHECK(vals(t.add(x.transpose({1, 0}).neg())) == std::vector<double>(6, 0.0));
  CHECK(vals(t.reduce_sum({0})) == std::vector<double>{9, -12});
  CHECK(vals(b.reduce_sum({2})) == std::vector<double>{4, -8, 12, -16, 20, -24});
  CHECK(vals(t.sin()) == vals(x.sin().transpose({1, 0})));
  const auto w = EagerTensor::from_vec_col_major_in<double>({3, 2}, {1, 2, 3, 4, 5, 6}, ctx);
  const auto loss = t.mul(w).reduce_sum().add(b.square().reduce_sum());
  loss.backward();
  // d/dx of sum(x^T * w) is w^T; of sum over 4 copies of x^2 is 8 x.
  CHECK(as_doubles(*x.grad()) == std::vector<double>{1 + 8, 4 - 16, 2 + 24, 5 - 32, 3 + 40, 6 - 48});
  CHECK(as_doubles(buffer) == std::vector<double>{1, -2, 3, -4, 5, -6});  // the leaf is unchanged
}
