// Copies of 1e7 f64 (80 MB) against std::memcpy of the same bytes into a buffer allocated once,
// side by side in one run: materializing a slice (every other row of a [4000, 2500]) and a
// transposed [4000, 2500], and concatenating two [4000, 1250] halves along the columns. The ops
// allocate their results (from the buffer cache, warm after the first iteration); one thread.
#include <tenferro/eager.hpp>

#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

namespace {
using namespace tenferro;

constexpr std::size_t rows = 4000, cols = 2500;  // 1e7 elements

Tensor random_matrix(std::size_t m, std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(m * n);
  for (auto& e : v) e = u(rng);
  return Tensor::from_vec_col_major<double>({m, n}, std::move(v));
}

// memcpy of `bytes` (the result's size of the op it stands beside).
void copy_memcpy(benchmark::State& s) {
  const auto n = static_cast<std::size_t>(s.range(0));
  std::vector<double> from(n, 1.0), to(n, 0.0);
  for (auto _ : s) {
    std::memcpy(to.data(), from.data(), n * sizeof(double));
    benchmark::DoNotOptimize(to.data());
    benchmark::ClobberMemory();
  }
  s.SetBytesProcessed(static_cast<std::int64_t>(s.iterations() * n * sizeof(double)));
}

struct copy_inputs {
  std::shared_ptr<EagerRuntime> ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  EagerTensor x = EagerTensor::from_tensor_in(random_matrix(rows, cols, 1), ctx);
};

// Every other row: 5e6 elements read with a stride of 2 (a view), written compact.
void copy_slice(benchmark::State& s) {
  copy_inputs in;
  for (auto _ : s)
    benchmark::DoNotOptimize(in.x.slice({0, 0}, {rows, cols}, {2, 1}).materialized().materialized());
  s.SetBytesProcessed(static_cast<std::int64_t>(s.iterations() * rows / 2 * cols * sizeof(double)));
}

// The transpose (a view), written compact: 1e7 elements.
void copy_transpose(benchmark::State& s) {
  copy_inputs in;
  for (auto _ : s) benchmark::DoNotOptimize(in.x.transpose({1, 0}).materialized().materialized());
  s.SetBytesProcessed(static_cast<std::int64_t>(s.iterations() * rows * cols * sizeof(double)));
}

// Two [4000, 1250] halves joined along the columns: 1e7 elements.
void copy_concatenate(benchmark::State& s) {
  copy_inputs in;
  const EagerTensor a = in.x.slice({0, 0}, {rows, cols / 2}, {1, 1});
  const EagerTensor b = in.x.slice({0, cols / 2}, {rows, cols}, {1, 1});
  for (auto _ : s) benchmark::DoNotOptimize(EagerTensor::concatenate({a, b}, 1).materialized());
  s.SetBytesProcessed(static_cast<std::int64_t>(s.iterations() * rows * cols * sizeof(double)));
}

}  // namespace

BENCHMARK(copy_memcpy)->Arg(rows* cols / 2)->Arg(rows* cols)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(copy_slice)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(copy_transpose)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(copy_concatenate)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
