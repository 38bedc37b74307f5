// The compile-time layer against hand-written xsimd loops, side by side in one run.
// Arguments: {N, threads}. Every variant runs inside a oneTBB arena of `threads` threads.
#include <tenferro/expr.hpp>

#include "handwritten.hpp"

#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>

#include <random>

namespace {
namespace ct = tenferro::expr;
using vec = tenferro::column_major_array<double>;

vec random_vec(std::size_t n, double lo, double hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  auto v = vec::from_shape({n});
  for (auto& e : v.storage()) e = u(rng);
  return v;
}

template <class F>
void run(benchmark::State& state, F&& body) {
  tbb::task_arena arena(static_cast<int>(state.range(1)));
  arena.execute([&] {
    for (auto _ : state) body();
  });
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

const auto [x, y] = ct::placeholders<2>();
const auto sum_square = ct::sum(square(x));
const auto sin_exp = ct::sum(sin(x) * y + exp(x * y));
const auto lse = ct::log_sum_exp(x);
const auto [data, mu, sigma] = ct::placeholders<3>();
const auto normal = ct::sum(-0.5 * square((data - mu) / sigma) - log(sigma));

// (1) sum(square(x))
void sum_square_value_and_grad(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1);
  run(s, [&] { benchmark::DoNotOptimize(ct::value_and_grad(sum_square, a)); });
}
void sum_square_value(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1);
  run(s, [&] { benchmark::DoNotOptimize(ct::eval(sum_square, a)); });
}
void sum_square_handwritten(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1);
  run(s, [&] {
    vec g = vec::from_shape({a.size()});
    benchmark::DoNotOptimize(handwritten::sum_square(a.data(), g.data(), a.size()));
    benchmark::DoNotOptimize(g.data());
  });
}

// (2) sum(sin(x) * y + exp(x * y))
void sin_exp_value_and_grad(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1), b = random_vec(s.range(0), -1, 1, 2);
  run(s, [&] { benchmark::DoNotOptimize(ct::value_and_grad(sin_exp, a, b)); });
}
void sin_exp_value(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1), b = random_vec(s.range(0), -1, 1, 2);
  run(s, [&] { benchmark::DoNotOptimize(ct::eval(sin_exp, a, b)); });
}
void sin_exp_handwritten(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1), b = random_vec(s.range(0), -1, 1, 2);
  run(s, [&] {
    vec ga = vec::from_shape({a.size()}), gb = vec::from_shape({a.size()});
    benchmark::DoNotOptimize(handwritten::sin_exp(a.data(), b.data(), ga.data(), gb.data(), a.size()));
    benchmark::DoNotOptimize(ga.data());
  });
}

// (3) log_sum_exp(x)
void lse_value_and_grad(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -5, 5, 1);
  run(s, [&] { benchmark::DoNotOptimize(ct::value_and_grad(lse, a)); });
}
void lse_value(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -5, 5, 1);
  run(s, [&] { benchmark::DoNotOptimize(ct::eval(lse, a)); });
}
void lse_handwritten(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -5, 5, 1);
  run(s, [&] {
    vec g = vec::from_shape({a.size()});
    benchmark::DoNotOptimize(handwritten::log_sum_exp(a.data(), g.data(), a.size()));
    benchmark::DoNotOptimize(g.data());
  });
}

// (4) normal log-pdf, gradients for x, mu and sigma
void normal_value_and_grad(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -3, 3, 1);
  run(s, [&] { benchmark::DoNotOptimize(ct::value_and_grad(normal, a, 0.3, 1.7)); });
}
void normal_value(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -3, 3, 1);
  run(s, [&] { benchmark::DoNotOptimize(ct::eval(normal, a, 0.3, 1.7)); });
}
void normal_handwritten(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -3, 3, 1);
  run(s, [&] {
    vec g = vec::from_shape({a.size()});
    benchmark::DoNotOptimize(handwritten::normal_log_pdf(a.data(), 0.3, 1.7, g.data(), a.size()));
    benchmark::DoNotOptimize(g.data());
  });
}

void sizes(benchmark::internal::Benchmark* b) {
  for (long n : {1000L, 100000L, 1000000L}) b->Args({n, 1});
  b->Args({10000000L, 1});
  b->Args({10000000L, 2});
  b->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(sum_square_value_and_grad)->Apply(sizes);
BENCHMARK(sum_square_value)->Apply(sizes);
BENCHMARK(sum_square_handwritten)->Apply(sizes);
BENCHMARK(sin_exp_value_and_grad)->Apply(sizes);
BENCHMARK(sin_exp_value)->Apply(sizes);
BENCHMARK(sin_exp_handwritten)->Apply(sizes);
BENCHMARK(lse_value_and_grad)->Apply(sizes);
BENCHMARK(lse_value)->Apply(sizes);
BENCHMARK(lse_handwritten)->Apply(sizes);
BENCHMARK(normal_value_and_grad)->Apply(sizes);
BENCHMARK(normal_value)->Apply(sizes);
BENCHMARK(normal_handwritten)->Apply(sizes);

BENCHMARK_MAIN();
