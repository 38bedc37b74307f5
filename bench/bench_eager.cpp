// The eager runtime, side by side in one run: per-op overhead on a chain of 100 elementwise ops,
// and sum(sin(x) * y + exp(x * y)) op by op, through apply, and with the compile-time engine.
// Arguments: {N} (chains) or {N, threads}. torch_eager.py times the same workloads in PyTorch.
#include <tenferro/eager.hpp>

#include <benchmark/benchmark.h>

#include <random>

namespace {
using namespace tenferro;
namespace ct = tenferro::expr;

Tensor random_tensor(std::size_t n, double lo, double hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& e : v) e = u(rng);
  return Tensor::from_vec_col_major<double>({n}, std::move(v));
}

// 100 elementwise ops: (sin, + 0.5, tanh, * x) 25 times. Values stay in [-2, 2].
EagerTensor chain(const EagerTensor& x) {
  EagerTensor y = x;
  for (int k = 0; k < 25; ++k) y = (y.sin() + 0.5).tanh() * x;
  return y;
}

void chain_forward(benchmark::State& s) {
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  auto x = EagerTensor::requires_grad_in(random_tensor(s.range(0), -1, 1, 1), ctx);
  for (auto _ : s) benchmark::DoNotOptimize(chain(x));
  s.counters["us_per_op"] =
      benchmark::Counter(100.0 * s.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void chain_forward_backward(benchmark::State& s) {
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  auto x = EagerTensor::requires_grad_in(random_tensor(s.range(0), -1, 1, 1), ctx);
  for (auto _ : s) {
    chain(x).reduce_sum().backward();
    x.clear_grad();
  }
  s.counters["us_per_op"] =
      benchmark::Counter(100.0 * s.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

struct sin_exp_inputs {
  std::shared_ptr<EagerRuntime> ctx;
  Tensor x0, y0;
  explicit sin_exp_inputs(const benchmark::State& s)
      : ctx(EagerRuntime::with_cpu_backend(CpuBackend::with_threads(s.range(1)))),
        x0(random_tensor(s.range(0), -1, 1, 1)),
        y0(random_tensor(s.range(0), -1, 1, 2)) {}
};

// Forward and backward() of loss(x, y) for fresh leaves x and y on every iteration.
template <class Loss>
void sin_exp_eager(benchmark::State& s, Loss loss) {
  sin_exp_inputs in(s);
  for (auto _ : s) {
    auto x = EagerTensor::requires_grad_in(in.x0, in.ctx);
    auto y = EagerTensor::requires_grad_in(in.y0, in.ctx);
    loss(x, y).backward();
    benchmark::DoNotOptimize(x.grad());
  }
  s.SetItemsProcessed(s.iterations() * s.range(0));
}

void sin_exp_op_by_op(benchmark::State& s) {
  sin_exp_eager(s, [](const EagerTensor& x, const EagerTensor& y) {
    return (x.sin() * y + (x * y).exp()).reduce_sum();
  });
}

void sin_exp_apply(benchmark::State& s) {
  const auto [a, b] = ct::placeholders<2>();
  const auto f = ct::sum(sin(a) * b + exp(a * b));
  sin_exp_eager(s, [&](const EagerTensor& x, const EagerTensor& y) { return apply(f, x, y); });
}

void sin_exp_engine(benchmark::State& s) {
  sin_exp_inputs in(s);
  const auto [a, b] = ct::placeholders<2>();
  const auto f = ct::sum(sin(a) * b + exp(a * b));
  const auto x = in.x0.typed<double>();
  const auto y = in.y0.typed<double>();
  in.ctx->backend().execute([&] {
    for (auto _ : s) benchmark::DoNotOptimize(ct::value_and_grad(f, x, y));
  });
  s.SetItemsProcessed(s.iterations() * s.range(0));
}

}  // namespace

BENCHMARK(chain_forward)->Arg(1)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(chain_forward_backward)->Arg(1)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(sin_exp_op_by_op)
    ->Args({1000000, 1})
    ->Args({1000000, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinWarmUpTime(0.5);
BENCHMARK(sin_exp_apply)
    ->Args({1000000, 1})
    ->Args({1000000, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinWarmUpTime(0.5);
BENCHMARK(sin_exp_engine)
    ->Args({1000000, 1})
    ->Args({1000000, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinWarmUpTime(0.5);

BENCHMARK_MAIN();
