// ad/ under concurrency: several threads sharing one runtime, and eager work started from inside
// tasks of the runtime's own arena, with deferred fusion on (large tensors). A watchdog turns a
// deadlock into a failure with a message instead of a hung test.
#include <tenferro/core/detail/config.hpp>  // TENFERRO_SANITIZED_HEAP
#include <tenferro/eager.hpp>

#include <tenferro/core/detail/parallel.hpp>  // parallel_ranges: the parallel loop, seen by ThreadSanitizer

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

using namespace tenferro;

namespace {

constexpr std::size_t n = 20000;  // above CpuBackend::fusion_elements: every elementwise op defers

// Aborts the process with a message unless stopped within `seconds`.
class watchdog {
 public:
  watchdog(const char* what, int seconds)
      : thread_([this, what, seconds] {
          std::unique_lock lock(mutex_);
          if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: '%s' did not finish within %d s (deadlock?)\n", what, seconds);
            std::abort();
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

Tensor ramp(double lo, double step) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = lo + step * static_cast<double>(i % 97);
  return Tensor::from_vec_col_major<double>({n}, std::move(v));
}

// Builds e = sin(x) * y + exp(x * y) on fresh leaves, runs backward() of sum(e) + max(e) and
// returns x's gradient. The max reduction runs as a kernel of the backend that reads the deferred
// e (a computation that may start on a thread waiting inside another's pass).
std::vector<double> one_backward(const std::shared_ptr<EagerRuntime>& ctx, int shift) {
  auto x = ctx->variable_from(ramp(-0.5 + 0.01 * shift, 0.01));
  auto y = ctx->variable_from(ramp(0.25, 0.005));
  const auto e = x.sin() * y + (x * y).exp();
  (e.reduce_sum() + e.reduce_max()).backward();
  const auto g = x.grad()->as_slice<double>();
  return {g.begin(), g.end()};
}

// The gradients one_backward gives for shifts 0 .. count - 1 on one thread, op by op.
std::vector<std::vector<double>> references(int count) {
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1).with_fusion(false));
  std::vector<std::vector<double>> r;
  for (int t = 0; t < count; ++t) r.push_back(one_backward(ctx, t));
  return r;
}

bool close(const std::vector<double>& a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(std::abs(a[i] - b[i]) <= 1e-12 * (1 + std::abs(b[i])))) return false;
  }
  return a.size() == b.size();
}

}  // namespace

TEST_CASE("regression: four threads sharing one runtime, each with its own graph, 200 times, no deadlock") {
  const watchdog guard("four threads sharing a runtime", 300);
  const auto want = references(4);
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
  std::atomic<int> bad{0};
  for (int round = 0; round < 200; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        if (!close(one_backward(ctx, t), want[t])) ++bad;
      });
    }
    for (auto& th : threads) th.join();
  }
  CHECK(bad == 0);
}

TEST_CASE(
    "eager work from inside the tasks of a parallel loop in the runtime's own arena, 1000 times (200 under a "
    "sanitizer), no deadlock") {
  const watchdog guard("eager work inside the runtime's arena", 300);
  const auto want = references(8);
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
  std::atomic<int> bad{0};
  // Under AddressSanitizer 1000 rounds take over 250 s, near the watchdog's limit.
  constexpr int rounds = TENFERRO_SANITIZED_HEAP ? 200 : 1000;
  for (int round = 0; round < rounds; ++round) {
    ctx->backend().execute([&] {
      auto task = [&](std::size_t begin, std::size_t end) {
        for (std::size_t t = begin; t < end; ++t) {
          if (!close(one_backward(ctx, static_cast<int>(t)), want[t])) ++bad;
        }
      };
      detail::parallel_ranges(8, 1, detail::split::even, task);
    });
  }
  CHECK(bad == 0);
}

TEST_CASE("threads accumulating into one leaf's slot: every deposit counts, with and without create_graph") {
  const watchdog guard("accumulating into one slot", 300);
  for (const bool create_graph : {false, true}) {
    INFO("create_graph " << create_graph);
    auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
    auto x = ctx->variable_from(ramp(-0.5, 0.01));
    constexpr int threads = 4, rounds = 25;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int r = 0; r < rounds; ++r) (x * x).reduce_sum().backward({.create_graph = create_graph});
      });
    }
    for (auto& th : pool) th.join();
    const auto g = x.grad()->as_slice<double>();
    const auto xs = x.materialized().as_slice<double>();
    for (std::size_t i = 0; i < n; i += 997)
      CHECK(g[i] == Approx(threads * rounds * 2 * xs[i]).epsilon(1e-12));
    if (create_graph) {
      const auto traced = x.grad_tensor();
      REQUIRE(traced.has_value());
      CHECK(traced->materialized().as_slice<double>()[5] ==
            Approx(threads * rounds * 2 * xs[5]).epsilon(1e-12));
    }
    x.clear_grad();  // a traced gradient refers to x: the slot holds x alive until cleared
  }
}

namespace {

// What one step computes on fresh leaves of `rt` (a loss of `shift`): x's gradient by backward(),
// by grad(), the jvp of the loss along a ramp and the HVP (jvp of the recorded grad) along it.
struct outcome {
  std::optional<std::vector<double>> backward_dx;  // nullopt: another thread cleared the slot first
  std::vector<double> grad_dx, hvp;
  double jvp = 0;
};

std::vector<double> values_of(const Tensor& t) {
  const auto s = t.as_slice<double>();
  return {s.begin(), s.end()};
}

outcome one_step(const std::shared_ptr<EagerRuntime>& rt, int shift) {
  auto loss_of = [](const EagerTensor& x, const EagerTensor& y) {
    return (x.sin() * y + (x * y).exp()).reduce_sum();
  };
  outcome r;
  auto x = rt->variable_from(ramp(-0.5 + 0.01 * shift, 0.01));
  auto y = rt->variable_from(ramp(0.25, 0.005));
  loss_of(x, y).backward();
  if (const auto g = x.grad()) r.backward_dx = values_of(*g);
  auto u = rt->variable_from(ramp(-0.5 + 0.01 * shift, 0.01));
  const auto loss = loss_of(u, y);
  r.grad_dx = values_of(rt->grad(loss, u).materialized());
  const auto direction = EagerTensor::from_tensor_in(ramp(0.1, 0.001), rt);
  r.jvp = rt->jvp(loss, u, direction).materialized().as_slice<double>()[0];
  r.hvp = values_of(rt->jvp(rt->grad(loss, u), u, direction).materialized());
  return r;
}

bool same_bits(const outcome& a, const outcome& b) {
  return a.grad_dx == b.grad_dx && a.hvp == b.hvp && std::memcmp(&a.jvp, &b.jvp, sizeof(double)) == 0 &&
         (!a.backward_dx || !b.backward_dx || *a.backward_dx == *b.backward_dx);
}

}  // namespace

TEST_CASE(
    "threads with their own runtimes: backward, grad, jvp and HVP equal the serial results bit for bit") {
  const watchdog guard("threads with their own runtimes", 300);
  constexpr int threads = 4, rounds = TENFERRO_SANITIZED_HEAP ? 3 : 10;
  std::vector<outcome> want;
  {
    auto rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
    for (int t = 0; t < threads; ++t) want.push_back(one_step(rt, t));
  }
  for (const auto& w : want) REQUIRE(w.backward_dx);
  std::atomic<int> bad{0}, cleared{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
      for (int r = 0; r < rounds; ++r) {
        const outcome o = one_step(rt, t);
        if (!same_bits(o, want[static_cast<std::size_t>(t)])) ++bad;
        if (!o.backward_dx) ++cleared;
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(bad == 0);
  CHECK(cleared == 0);
}

TEST_CASE("threads sharing one runtime while another clears its gradients and reads its cache stats") {
  const watchdog guard("threads sharing a runtime with clear_grads", 300);
  constexpr int threads = 4, rounds = TENFERRO_SANITIZED_HEAP ? 3 : 10;
  auto rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
  std::vector<outcome> want;
  for (int t = 0; t < threads; ++t) want.push_back(one_step(rt, t));  // serially, on the same runtime
  std::atomic<int> bad{0}, kept{0}, running{threads};
  std::atomic<int> clears{0}, stats_out_of_limits{0};
  std::thread clearer([&] {
    while (running > 0) {
      rt->clear_grads();
      const auto stats = rt->cache_stats();
      if (stats.prepared_derivatives.entries > rt->prepared_derivative_cache_limits().max_entries)
        ++stats_out_of_limits;
      ++clears;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (clears == 0) std::this_thread::yield();  // so that the clearer overlaps the steps
      for (int r = 0; r < rounds; ++r) {
        const outcome o = one_step(rt, t);
        if (!same_bits(o, want[static_cast<std::size_t>(t)])) ++bad;  // a slot is whole or cleared
        if (o.backward_dx) ++kept;
      }
      --running;
    });
  }
  for (auto& th : pool) th.join();
  clearer.join();
  INFO("backward() gradients read whole before a clear: " << kept << " of " << threads * rounds);
  CHECK(bad == 0);
  CHECK(clears > 0);
  CHECK(stats_out_of_limits == 0);
}

TEST_CASE("no_grad is per thread: a guard on one thread does not stop another's recording") {
  auto rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
  auto x = rt->variable_from(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}));
  std::mutex m;
  std::condition_variable cv;
  int stage = 0;  // 1: the guard is held; 2: the other thread has recorded
  bool guarded_tracks = true, other_tracks = false;
  std::thread guarded([&] {
    const auto guard = rt->no_grad();
    {
      std::unique_lock lock(m);
      stage = 1;
      cv.notify_all();
      cv.wait(lock, [&] { return stage == 2; });
    }
    guarded_tracks = (x * x).tracks_grad();
  });
  std::thread other([&] {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return stage == 1; });
    other_tracks = (x * x).tracks_grad();  // while the guard lives on the other thread
    stage = 2;
    cv.notify_all();
  });
  guarded.join();
  other.join();
  CHECK_FALSE(guarded_tracks);
  CHECK(other_tracks);
  CHECK((x * x).tracks_grad());
}
