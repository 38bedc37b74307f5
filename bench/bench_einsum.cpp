// einsum's contraction order, side by side in one run, one thread (OPENBLAS_NUM_THREADS=1 too):
// "ab,bc,cd,d->a" with every extent 1000 in the order the greedy model picks (three products with
// a vector) against the same contraction written left to right as three einsums (two 1000 x 1000
// matrix products first); and the cost of choosing the order, for four 8 x 8 operands, with the
// path cache warm against the cache cleared before every call, and against the same three products
// called as eager dot_general ops.
#include <tenferro/eager.hpp>

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace {
using namespace tenferro;

Tensor random_tensor(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(checked_shape_size(shape).value());
  for (auto& e : v) e = u(rng);
  return Tensor::from_vec_col_major<double>(shape, std::move(v));
}

struct chain {
  std::shared_ptr<EagerRuntime> ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  std::vector<EagerTensor> ops;
  explicit chain(std::size_t n) {
    for (unsigned k = 0; k < 3; ++k) ops.push_back(ctx->constant_from(random_tensor({n, n}, k + 1)));
    ops.push_back(ctx->constant_from(random_tensor({n}, 4)));
  }
};

void einsum_chain_greedy(benchmark::State& s) {
  chain c(static_cast<std::size_t>(s.range(0)));
  for (auto _ : s) benchmark::DoNotOptimize(einsum("ab,bc,cd,d->a", c.ops).materialized());
}

void einsum_chain_left_to_right(benchmark::State& s) {
  chain c(static_cast<std::size_t>(s.range(0)));
  for (auto _ : s) {
    const auto ac = einsum("ab,bc->ac", {c.ops[0], c.ops[1]});
    const auto ad = einsum("ac,cd->ad", {ac, c.ops[2]});
    benchmark::DoNotOptimize(einsum("ad,d->a", {ad, c.ops[3]}).materialized());
  }
}

void einsum_small_path_cached(benchmark::State& s) {
  chain c(8);
  for (auto _ : s) benchmark::DoNotOptimize(einsum("ab,bc,cd,d->a", c.ops).materialized());
}

// The same three products as eager dot_general calls in the greedy order: what einsum adds.
void einsum_small_by_hand(benchmark::State& s) {
  chain c(8);
  const DotGeneralConfig mv{{1}, {0}, {}, {}};  // [m, n] x [n] -> [m]
  for (auto _ : s) {
    const auto cv = c.ops[2].dot_general(c.ops[3], mv);
    const auto bv = c.ops[1].dot_general(cv, mv);
    benchmark::DoNotOptimize(c.ops[0].dot_general(bv, mv).materialized());
  }
}

void einsum_small_path_uncached(benchmark::State& s) {
  chain c(8);
  for (auto _ : s) {
    c.ctx->clear_extension_caches();
    benchmark::DoNotOptimize(einsum("ab,bc,cd,d->a", c.ops).materialized());
  }
}

}  // namespace

BENCHMARK(einsum_chain_greedy)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(einsum_chain_left_to_right)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(einsum_small_path_cached)->Unit(benchmark::kMicrosecond);
BENCHMARK(einsum_small_path_uncached)->Unit(benchmark::kMicrosecond);
BENCHMARK(einsum_small_by_hand)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
