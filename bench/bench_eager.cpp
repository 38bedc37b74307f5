// The eager runtime, side by side in one run: per-op overhead on a chain of 100 elementwise ops;
// sum(sin(x) * y + exp(x * y)) op by op, through apply, and with the compile-time engine; a normal
// log-density with rank-0 parameters broadcast against the data, and a stable log-sum-exp; ops
// on i64, bool-valued comparisons and c64 values and gradients; strided and broadcast operands;
// a matrix product and its gradients.
// Arguments: {N} (chains) or {N, threads}. torch_eager.py times the same workloads in PyTorch.
#include <tenferro/apply.hpp>

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>
#include <complex>
#include <cstdint>
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

// backward() of the 100-op chain at {N, fusion on/off}, one thread: its time, and as counters
// the bytes of tensor buffers it added at its peak (`peak_MB`) above what the graph holds.
void chain_backward_peak(benchmark::State& s) {
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1).with_fusion(s.range(1) != 0));
  auto x = EagerTensor::requires_grad_in(random_tensor(s.range(0), -1, 1, 1), ctx);
  std::size_t peak = 0;
  for (auto _ : s) {
    s.PauseTiming();
    const EagerTensor loss = chain(x).reduce_sum();
    loss.materialized();
    reset_buffer_peak();
    const std::size_t before = buffer_cache_stats().live_bytes;
    s.ResumeTiming();
    loss.backward();
    s.PauseTiming();
    peak = std::max(peak, buffer_cache_stats().peak_live_bytes - before);
    x.clear_grad();
    s.ResumeTiming();
  }
  s.counters["peak_MB"] = static_cast<double>(peak) / 1e6;
}

// backward() alone of a graph of 16-element tensors, 4 ops per layer and 2 more (50 ops for 12
// layers), rebuilt every step as a training loop does, with the runtime's prepared-derivative
// cache on (1) or off (0).
void graph_backward(benchmark::State& s) {
  auto ctx = EagerRuntime::with_cpu_backend_and_ad_context(
      CpuBackend::with_threads(1), AdContext::builder().with_prepared_derivatives(s.range(0) != 0).build());
  auto x = EagerTensor::requires_grad_in(random_tensor(16, -1, 1, 1), ctx);
  for (auto _ : s) {
    EagerTensor y = x;
    for (int k = 0; k < s.range(1); ++k) y = (y.sin() + 0.5).tanh() * x;
    const EagerTensor loss = (y * y).reduce_sum();
    const auto start = std::chrono::steady_clock::now();
    loss.backward();
    s.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    x.clear_grad();
  }
  const auto plans = ctx->cache_stats().prepared_derivatives;
  s.counters["plan_bytes_per_op"] = static_cast<double>(plans.retained_bytes) / (4 * s.range(1) + 2);
}

// The Hessian-vector product of the same graph, jvp(grad): grad recorded (differentiable), its jvp
// with recording off; the time of both, with the prepared-derivative cache on (1) or off (0).
void graph_hvp(benchmark::State& s) {
  auto ctx = EagerRuntime::with_cpu_backend_and_ad_context(
      CpuBackend::with_threads(1), AdContext::builder().with_prepared_derivatives(s.range(0) != 0).build());
  auto x = EagerTensor::requires_grad_in(random_tensor(16, -1, 1, 1), ctx);
  const auto v = EagerTensor::from_tensor_in(random_tensor(16, -1, 1, 2), ctx);
  for (auto _ : s) {
    EagerTensor y = x;
    for (int k = 0; k < s.range(1); ++k) y = (y.sin() + 0.5).tanh() * x;
    const EagerTensor loss = (y * y).reduce_sum();
    const auto start = std::chrono::steady_clock::now();
    const EagerTensor g = ctx->grad(loss, x);
    const auto no_grad = ctx->no_grad();
    benchmark::DoNotOptimize(ctx->jvp(g, x, v));
    s.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
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

// sum(-0.5 * square((x - mu) / sigma) - log(sigma)) with rank-0 leaves mu and sigma and a data
// vector x: forward and backward() into mu and sigma.
struct normal_inputs {
  std::shared_ptr<EagerRuntime> ctx;
  Tensor x, mu, sigma;
  explicit normal_inputs(const benchmark::State& s)
      : ctx(EagerRuntime::with_cpu_backend(CpuBackend::with_threads(s.range(1)))),
        x(random_tensor(s.range(0), -2, 2, 3)),
        mu(Tensor::from_vec_col_major<double>({}, {0.3})),
        sigma(Tensor::from_vec_col_major<double>({}, {1.7})) {}
};

template <class Loss>
void normal_eager(benchmark::State& s, Loss loss) {
  normal_inputs in(s);
  const auto x = EagerTensor::from_tensor_in(in.x, in.ctx);
  for (auto _ : s) {
    auto mu = EagerTensor::requires_grad_in(in.mu, in.ctx);
    auto sigma = EagerTensor::requires_grad_in(in.sigma, in.ctx);
    loss(x, mu, sigma).backward();
    benchmark::DoNotOptimize(sigma.grad());
  }
  s.SetItemsProcessed(s.iterations() * s.range(0));
}

void normal_op_by_op(benchmark::State& s) {
  normal_eager(s, [](const EagerTensor& x, const EagerTensor& mu, const EagerTensor& sigma) {
    return (-0.5 * ((x - mu) / sigma).square() - sigma.log()).reduce_sum();
  });
}

const auto normal_expr = [] {
  const auto [x, mu, sigma] = ct::placeholders<3>();
  return ct::sum(-0.5 * square((x - mu) / sigma) - log(sigma));
}();

void normal_apply(benchmark::State& s) {
  normal_eager(s, [](const EagerTensor& x, const EagerTensor& mu, const EagerTensor& sigma) {
    return apply(normal_expr, x, mu, sigma);
  });
}

// mu and sigma as numbers of the expression (as_scalar): hoisted as the engine hoists numbers.
void normal_apply_scalars(benchmark::State& s) {
  normal_eager(s, [](const EagerTensor& x, const EagerTensor& mu, const EagerTensor& sigma) {
    return apply(normal_expr, x, as_scalar(mu), as_scalar(sigma));
  });
}

void normal_engine(benchmark::State& s) {
  normal_inputs in(s);
  const auto x = in.x.typed<double>();
  const auto mu = in.mu.typed<double>();
  const auto sigma = in.sigma.typed<double>();
  in.ctx->backend().execute([&] {
    for (auto _ : s) benchmark::DoNotOptimize(ct::value_and_grad(normal_expr, x, mu, sigma));
  });
  s.SetItemsProcessed(s.iterations() * s.range(0));
}

// The same with mu and sigma as numbers: the engine hoists what depends on them alone out of the
// loop (log(sigma), 1 / sigma), which it cannot do for arrays of one element.
void normal_engine_numbers(benchmark::State& s) {
  normal_inputs in(s);
  const auto x = in.x.typed<double>();
  in.ctx->backend().execute([&] {
    for (auto _ : s) benchmark::DoNotOptimize(ct::value_and_grad(normal_expr, x, 0.3, 1.7));
  });
  s.SetItemsProcessed(s.iterations() * s.range(0));
}

// log(sum(exp(x - m))) + m with m = x.detach().reduce_max(): forward and backward() into x.
void lse_op_by_op(benchmark::State& s) {
  sin_exp_inputs in(s);
  for (auto _ : s) {
    auto x = EagerTensor::requires_grad_in(in.x0, in.ctx);
    const auto m = x.detach().reduce_max();
    ((x - m).exp().reduce_sum().log() + m).backward();
    benchmark::DoNotOptimize(x.grad());
  }
  s.SetItemsProcessed(s.iterations() * s.range(0));
}

void lse_engine(benchmark::State& s) {
  sin_exp_inputs in(s);
  const auto [a] = ct::placeholders<1>();
  const auto f = ct::log_sum_exp(a);
  const auto x = in.x0.typed<double>();
  in.ctx->backend().execute([&] {
    for (auto _ : s) benchmark::DoNotOptimize(ct::value_and_grad(f, x));
  });
  s.SetItemsProcessed(s.iterations() * s.range(0));
}

// Other dtypes, one op or a few, N elements: i64 x * y + x (forward); f64 x < y to bool
// (forward); c64 exp(z * w) (forward) and sum(|exp(z * w)|) forward and backward() into z.
Tensor random_ints(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> u(-1000, 1000);
  std::vector<std::int64_t> v(n);
  for (auto& e : v) e = u(rng);
  return Tensor::from_vec_col_major<std::int64_t>({n}, std::move(v));
}
void i64_mul_add(benchmark::State& s) {
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  const auto x = EagerTensor::from_tensor_in(random_ints(s.range(0), 1), ctx);
  const auto y = EagerTensor::from_tensor_in(random_ints(s.range(0), 2), ctx);
  for (auto _ : s) benchmark::DoNotOptimize((x * y + x).materialized());
}

// Strided and broadcast operands, one thread, n x n f64 (forward): x^T * y with x^T a view, the
// same with x^T compacted beforehand, and x * r, x * c with a row [1, n] and a column [n, 1].
Tensor random_matrix(std::size_t rows, std::size_t cols, unsigned seed) {
  const Tensor t = random_tensor(rows * cols, -1, 1, seed);
  const auto v = t.as_slice<double>();
  return Tensor::from_vec_col_major<double>({rows, cols}, std::vector<double>(v.begin(), v.end()));
}
struct matrix_inputs {
  std::shared_ptr<EagerRuntime> ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  std::size_t n;
  EagerTensor x, y, row, column;
  explicit matrix_inputs(const benchmark::State& s)
      : n(s.range(0)),
        x(EagerTensor::from_tensor_in(random_matrix(n, n, 1), ctx)),
        y(EagerTensor::from_tensor_in(random_matrix(n, n, 2), ctx)),
        row(EagerTensor::from_tensor_in(random_matrix(1, n, 3), ctx)),
        column(EagerTensor::from_tensor_in(random_matrix(n, 1, 4), ctx)) {}
};
void transposed_mul(benchmark::State& s) {
  matrix_inputs in(s);
  const auto xt = in.x.transpose({1, 0});
  for (auto _ : s) benchmark::DoNotOptimize((xt * in.y).materialized());
}
void compact_mul(benchmark::State& s) {
  matrix_inputs in(s);
  const auto xt = EagerTensor::from_tensor_in(in.x.transpose({1, 0}).materialized().materialized(), in.ctx);
  for (auto _ : s) benchmark::DoNotOptimize((xt * in.y).materialized());
}
void row_broadcast_mul(benchmark::State& s) {
  matrix_inputs in(s);
  for (auto _ : s) benchmark::DoNotOptimize((in.x * in.row).materialized());
}
void column_broadcast_mul(benchmark::State& s) {
  matrix_inputs in(s);
  for (auto _ : s) benchmark::DoNotOptimize((in.x * in.column).materialized());
}

// Matrix products, n x n f64, on {threads}: x @ y; sum(x @ y) and its gradients to x and y (three
// BLAS products); and the same product by calling CBLAS's dgemm directly (one thread).
struct matmul_inputs {
  std::shared_ptr<EagerRuntime> ctx;
  Tensor x0, y0;
  explicit matmul_inputs(const benchmark::State& s)
      : ctx(EagerRuntime::with_cpu_backend(CpuBackend::with_threads(static_cast<std::size_t>(s.range(1))))),
        x0(random_matrix(static_cast<std::size_t>(s.range(0)), static_cast<std::size_t>(s.range(0)), 1)),
        y0(random_matrix(static_cast<std::size_t>(s.range(0)), static_cast<std::size_t>(s.range(0)), 2)) {}
};
void matmul_forward(benchmark::State& s) {
  matmul_inputs in(s);
  const auto x = EagerTensor::from_tensor_in(in.x0, in.ctx), y = EagerTensor::from_tensor_in(in.y0, in.ctx);
  for (auto _ : s) benchmark::DoNotOptimize(x.matmul(y).materialized());
}
void matmul_backward(benchmark::State& s) {
  matmul_inputs in(s);
  for (auto _ : s) {
    auto x = EagerTensor::requires_grad_in(in.x0, in.ctx);
    auto y = EagerTensor::requires_grad_in(in.y0, in.ctx);
    x.matmul(y).reduce_sum().backward();
    benchmark::DoNotOptimize(y.grad());
  }
}
void matmul_blas(benchmark::State& s) {
  matmul_inputs in(s);
  const int n = static_cast<int>(s.range(0));
  std::vector<double> c(static_cast<std::size_t>(n) * static_cast<std::size_t>(n));
  for (auto _ : s) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, in.x0.data<double>(), n,
                in.y0.data<double>(), n, 0.0, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
}

void f64_less(benchmark::State& s) {
  sin_exp_inputs in(s);
  const auto x = EagerTensor::from_tensor_in(in.x0, in.ctx);
  const auto y = EagerTensor::from_tensor_in(in.y0, in.ctx);
  for (auto _ : s) benchmark::DoNotOptimize(x.lt(y).materialized());
}

struct complex_inputs {
  std::shared_ptr<EagerRuntime> ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  Tensor z0, w0;
  explicit complex_inputs(const benchmark::State& s) {
    const auto re = random_tensor(s.range(0), -1, 1, 1), im = random_tensor(s.range(0), -1, 1, 2);
    std::vector<std::complex<double>> z(s.range(0)), w(s.range(0));
    for (std::size_t i = 0; i < z.size(); ++i) {
      z[i] = {re.as_slice<double>()[i], im.as_slice<double>()[i]};
      w[i] = {im.as_slice<double>()[i], 0.5};
    }
    const Shape shape{z.size()};  // before the moves: argument order is unspecified
    z0 = Tensor::from_vec_col_major<std::complex<double>>(shape, std::move(z));
    w0 = Tensor::from_vec_col_major<std::complex<double>>(shape, std::move(w));
  }
};

void c64_mul_exp(benchmark::State& s) {
  complex_inputs in(s);
  const auto z = EagerTensor::from_tensor_in(in.z0, in.ctx);
  const auto w = EagerTensor::from_tensor_in(in.w0, in.ctx);
  for (auto _ : s) benchmark::DoNotOptimize((z * w).exp().materialized());
}

void c64_abs_backward(benchmark::State& s) {
  complex_inputs in(s);
  const auto w = EagerTensor::from_tensor_in(in.w0, in.ctx);
  for (auto _ : s) {
    auto z = EagerTensor::requires_grad_in(in.z0, in.ctx);
    (z * w).exp().abs().reduce_sum().backward();
    benchmark::DoNotOptimize(z.grad());
  }
}

}  // namespace

// A 1 MiB buffer made and released, on one thread and on two at once: the buffer cache takes no
// global lock, so the time per buffer should not grow with the threads.
void buffer_churn(benchmark::State& s) {
  for (auto _ : s) {
    tenferro::detail::scratch_buffer<double> b(std::size_t{1} << 17);
    b.data()[0] = 1.0;
    benchmark::DoNotOptimize(b.data());
  }
}

BENCHMARK(chain_forward)->Arg(1)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(chain_forward_backward)->Arg(1)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(chain_backward_peak)
    ->Args({1000000, 0})
    ->Args({1000000, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK(graph_backward)
    ->ArgsProduct({{1, 0}, {12, 250}})
    ->ArgNames({"prepared", "layers"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(graph_hvp)
    ->ArgsProduct({{1, 0}, {12}})
    ->ArgNames({"prepared", "layers"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(sin_exp_op_by_op)
    ->Args({1000000, 1})
    ->Args({1000000, 2})
    ->Args({10000000, 1})
    ->Args({10000000, 2})
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
    ->Args({10000000, 1})
    ->Args({10000000, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinWarmUpTime(0.5);

BENCHMARK(normal_op_by_op)
    ->Args({1000000, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinWarmUpTime(0.5);
BENCHMARK(normal_apply)->Args({1000000, 1})->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);
BENCHMARK(normal_apply_scalars)
    ->Args({1000000, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinWarmUpTime(0.5);
BENCHMARK(normal_engine)
    ->Args({1000000, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinWarmUpTime(0.5);
BENCHMARK(normal_engine_numbers)
    ->Args({1000000, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinWarmUpTime(0.5);
BENCHMARK(lse_op_by_op)->Args({1000000, 1})->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);
BENCHMARK(lse_engine)->Args({1000000, 1})->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);

BENCHMARK(transposed_mul)->Arg(1000)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);
BENCHMARK(compact_mul)->Arg(1000)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);
BENCHMARK(row_broadcast_mul)->Arg(1000)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);
BENCHMARK(column_broadcast_mul)->Arg(1000)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);
void matmul_sizes(benchmark::internal::Benchmark* b) {
  for (const auto& args : std::vector<std::vector<std::int64_t>>{{64, 1}, {256, 1}, {1024, 1}, {1024, 2}}) {
    b->Args(args);
  }
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(matmul_forward)->Apply(matmul_sizes);
BENCHMARK(matmul_backward)->Apply(matmul_sizes);
BENCHMARK(matmul_blas)
    ->Args({64, 1})
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

BENCHMARK(i64_mul_add)->Arg(1000000)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);
BENCHMARK(f64_less)->Args({1000000, 1})->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);
BENCHMARK(c64_mul_exp)->Arg(1000000)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);
BENCHMARK(c64_abs_backward)->Arg(1000000)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinWarmUpTime(0.5);

BENCHMARK(buffer_churn)->Threads(1)->Threads(2)->UseRealTime();

BENCHMARK_MAIN();
