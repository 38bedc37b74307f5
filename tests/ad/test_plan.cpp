// ad/plan: the prepared-derivative cache. A graph rebuilt with the same structure is swept by its
// plan; gradients are bit for bit those of the first (cold) sweep and of a runtime with the cache
// off; the cache's stats, limits and clears; graphs the plan must not serve; concurrent sweeps.
#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace tenferro;

namespace {

std::shared_ptr<EagerRuntime> runtime(bool prepared) {
  return EagerRuntime::with_cpu_backend_and_ad_context(
      CpuBackend::with_threads(1), AdContext::builder().with_prepared_derivatives(prepared).build());
}

Tensor vec(std::vector<double> v, Shape shape) {
  return Tensor::from_vec_col_major<double>(shape, std::move(v));
}

std::vector<double> data(std::size_t n, double scale) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * (0.3 + 0.17 * static_cast<double>(i) - 0.01 * i * i);
  return v;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.materialized(), y = b.materialized();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.as_slice<double>().data(), y.as_slice<double>().data(), x.size() * sizeof(double)) ==
             0;
}

// A loss of leaves w (3 x 4), b (4), s (rank 0) and a constant c (3 x 4): matmul, broadcasting
// against a rank-0 leaf, a reduction over one axis, a value used three times, a rule that is
// zero (sign), a Bool condition (where) and a constant operand.
EagerTensor loss_of(const EagerTensor& w, const EagerTensor& b, const EagerTensor& s, const EagerTensor& c) {
  const EagerTensor h = (w.matmul(b.reshape({4, 1})).reshape({3}) * s).tanh();  // 3
  const EagerTensor u = (w * c).sin() + w.square() * s;                         // 3 x 4
  const EagerTensor r = u.reduce_sum({1}) * h + h.exp() * h.sign();             // 3
  const EagerTensor picked = where(r.gt(r.mul(r)), r, h);                       // 3
  return (picked.reduce_sum() + (u * u).reduce_sum() * 0.25) * s;
}

struct gradients {
  std::vector<Tensor> of;  // w, b, s
};

gradients backward_once(const std::shared_ptr<EagerRuntime>& rt, double scale) {
  auto w = rt->variable_from(vec(data(12, scale), {3, 4}));
  auto b = rt->variable_from(vec(data(4, -scale), {4}));
  auto s = rt->variable_from(vec({0.7 * scale}, {}));
  auto c = rt->constant_from(vec(data(12, 0.5), {3, 4}));
  loss_of(w, b, s, c).backward();
  return {{*w.grad(), *b.grad(), *s.grad()}};
}

void require_same(const gradients& a, const gradients& b) {
  REQUIRE(a.of.size() == b.of.size());
  for (std::size_t k = 0; k < a.of.size(); ++k) CHECK(same_bits(a.of[k], b.of[k]));
}

}  // namespace

TEST_CASE("prepared derivatives: the second graph of a structure is a hit, bit for bit the sweep without") {
  auto on = runtime(true), off = runtime(false);
  CHECK(on->cache_stats().prepared_derivatives == CacheStats{});
  CHECK(on->prepared_derivative_cache_limits() == AdTransformCacheLimits{256, std::size_t{64} << 20});

  const gradients cold = backward_once(on, 1.0);
  auto stats = on->cache_stats().prepared_derivatives;
  CHECK(stats.entries == 1);
  CHECK(stats.misses == 1);
  CHECK(stats.hits == 0);
  CHECK(stats.retained_bytes > 0);

  const gradients warm = backward_once(on, 1.0);
  CHECK(on->cache_stats().prepared_derivatives.hits == 1);
  require_same(warm, cold);
  require_same(warm, backward_once(off, 1.0));
  CHECK(off->cache_stats().prepared_derivatives == CacheStats{});  // never looked up

  // New values, the same structure: a hit, and the values of the sweep without a plan.
  const gradients other = backward_once(on, -0.6);
  CHECK(on->cache_stats().prepared_derivatives.hits == 2);
  require_same(other, backward_once(off, -0.6));
  CHECK_FALSE(same_bits(other.of[0], warm.of[0]));

  // The leaves' values are known numbers too: d/ds of (s * x).sum() is x.sum(), at a hit.
  for (int k = 0; k < 2; ++k) {
    auto x = on->variable_from(vec({1.5, -2.0, 4.0}, {3}));
    auto s = on->variable_from(vec({3.0}, {}));
    ((s * x).reduce_sum()).backward();
    CHECK(x.grad()->as_slice<double>()[1] == 3.0);
    CHECK(s.grad()->as_slice<double>()[0] == 3.5);
  }
  CHECK(on->cache_stats().prepared_derivatives.entries == 2);
}

TEST_CASE("prepared derivatives: grad and vjp with recording off share the reverse plan") {
  auto on = runtime(true), off = runtime(false);
  auto run = [](const std::shared_ptr<EagerRuntime>& rt) {
    std::vector<Tensor> out;
    for (int k = 0; k < 2; ++k) {
      auto x = rt->variable_from(vec(data(5, 1.0 + k), {5}));
      const EagerTensor y = (x.sin() * x).exp();
      const EagerTensor total = y.reduce_sum();
      const auto no_grad = rt->no_grad();  // the transforms run on kernels
      out.push_back(rt->vjp(y, x, rt->constant_from(vec(data(5, 0.5), {5}))).materialized());
      out.push_back(rt->grad(total, x).materialized());
    }
    return out;
  };
  const auto a = run(on), b = run(off);
  for (std::size_t k = 0; k < a.size(); ++k) CHECK(same_bits(a[k], b[k]));
  const auto stats = on->cache_stats().prepared_derivatives;
  CHECK(stats.entries == 2);  // y, and y.reduce_sum(): two structures
  CHECK(stats.hits == 2);
  CHECK(stats.misses == 2);
}

TEST_CASE("prepared derivatives: jvp runs by a forward plan, a recorded grad by the reverse plan (HVP)") {
  auto on = runtime(true), off = runtime(false);
  auto run = [](const std::shared_ptr<EagerRuntime>& rt) {
    std::vector<Tensor> out;
    for (int k = 0; k < 2; ++k) {
      auto x = rt->variable_from(vec(data(6, 1.0 - 0.5 * k), {2, 3}));
      auto y = rt->variable_from(vec(data(3, 0.4 + k), {3}));
      const EagerTensor f = (x.sin() * y).exp() + x * y.square();
      const EagerTensor g = rt->grad(f.reduce_sum(), x);  // traced: differentiable again
      const auto no_grad = rt->no_grad();
      const EagerTensor t = rt->constant_from(vec(data(6, 0.3), {2, 3}));
      out.push_back(rt->jvp(f, x, t).materialized());
      out.push_back(rt->jvp(g, x, t).materialized());  // the Hessian times t
      CHECK_FALSE(rt->jvp_optional(f, rt->variable_from(vec({1.0}, {})), rt->constant_from(vec({1.0}, {}))));
    }
    return out;
  };
  const auto a = run(on), b = run(off);
  for (std::size_t k = 0; k < a.size(); ++k) CHECK(same_bits(a[k], b[k]));
  // Three plans: the reverse sweep of the recorded grad, the forward sweeps of f and of g.
  const auto stats = on->cache_stats().prepared_derivatives;
  CHECK(stats.entries == 3);
  CHECK(stats.hits == 3);
  CHECK(stats.misses == 3);
  // A known number: f = sum(x^2 * c) has Hessian 2 diag(c), so the HVP along t is 2 c t.
  auto x = on->variable_from(vec({1.0, 2.0}, {2}));
  const EagerTensor c = on->constant_from(vec({3.0, -1.0}, {2}));
  for (int k = 0; k < 2; ++k) {
    const EagerTensor g = on->grad((x.square() * c).reduce_sum(), x);
    const auto no_grad = on->no_grad();
    const auto hv = on->jvp(g, x, on->constant_from(vec({0.5, 4.0}, {2}))).materialized();
    CHECK(hv.as_slice<double>()[0] == 3.0);
    CHECK(hv.as_slice<double>()[1] == -8.0);
  }
}

TEST_CASE("prepared derivatives: backward with create_graph runs by the plan backward() made") {
  auto on = runtime(true), off = runtime(false);
  auto run = [](const std::shared_ptr<EagerRuntime>& rt) {
    std::vector<Tensor> out;
    for (int k = 0; k < 2; ++k) {
      auto w = rt->variable_from(vec(data(12, 1.0 + k), {3, 4}));
      auto b = rt->variable_from(vec(data(4, -1.0), {4}));
      auto s = rt->variable_from(vec({0.7}, {}));
      auto c = rt->constant_from(vec(data(12, 0.5), {3, 4}));
      loss_of(w, b, s, c).backward({.create_graph = k == 1});
      out.push_back(*w.grad());
      out.push_back(*s.grad());
      if (k == 1) {  // the recorded gradient differentiates again: d(sum dL/ds)/dw
        out.push_back(rt->grad(s.grad_tensor()->reduce_sum(), w).materialized());
      }
      // A recorded gradient in a slot refers back to its leaf (a cycle, as in PyTorch): clear it.
      for (auto* leaf : {&w, &b, &s}) leaf->clear_grad();
    }
    return out;
  };
  const auto a = run(on), b = run(off);
  REQUIRE(a.size() == b.size());
  for (std::size_t k = 0; k < a.size(); ++k) CHECK(same_bits(a[k], b[k]));
  const auto stats = on->cache_stats().prepared_derivatives;
  CHECK(stats.hits == 1);    // the recorded sweep
  CHECK(stats.misses == 2);  // the first backward(), and the grad of the recorded gradient
  CHECK(off->cache_stats().prepared_derivatives == CacheStats{});
}

TEST_CASE("prepared derivatives: limits, eviction and clears") {
  auto rt = runtime(true);
  rt->set_prepared_derivative_cache_limits({1, std::size_t{1} << 20});
  CHECK(rt->prepared_derivative_cache_limits() == AdTransformCacheLimits{1, std::size_t{1} << 20});
  auto x = rt->variable_from(vec({0.5, 1.5}, {2}));
  x.sin().reduce_sum().backward();
  x.sin().sin().reduce_sum().backward();  // another structure
  auto stats = rt->cache_stats().prepared_derivatives;
  CHECK(stats.entries == 1);
  CHECK(stats.evictions == 1);
  CHECK(stats.misses == 2);
  // d/dx (sum sin x + sum sin sin x) = cos x + cos(sin x) cos x, summed over both sweeps.
  CHECK(x.grad()->as_slice<double>()[0] == Approx(std::cos(0.5) * (1 + std::cos(std::sin(0.5)))));

  for (const AdTransformCacheLimits bad : {AdTransformCacheLimits{0, 1}, AdTransformCacheLimits{1, 0}}) {
    try {
      rt->set_prepared_derivative_cache_limits(bad);
      FAIL("zero limits accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains("set_prepared_derivative_cache_limits"));
    }
  }
  CHECK(rt->prepared_derivative_cache_limits().max_entries == 1);  // unchanged

  // A plan larger than max_bytes is not kept; the sweep still runs by it.
  rt->set_prepared_derivative_cache_limits({8, 16});
  CHECK(rt->cache_stats().prepared_derivatives.entries == 0);
  x.clear_grad();
  x.sin().reduce_sum().backward();
  CHECK(x.grad()->as_slice<double>()[1] == Approx(std::cos(1.5)));
  CHECK(rt->cache_stats().prepared_derivatives.entries == 0);

  rt->set_prepared_derivative_cache_limits({});
  x.sin().reduce_sum().backward();
  CHECK(rt->cache_stats().prepared_derivatives.entries == 1);
  rt->clear_prepared_derivative_cache();
  stats = rt->cache_stats().prepared_derivatives;
  CHECK(stats.entries == 0);
  CHECK(stats.retained_bytes == 0);
  CHECK(stats.clears == 1);
  x.sin().reduce_sum().backward();
  rt->clear_caches();
  CHECK(rt->cache_stats().prepared_derivatives.entries == 0);
  CHECK(rt->cache_stats().prepared_derivatives.clears == 2);
}

TEST_CASE("prepared derivatives: a plan is the graph's connections, not its ops, values or shapes") {
  auto on = runtime(true), off = runtime(false);
  // Other ops, attributes and shapes, the same connections: a hit, and the sweep without a plan.
  auto scaled = [](const std::shared_ptr<EagerRuntime>& rt, double s, Shape shape, bool sine) {
    std::size_t n = 1;
    for (const std::size_t e : shape) n *= e;
    auto x = rt->variable_from(vec(data(n, s), shape));
    const EagerTensor y = x * s;
    (sine ? y.sin() : y.cos()).reduce_sum().backward();
    return *x.grad();
  };
  CHECK(same_bits(scaled(on, 0.5, {4}, true), scaled(off, 0.5, {4}, true)));
  CHECK(same_bits(scaled(on, 0.25, {2, 3}, false), scaled(off, 0.25, {2, 3}, false)));
  auto stats = on->cache_stats().prepared_derivatives;
  CHECK(stats.hits == 1);
  CHECK(stats.misses == 1);

  // Other connections are other structures: a shared input (x * x against x * y), a constant where
  // a variable was, three inputs where there were two. (concatenate of x and y connects as x * y.)
  auto other = runtime(true);
  auto x = other->variable_from(vec({0.5, 1.5}, {2}));
  auto y = other->variable_from(vec({2.0, -1.0}, {2}));
  const EagerTensor c = other->constant_from(vec({2.0, -1.0}, {2}));
  (x * x).reduce_sum().backward();
  (x * y).reduce_sum().backward();
  (x * c).reduce_sum().backward();
  EagerTensor::concatenate({x, y}, 0).reduce_sum().backward();  // the plan of x * y
  EagerTensor::concatenate({x, y, x}, 0).reduce_sum().backward();
  stats = other->cache_stats().prepared_derivatives;
  CHECK(stats.misses == 4);
  CHECK(stats.entries == 4);
  CHECK(stats.hits == 1);
  // d/dx: 2x + y + c + 1 + 2 (x twice in the last concatenation); d/dy: x + 1 + 1.
  CHECK(x.grad()->as_slice<double>()[0] == 2 * 0.5 + 2.0 + 2.0 + 1 + 2);
  CHECK(y.grad()->as_slice<double>()[1] == 1.5 + 1 + 1);

  // sin first, or cos first: one set of connections, two orders of summing x's cotangents. A
  // graph recorded in another order than the plan's is a miss, and its plan replaces the old one;
  // each equals the sweep without a plan bit for bit.
  auto ordered = runtime(true);
  auto run = [](const std::shared_ptr<EagerRuntime>& rt, bool sin_first) {
    auto v = rt->variable_from(vec({0.1, 0.2, 0.3}, {3}));
    std::vector<EagerTensor> made;  // sin(v) and cos(v), in the order asked
    made.push_back(sin_first ? v.sin() : v.cos());
    made.push_back(sin_first ? v.cos() : v.sin());
    const EagerTensor& a = made[sin_first ? 0 : 1];
    const EagerTensor& b = made[sin_first ? 1 : 0];
    ((a * b) + (a * v) + (b * v)).reduce_sum().backward();
    return *v.grad();
  };
  for (const bool order : {true, false, false, true}) CHECK(same_bits(run(ordered, order), run(off, order)));
  stats = ordered->cache_stats().prepared_derivatives;
  CHECK(stats.hits == 1);  // the third run
  CHECK(stats.misses == 3);
  CHECK(stats.entries == 1);
}

TEST_CASE(
    "prepared derivatives: large graphs are not looked up unless fusion is off, and modules change nothing") {
  auto on = runtime(true), off = runtime(false);
  // Values of CpuBackend::fusion_elements or more fuse their rules instead: not looked up.
  constexpr std::size_t n = CpuBackend::fusion_elements;
  auto big = on->variable_from(vec(data(n, 1e-4), {n}));
  big.sin().reduce_sum().backward();
  CHECK(on->cache_stats().prepared_derivatives == CacheStats{});
  CHECK(big.grad()->as_slice<double>()[3] == Approx(std::cos(big.materialized().as_slice<double>()[3])));
  // With fusion off nothing defers: a large graph is planned too.
  auto unfused = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1).with_fusion(false));
  auto wide = unfused->variable_from(vec(data(n, 1e-4), {n}));
  for (int k = 0; k < 2; ++k) wide.sin().reduce_sum().backward();
  CHECK(unfused->cache_stats().prepared_derivatives.misses == 1);
  CHECK(unfused->cache_stats().prepared_derivatives.hits == 1);
  CHECK(wide.grad()->as_slice<double>()[3] ==
        Approx(2 * std::cos(wide.materialized().as_slice<double>()[3])));

  // A module installed between two sweeps: the plan still serves (the rules are the nodes' own).
  class nothing : public ExtensionModule {
    std::string module_id() const override { return "test.nothing"; }
    void configure(ExtensionRegistrar&) const override {}
  };
  CHECK(same_bits(backward_once(on, 0.3).of[0], backward_once(off, 0.3).of[0]));
  on->install_extension_module(std::make_shared<nothing>());
  const gradients after = backward_once(on, 0.3);
  require_same(after, backward_once(off, 0.3));
  CHECK(on->cache_stats().prepared_derivatives.hits == 1);
}

TEST_CASE("prepared derivatives: threads sharing one runtime and its plans get the serial gradients") {
  auto on = runtime(true), off = runtime(false);
  constexpr int threads = 4, rounds = 50;
  std::vector<gradients> serial;
  for (int t = 0; t < threads; ++t) serial.push_back(backward_once(off, 0.2 + 0.3 * t));
  std::vector<std::vector<gradients>> got(threads);
  std::atomic<int> running{threads};
  std::atomic<bool> cleared_once{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (!cleared_once) std::this_thread::yield();  // so that the clearer overlaps the sweeps
      for (int r = 0; r < rounds; ++r) got[t].push_back(backward_once(on, 0.2 + 0.3 * t));
      --running;
    });
  }
  std::uint64_t clears = 0;  // and one more thread clearing the plans and reading the stats meanwhile
  std::thread clearer([&] {
    while (running > 0) {
      on->clear_prepared_derivative_cache();
      ++clears;
      cleared_once = true;
      (void)on->cache_stats();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  for (auto& th : pool) th.join();
  clearer.join();
  for (int t = 0; t < threads; ++t) {
    for (const gradients& g : got[t]) require_same(g, serial[t]);
  }
  const auto stats = on->cache_stats().prepared_derivatives;
  CHECK(stats.hits + stats.misses == std::uint64_t{threads} * rounds);
  CHECK(stats.clears == clears);
  CHECK(clears >= 1);
}
