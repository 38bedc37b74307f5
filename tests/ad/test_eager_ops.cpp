// ad/ops: every eager op's vjp and jvp against central finite differences, in f32 and f64, in
// both rule forms: kernels (backward(), transforms under no_grad) and recorded ops (transforms
// while recording, whose results can be differentiated again). Plus known values of each op.
#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace tenferro;

namespace {

using Fn = std::function<EagerTensor(const std::vector<EagerTensor>&)>;

// Where an input is drawn: uniform in [lo, hi], with a random sign when either_sign.
struct domain {
  double lo = -2.0;
  double hi = 2.0;
  bool either_sign = false;
};

struct op_case {
  std::string name;
  Fn f;
  std::vector<Shape> shapes;
  std::vector<domain> domains;
};

std::vector<double> random_values(std::size_t n, domain d, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(d.lo, d.hi);
  std::bernoulli_distribution coin(0.5);
  std::vector<double> v(n);
  for (auto& x : v) x = (d.either_sign && coin(rng) ? -1.0 : 1.0) * u(rng);
  return v;
}

Tensor make(const Shape& shape, const std::vector<double>& v, DType dtype) {
  return cpu::cast(Tensor::from_vec_col_major<double>(shape, v), dtype);
}

std::vector<double> as_doubles(const Tensor& t) {
  const Tensor d = cpu::cast(t, DType::F64);
  auto s = d.as_slice<double>();
  return {s.begin(), s.end()};
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                   const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << " element " << i << ": got " << got[i] << ", want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

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

// Deferred fusion (ad/deferred.hpp): large elementwise ops run later, together, block by block.
namespace {

// x, y of n elements in [-1, 1] on a runtime with fusion on or off and `threads` threads.
struct fusion_inputs {
  std::shared_ptr<EagerRuntime> rt;
  EagerTensor x, y;
  fusion_inputs(bool fuse, std::size_t threads, DType dtype, std::size_t n) : x(make(fuse, threads)), y(x) {
    std::mt19937 rng(7);
    auto values = [&] {
      std::vector<double> v = random_values(n, {-1, 1}, rng);
      return Tensor::from_vec_col_major<double>({n}, v);
    };
    x = EagerTensor::requires_grad_in(cpu::cast(values(), dtype), rt);
    y = EagerTensor::requires_grad_in(cpu::cast(values(), dtype), rt);
  }
  EagerTensor make(bool fuse, std::size_t threads) {
    rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(threads).with_fusion(fuse));
    return EagerTensor::from_tensor_in(Tensor::zeros({1}), rt);
  }
};

// sin(x) and cos(x) in one pass share one sincos; cos(y) has no partner.
EagerTensor fusion_loss_body(const EagerTensor& x, const EagerTensor& y) {
  return (x.sin() * y + (x * y).exp()).tanh() * 0.5 - (y.square() + 1.0).log() + y.cos() * x.cos();
}

}  // namespace

TEST_CASE("deferred fusion: values bit-identical to op by op, one pass, any thread count") {
  for (const DType dtype : {DType::F64, DType::F32}) {
    // The largest size writes with streaming stores (a pass writing >= 4 MB), its last tile not
    // whole cache lines.
    for (const std::size_t n : {std::size_t(16384), std::size_t(100003), (std::size_t(1) << 20) + 3}) {
      fusion_inputs off(false, 1, dtype, n);
      const Tensor want = fusion_loss_body(off.x, off.y).materialized();
      const Tensor want_sum = fusion_loss_body(off.x, off.y).reduce_sum().materialized();
      for (const std::size_t threads : {1, 2}) {
        fusion_inputs on(true, threads, dtype, n);
        const EagerTensor body = fusion_loss_body(on.x, on.y);
        CHECK(body.state()->deferred());
        CHECK(body.shape() == Shape{n});  // shape and dtype without computing
        CHECK(body.dtype() == dtype);
        const auto before = detail::ad::deferred_passes().load();
        const Tensor got = body.materialized();
        CHECK(detail::ad::deferred_passes().load() == before + 1);  // the whole chain in one pass
        CHECK_FALSE(body.state()->deferred());
        CHECK(as_doubles(got) == as_doubles(want));
        // A sum over every element of a deferred value never writes that value, and sums the
        // same chunks in the same order.
        const EagerTensor again = fusion_loss_body(on.x, on.y);
        CHECK(as_doubles(again.reduce_sum().materialized()) == as_doubles(want_sum));
        CHECK(again.state()->deferred());
      }
    }
  }
}

TEST_CASE("deferred fusion: backward and grad agree with op by op and with the analytic gradient") {
  // 50001: gradients written through the caches; 2^20 + 3 doubles: with streaming stores.
  for (const std::size_t n : {std::size_t(50001), (std::size_t(1) << 20) + 3}) {
    INFO("n = " << n);
    auto run = [&](bool fuse, std::size_t threads) {
      fusion_inputs in(fuse, threads, DType::F64, n);
      (in.x.sin() * in.y + (in.x * in.y).exp()).reduce_sum().backward();
      return std::pair{as_doubles(*in.x.grad()), as_doubles(*in.y.grad())};
    };
    const auto [gx, gy] = run(true, 1);
    const auto [gx_off, gy_off] = run(false, 1);
    const auto [gx2, gy2] = run(true, 2);
    CHECK(gx2 == gx);  // bit-identical for 1 and 2 threads
    CHECK(gy2 == gy);
    require_close(gx, gx_off, 1e-14, "gx fused vs op by op");
    require_close(gy, gy_off, 1e-14, "gy fused vs op by op");
    fusion_inputs in(false, 1, DType::F64, n);
    const auto x = as_doubles(in.x.materialized()), y = as_doubles(in.y.materialized());
    std::vector<double> ax(n), ay(n);
    for (std::size_t i = 0; i < n; ++i) {
      ax[i] = std::cos(x[i]) * y[i] + std::exp(x[i] * y[i]) * y[i];
      ay[i] = std::sin(x[i]) + std::exp(x[i] * y[i]) * x[i];
    }
    require_close(gx, ax, 1e-13, "gx analytic");
    require_close(gy, ay, 1e-13, "gy analytic");
  }
  const std::size_t n = 50001;

  // The functional transforms: grad of a deferred loss, and grad of grad (recorded, then fused).
  fusion_inputs on(true, 1, DType::F64, n);
  const EagerTensor g = on.rt->grad((on.x * on.x * on.x).reduce_sum(), on.x);  // 3 x^2
  const EagerTensor h = on.rt->grad(g.reduce_sum(), on.x);                     // 6 x
  const auto xs = as_doubles(on.x.materialized());
  std::vector<double> g_want(n), h_want(n);
  for (std::size_t i = 0; i < n; ++i) {
    g_want[i] = 3 * xs[i] * xs[i];
    h_want[i] = 6 * xs[i];
  }
  require_close(as_doubles(g.materialized()), g_want, 1e-14, "grad of x^3");
  require_close(as_doubles(h.materialized()), h_want, 1e-14, "grad of grad of x^3");
}

TEST_CASE("deferred fusion: several values written by one streaming pass, read by later ops in it") {
  // 2^20 + 3 elements: every value >= 4 MB goes out with streaming stores, the last tile by an
  // ordinary copy. sin(x) and cos(x) are a written sincos pair; x * y is written and also read by
  // exp in the same pass.
  for (const DType dtype : {DType::F64, DType::F32}) {
    const std::size_t n = (std::size_t(1) << 20) + 3;
    fusion_inputs off(false, 1, dtype, n);
    const std::vector<double> want_sin = as_doubles(off.x.sin().materialized()),
                              want_cos = as_doubles(off.x.cos().materialized()),
                              want_xy = as_doubles((off.x * off.y).materialized()),
                              want_exp = as_doubles((off.x * off.y).exp().materialized());
    for (const std::size_t threads : {1, 2}) {
      INFO("dtype " << dtype << ", threads " << threads);
      fusion_inputs on(true, threads, dtype, n);
      const EagerTensor s = on.x.sin(), c = on.x.cos(), xy = on.x * on.y, e = xy.exp();
      const std::array<const detail::ad::tensor_state*, 4> states{s.state().get(), c.state().get(),
                                                                  xy.state().get(), e.state().get()};
      const auto before = detail::ad::deferred_passes().load();
      detail::ad::fill_deferred(states);
      CHECK(detail::ad::deferred_passes().load() == before + 1);
      CHECK(as_doubles(s.materialized()) == want_sin);
      CHECK(as_doubles(c.materialized()) == want_cos);
      CHECK(as_doubles(xy.materialized()) == want_xy);
      CHECK(as_doubles(e.materialized()) == want_exp);
    }
  }
}

TEST_CASE("deferred fusion: inputs are released once computed, long chains are bounded, errors stay eager") {
  fusion_inputs in(true, 1, DType::F64, 20000);
  const NoGradGuard no_grad;
  const EagerTensor x = in.x.detach();
  EagerTensor y = x.sin();
  CHECK(x.state().use_count() == 2);  // x and y's pending op
  y.materialized();
  CHECK(x.state().use_count() == 1);
  // 200 ops deferred one after another: computed in passes of at most max_cone ops, same values.
  const auto before = detail::ad::deferred_passes().load();
  EagerTensor acc = x;
  for (int k = 0; k < 200; ++k) acc = (acc * 0.5).sin() + x;
  const Tensor fused = acc.materialized();
  CHECK(detail::ad::deferred_passes().load() - before >= 200 * 3 / detail::ad::max_cone);
  fusion_inputs off(false, 1, DType::F64, 20000);
  EagerTensor ref = off.x.detach();
  for (int k = 0; k < 200; ++k) ref = (ref * 0.5).sin() + off.x.detach();
  CHECK(as_doubles(fused) == as_doubles(ref.materialized()));
  // Validation happens when the op is called, not when it runs.
  const EagerTensor other = EagerTensor::from_tensor_in(Tensor::zeros({19999}), in.rt);
  CHECK_THROWS_AS(x.add(other), Error);
  CHECK_THROWS_AS(x.sin().broadcast_to({3, 20000}).add(x.reshape({2, 10000})), Error);
}

TEST_CASE("deferred fusion: a product with a broadcast 1 reads its other factor, exactly") {
  const std::size_t n = 30001;
  auto run = [&](bool fuse, double c) {
    fusion_inputs in(fuse, 1, DType::F64, n);
    const NoGradGuard no_grad;
    const EagerTensor s = in.x.sin();  // deferred when fusing
    const EagerTensor ones = EagerTensor::from_tensor_in(Tensor::full({}, c), in.rt).broadcast_to({n});
    const EagerTensor a = ones * s;           // skipped by the pass when c == 1
    const EagerTensor b = (s * ones) * in.y;  // reads sin(x) directly when c == 1
    const EagerTensor r = a + b;
    const auto before = detail::ad::deferred_passes().load();
    std::vector<double> got = as_doubles(r.materialized());
    if (fuse) {
      CHECK(detail::ad::deferred_passes().load() == before + 1);
      CHECK(a.state()->deferred());  // never written, never requested
    }
    return got;
  };
  for (const double c : {1.0, 2.0}) {
    INFO("fill " << c);
    const std::vector<double> fused = run(true, c), by_op = run(false, c);
    CHECK(fused == by_op);  // bit for bit: x * 1 == x
    fusion_inputs in(false, 1, DType::F64, n);
    const auto x = as_doubles(in.x.materialized()), y = as_doubles(in.y.materialized());
    for (std::size_t i = 0; i < n; i += 997) {  // xsimd's sin and glibc's differ in the last bit
      CHECK(fused[i] == Approx(std::sin(x[i]) * c + std::sin(x[i]) * c * y[i]).epsilon(1e-14).margin(1e-15));
    }
  }
  // The backward of a full sum broadcasts a 1: the fused gradients still agree with op by op.
  auto grads = [&](bool fuse) {
    fusion_inputs in(fuse, 1, DType::F64, n);
    ((in.x * in.y).exp() + in.x.sin() * in.y).reduce_sum().backward();
    return std::pair{as_doubles(*in.x.grad()), as_doubles(*in.y.grad())};
  };
  const auto [gx, gy] = grads(true);
  const auto [gx_off, gy_off] = grads(false);
  require_close(gx, gx_off, 1e-14, "gx");
  require_close(gy, gy_off, 1e-14, "gy");
}
