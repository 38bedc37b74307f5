// ad/ under concurrency: several threads sharing one runtime, and eager work started from inside
// tasks of the runtime's own arena, with deferred fusion on (large tensors). A watchdog turns a
// deadlock into a failure with a message instead of a hung test.
#include <tenferro/core/detail/config.hpp>  // TENFERRO_ASAN
#include <tenferro/eager.hpp>

#include <tbb/parallel_for.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
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
    "eager work from inside parallel_for tasks of the runtime's own arena, 1000 times (200 under "
    "AddressSanitizer), no deadlock") {
  const watchdog guard("eager work inside the runtime's arena", 300);
  const auto want = references(8);
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
  std::atomic<int> bad{0};
  // Under AddressSanitizer 1000 rounds take over 250 s, near the watchdog's limit.
  constexpr int rounds = TENFERRO_ASAN ? 200 : 1000;
  for (int round = 0; round < rounds; ++round) {
    ctx->backend().execute([&] {
      tbb::parallel_for(0, 8, [&](int t) {
        if (!close(one_backward(ctx, t), want[t])) ++bad;
      });
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
