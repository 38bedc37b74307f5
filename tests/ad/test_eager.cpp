// ad/: EagerRuntime and EagerTensor — construction, slots and backward, the functional transforms,
// higher order, errors and memory (apply: test_apply.cpp).
#include <tenferro/ad/transforms.hpp>       // detail::ad::vjp_rules_run
#include <tenferro/core/detail/config.hpp>  // TENFERRO_ASAN
#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include "../errors.hpp"

#include <cmath>
#include <sstream>
#include <vector>

using namespace tenferro;
using Catch::Matchers::Contains;
using tenferro::test::kind_of;
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
  auto s = t.as_slice<double>();
  return {s.begin(), s.end()};
}
std::vector<double> values(const EagerTensor& t) { return values(t.materialized()); }
double scalar(const EagerTensor& t) { return values(t).at(0); }

}  // namespace

TEST_CASE("runtimes: ids, backends, printing") {
  auto a = EagerRuntime::create();
  auto b = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
  auto c = EagerRuntime::with_cpu_backend_and_ad_context(CpuBackend::create(), AdContext::builder().build());
  CHECK(a->id() != b->id());
  CHECK(b->id() != c->id());
  CHECK(a->id() == a->id());
  CHECK(b->backend().threads() == 2);
  CHECK(EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1))->backend().threads() == 1);
  CHECK(kind_of([] { (void)CpuBackend::with_threads(0); }) == ErrorKind::InvalidArgument);
  a->synchronize();
  std::ostringstream os;
  os << *b << " " << b->id();
  CHECK_THAT(os.str(), Contains("EagerRuntime(id=ContextId(" + std::to_string(b->id().value()) + ")"));
  CHECK_THAT(os.str(), Contains("threads=2"));
}

TEST_CASE("tensors: construction, metadata, printing") {
  auto ctx = EagerRuntime::create();
  auto x = EagerTensor::from_vec_col_major_in<double>({2, 3}, {1, 2, 3, 4, 5, 6}, ctx);
  CHECK(x.shape() == Shape{2, 3});
  CHECK(x.rank() == 2);
  CHECK(x.dtype() == DType::F64);
  CHECK_FALSE(x.tracks_grad());
  CHECK(values(x) == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(x.context() == ctx);
  auto v = ctx->variable_from(Tensor::from_vec_col_major<float>({2}, {1.f, 2.f}));
  CHECK(v.tracks_grad());
  CHECK(v.dtype() == DType::F32);
  CHECK_FALSE(v.grad().has_value());
  CHECK_FALSE(ctx->constant_from(Tensor::ones({2})).tracks_grad());
  CHECK_FALSE(v.detach().tracks_grad());
  auto other = EagerRuntime::create();
  auto moved = v.detach_into(other);
  CHECK(moved.context() == other);
  CHECK_FALSE(moved.same_context(v));
  CHECK(v.same_context(x));
  std::ostringstream os;
  os << v;
  CHECK_THAT(os.str(), Contains("shape=[2]") && Contains("dtype=f32") && Contains("tracks_grad=true") &&
                           Contains("1, 2"));
}

TEST_CASE("backward accumulates into the slots of the leaves") {
  auto ctx = EagerRuntime::create();
  auto x = leaf(ctx, {3}, {1, 2, 3});
  (x * x).reduce_sum().backward();
  CHECK(values(*x.grad()) == std::vector<double>{2, 4, 6});
  (x * x).reduce_sum().backward();
  CHECK(values(*x.grad()) == std::vector<double>{4, 8, 12});
  ctx->clear_grads();
  CHECK_FALSE(x.grad().has_value());
  (x + x).reduce_sum().backward();
  CHECK(values(*x.grad()) == std::vector<double>{2, 2, 2});
  x.clear_grad();
  CHECK_FALSE(x.grad().has_value());

  auto y = leaf(ctx, {3}, {4, 5, 6});
  auto loss = x.mul(y).reduce_sum({0});
  loss.backward();
  CHECK(values(*x.grad()) == std::vector<double>{4, 5, 6});
  CHECK(values(*y.grad()) == std::vector<double>{1, 2, 3});
  CHECK(scalar(loss) == 32);
}

TEST_CASE("backward is one sweep: each node rule runs once however many leaves") {
  auto ctx = EagerRuntime::create();
  std::vector<EagerTensor> leaves;
  for (int k = 0; k < 10; ++k) leaves.push_back(leaf(ctx, {2}, {1.0 + k, 2.0}));
  EagerTensor acc = leaves[0];
  for (int k = 1; k < 10; ++k) acc = acc * leaves[k];  // 9 muls
  auto loss = acc.sin().reduce_sum();                  // + sin + reduce_sum = 11 nodes
  const auto before = detail::ad::vjp_rules_run().load();
  loss.backward();
  CHECK(detail::ad::vjp_rules_run().load() - before == 11);
  // d/dx0 of sum(sin(prod_k x_k)) = cos(prod) * prod / x0
  double p = 1;
  for (int k = 0; k < 10; ++k) p *= 1.0 + k;
  CHECK(values(*leaves[0].grad())[0] == Approx(std::cos(p) * p / 1.0));
  CHECK(values(*leaves[3].grad())[0] == Approx(std::cos(p) * p / 4.0));
}

TEST_CASE("functional transforms leave the slots alone") {
  auto ctx = EagerRuntime::create();
  auto x = leaf(ctx, {2}, {2, 3});
  auto y = x * x;
  auto dx = ctx->vjp(y, x, constant(ctx, {2}, {1, 1}));
  CHECK(values(dx) == std::vector<double>{4, 6});
  CHECK_FALSE(x.grad().has_value());
  auto t = ctx->jvp(y, x, constant(ctx, {2}, {1, 0.5}));
  CHECK(values(t) == std::vector<double>{4, 3});
  auto s = leaf(ctx, {}, {3});
  CHECK(scalar(ctx->grad(s * s, s)) == 6);
  CHECK_FALSE(s.grad().has_value());
}

TEST_CASE("inactive inputs: nullopt from the _optional forms, Inactive from the plain ones") {
  auto ctx = EagerRuntime::create();
  auto x = leaf(ctx, {}, {3});
  auto y = leaf(ctx, {}, {4});
  auto loss = y * y;
  auto one = constant(ctx, {}, {1});
  CHECK_FALSE(ctx->grad_optional(loss, x).has_value());
  CHECK_FALSE(ctx->vjp_optional(loss, x, one).has_value());
  CHECK_FALSE(ctx->jvp_optional(loss, x, one).has_value());
  CHECK(kind_of([&] { (void)ctx->grad(loss, x); }) == ErrorKind::Inactive);
  CHECK(kind_of([&] { (void)ctx->vjp(loss, x, one); }) == ErrorKind::Inactive);
  CHECK(kind_of([&] { (void)ctx->jvp(loss, x, one); }) == ErrorKind::Inactive);
  auto c = constant(ctx, {}, {2});
  CHECK_FALSE(ctx->grad_optional(c * c, c).has_value());
  CHECK(kind_of([&] { (c * c).backward(); }) == ErrorKind::Inactive);
  CHECK(scalar(*ctx->grad_optional(loss, y)) == 8);
}

TEST_CASE("no_grad: untracked results inside the scope, tracked after") {
  auto ctx = EagerRuntime::create();
  auto x = leaf(ctx, {1}, {3});
  {
    auto guard = ctx->no_grad();
    CHECK_FALSE(NoGradGuard::grad_enabled());
    CHECK_FALSE((x * x).tracks_grad());
    {
      NoGradGuard nested;
      CHECK_FALSE(x.exp().tracks_grad());
    }
    CHECK_FALSE(x.sin().tracks_grad());
    // Other runtimes on this thread too.
    auto other = EagerRuntime::create();
    CHECK_FALSE((leaf(other, {1}, {1}) * 2.0).tracks_grad());
  }
  CHECK(NoGradGuard::grad_enabled());
  CHECK((x * x).tracks_grad());
}

TEST_CASE("errors: kinds, order and messages") {
  auto ctx = EagerRuntime::create();
  auto other = EagerRuntime::create();
  auto x = leaf(ctx, {3}, {1, 2, 3});
  auto f = leaf(other, {3}, {1, 2, 3});

  const auto mismatch = message_of([&] { (void)x.add(f); });
  CHECK_THAT(mismatch, Contains("ContextMismatch in add") && Contains("different eager AD contexts"));
  CHECK(kind_of([&] { (void)ctx->grad(x.reduce_sum(), f); }) == ErrorKind::ContextMismatch);
  CHECK(kind_of([&] { (void)other->grad(x.reduce_sum(), x); }) == ErrorKind::ContextMismatch);

  // Non-scalar output comes first, with its shape.
  const auto nonscalar = message_of([&] { (void)ctx->grad(x * x, f); });
  CHECK_THAT(nonscalar, Contains("NonScalarGrad in grad") && Contains("[3]"));
  CHECK(kind_of([&] { (x * x).backward(); }) == ErrorKind::NonScalarGrad);

  // Cotangent / tangent: dtype, then shape.
  auto y = x * x;
  auto f32 = EagerTensor::from_tensor_in(Tensor::ones({3}, DType::F32), ctx);
  CHECK(kind_of([&] { (void)ctx->vjp(y, x, f32); }) == ErrorKind::DtypeMismatch);
  CHECK_THAT(message_of([&] {
               (void)ctx->vjp(y, x, constant(ctx, {2}, {1, 1}));
             }),
             Contains("ShapeMismatch in vjp") && Contains("[2]") && Contains("[3]"));
  CHECK(kind_of([&] { (void)ctx->jvp(y, x, f32); }) == ErrorKind::DtypeMismatch);
  CHECK(kind_of([&] { (void)ctx->jvp(y, x, constant(ctx, {1}, {1})); }) == ErrorKind::ShapeMismatch);
  CHECK(kind_of([&] { y.backward_with(constant(ctx, {2}, {1, 1})); }) == ErrorKind::ShapeMismatch);

  // Axes, shapes, dtypes of ops.
  auto m = leaf(ctx, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK_THAT(message_of([&] { (void)m.reduce_sum({2}); }),
             Contains("Validation in reduce_sum") && Contains("axis 2") && Contains("rank 2"));
  CHECK(kind_of([&] { (void)m.reduce_max({1, 1}); }) == ErrorKind::Validation);
  CHECK(kind_of([&] { (void)m.transpose({0, 0}); }) == ErrorKind::Validation);
  CHECK_THAT(message_of([&] {
               (void)m.add(constant(ctx, {2}, {1, 2}));
             }),
             Contains("ShapeMismatch in add") && Contains("[2, 3]") && Contains("[2]"));
  CHECK(kind_of([&] { (void)m.reshape({4}); }) == ErrorKind::ShapeMismatch);
  CHECK(kind_of([&] { (void)m.matmul(m); }) == ErrorKind::ShapeMismatch);
  auto complexes = EagerTensor::from_tensor_in(Tensor::zeros({3}, DType::C64), ctx);
  CHECK_THAT(message_of([&] { (void)x.maximum(complexes); }),
             Contains("Unsupported in maximum") && Contains("c64"));

  // A failed op records nothing and the runtime keeps working.
  const auto nodes = live_tape_nodes();
  CHECK_THROWS_AS(m.reduce_sum({5}), Error);
  CHECK_THROWS_AS(x.add(f), Error);
  CHECK(live_tape_nodes() == nodes);
  (x * x).reduce_sum().backward();
  CHECK(values(*x.grad()) == std::vector<double>{2, 4, 6});
}

TEST_CASE("broadcasting and dtype promotion, with gradients back in each input's shape and dtype") {
  auto ctx = EagerRuntime::create();
  auto m = leaf(ctx, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto row = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<float>({3}, {1.f, 10.f, 100.f}), ctx);
  auto z = m * row;  // [2, 3] * [3] → [2, 3], f64
  CHECK(z.dtype() == DType::F64);
  CHECK(values(z) == std::vector<double>{1, 2, 30, 40, 500, 600});
  z.reduce_sum().backward();
  CHECK(values(*m.grad()) == std::vector<double>{1, 1, 10, 10, 100, 100});
  const Tensor g = *row.grad();
  CHECK(g.dtype() == DType::F32);
  CHECK(g.shape() == Shape{3});
  const auto gs = g.as_slice<float>();
  CHECK(std::vector<float>(gs.begin(), gs.end()) == std::vector<float>{3, 7, 11});
}

TEST_CASE("higher order: grad of grad and Hessian-vector products") {
  auto ctx = EagerRuntime::create();
  auto x = leaf(ctx, {}, {3});
  auto one = constant(ctx, {}, {1});
  auto g = ctx->grad(x * x, x);
  CHECK(scalar(g) == 6);
  CHECK(g.tracks_grad());
  CHECK(scalar(ctx->jvp(g, x, one)) == 2);
  auto g3 = ctx->grad(x * x * x, x);
  CHECK(scalar(g3) == 27);
  CHECK(scalar(ctx->jvp(g3, x, one)) == 18);
  CHECK(scalar(ctx->grad(g3, x)) == 18);
  CHECK(scalar(ctx->grad(ctx->grad(g3, x), x)) == 6);
  // Through unary ops: d²/dx² sin(x) exp(x) = 2 cos(x) exp(x).
  auto h = ctx->grad(ctx->grad(x.sin() * x.exp(), x), x);
  CHECK(scalar(h) == Approx(2 * std::cos(3.0) * std::exp(3.0)));
  // HVP of sum(x_i^2 y) w.r.t. vector x: H = 2y I.
  auto v = leaf(ctx, {3}, {1, 2, 3});
  auto yv = constant(ctx, {}, {5});
  auto gv = ctx->grad((v * v * yv).reduce_sum(), v);
  CHECK(values(ctx->jvp(gv, v, constant(ctx, {3}, {1, 0, -1}))) == std::vector<double>{10, 0, -10});
  // Under no_grad the transform runs on kernels and gives an untracked result.
  auto cube = x * x * x;
  {
    NoGradGuard guard;
    auto plain = ctx->grad(cube, x);
    CHECK(scalar(plain) == 27);
    CHECK_FALSE(plain.tracks_grad());
  }
}

TEST_CASE("backward with create_graph leaves differentiable gradients") {
  auto ctx = EagerRuntime::create();
  auto x = leaf(ctx, {}, {3});
  (x * x * x).backward({.create_graph = true});
  CHECK(values(*x.grad()) == std::vector<double>{27});
  auto g = *x.grad_tensor();
  CHECK(g.tracks_grad());
  CHECK(scalar(ctx->grad(g, x)) == 18);
  ctx->clear_grads();
  CHECK_FALSE(x.grad_tensor().has_value());
}

TEST_CASE("with_execution_session runs provider-neutral ops on plain tensors") {
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  const Tensor a = Tensor::from_vec_col_major<double>({1}, {1.0});
  const Tensor b = Tensor::from_vec_col_major<double>({1}, {2.0});
  auto out = ctx->with_execution_session([&](BackendSession& s) { return s.add(a, b); });
  CHECK(values(out) == std::vector<double>{3});
  auto m = ctx->with_execution_session([&](BackendSession& s) {
    CHECK(s.backend_name() == "cpu");
    return s.reduce_sum(s.matmul(Tensor::ones({2, 3}), Tensor::ones({3, 2})), Axes{0});
  });
  CHECK(values(m) == std::vector<double>{6, 6});
}

TEST_CASE("memory: graphs die with their tensors, 10^6 training steps (2 10^5 under ASan) stay flat") {
  auto ctx = EagerRuntime::create();
  const auto start = live_tape_nodes();
  {
    auto x = leaf(ctx, {2}, {1, 2});
    auto y = (x * x).sin().reduce_sum();
    CHECK(live_tape_nodes() == start + 3);
  }
  CHECK(live_tape_nodes() == start);
  // A deep chain is destroyed without recursion.
  {
    auto x = leaf(ctx, {1}, {0.5});
    EagerTensor acc = x;
    for (int k = 0; k < 200000; ++k) acc = acc.add_scalar(1e-6);
    CHECK(live_tape_nodes() == start + 200000);
  }
  CHECK(live_tape_nodes() == start);
  // ... also when every op reads its input twice.
  {
    auto x = leaf(ctx, {1}, {1.0});
    EagerTensor acc = x;
    for (int k = 0; k < 200000; ++k) acc = acc * acc;
    CHECK(live_tape_nodes() == start + 200000);
    CHECK(acc.materialized().as_slice<double>()[0] == 1.0);
  }
  CHECK(live_tape_nodes() == start);
  // Training steps: w -= 0.1 * d/dw sum((w - target)^2).
  auto w = leaf(ctx, {2}, {0, 0});
  auto target = constant(ctx, {2}, {1, -1});
  constexpr int steps = TENFERRO_ASAN ? 200000 : 1000000;
  for (int step = 0; step < steps; ++step) {
    ((w - target).square()).reduce_sum().backward();
    if (step % 1000 == 999 || step < 50) {
      NoGradGuard guard;
      auto next = w.detach() - ctx->constant_from(*w.grad()).scale(0.1 / (step < 50 ? 1 : 1000));
      w = EagerTensor::requires_grad_in(next.materialized(), ctx);
    }
    if (step == 1) CHECK(live_tape_nodes() == start);
  }
  CHECK(live_tape_nodes() == start);
  CHECK(values(w)[0] == Approx(1).margin(1e-6));
  CHECK(values(w)[1] == Approx(-1).margin(1e-6));
}

TEST_CASE("memory: backward and jvp release each cotangent or tangent once it has been consumed") {
  // A chain of 100 ops on 16384 doubles (128 KiB buffers, which the buffer cache counts), fusion
  // off so every cotangent is a stored buffer. The forward values live with the graph; backward
  // adds only the few cotangents in flight (it kept all 100 until the end). (With create_graph the
  // gradient's own graph holds the cotangents its nodes read, as it must.)
  {
    auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1).with_fusion(false));
    const std::size_t n = 16384, bytes = n * sizeof(double);
    auto x = EagerTensor::requires_grad_in(Tensor::full({n}, 0.5), ctx);
    EagerTensor y = x;
    for (int k = 0; k < 25; ++k) y = (y.sin() + 0.5).tanh() * x;
    const EagerTensor loss = y.reduce_sum();
    reset_buffer_peak();
    const std::size_t before = buffer_cache_stats().live_bytes;
    loss.backward();
    const std::size_t added = buffer_cache_stats().peak_live_bytes - before;
    INFO("peak added by backward: " << added / bytes << " buffers of " << bytes << " bytes");
    CHECK(added <= 8 * bytes);
    // The gradient is still right: d/dx of the chain, against a central difference of it.
    auto chain = [&](double v) {
      const NoGradGuard no_grad;
      const auto t = EagerTensor::from_tensor_in(Tensor::full({1}, v), ctx);
      EagerTensor u = t;
      for (int k = 0; k < 25; ++k) u = (u.sin() + 0.5).tanh() * t;
      return u.materialized().as_slice<double>()[0];
    };
    const double fd = (chain(0.5 + 1e-6) - chain(0.5 - 1e-6)) / 2e-6;
    CHECK(x.grad()->as_slice<double>()[n - 1] == Approx(fd).epsilon(1e-7));
    x.clear_grad();
    // A forward sweep through the same chain holds a few tangents at a time too.
    const NoGradGuard no_grad;
    reset_buffer_peak();
    const std::size_t live = buffer_cache_stats().live_bytes;
    const EagerTensor t = ctx->jvp(y, x, EagerTensor::from_tensor_in(Tensor::ones({n}), ctx));
    INFO("peak added by jvp: " << (buffer_cache_stats().peak_live_bytes - live) / bytes << " buffers");
    CHECK(buffer_cache_stats().peak_live_bytes - live <= 8 * bytes);
    CHECK(t.materialized().as_slice<double>()[0] == Approx(fd).epsilon(1e-7));
  }
}
