// The compile-time layer against hand-written xsimd loops, side by side in one run.
// Arguments: {N, threads}. Every variant runs inside a oneTBB arena of `threads` threads.
#include <tenferro/expr.hpp>

#include "handwritten.hpp"

#include <benchmark/benchmark.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstring>

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
// The normal log-density's parameters, as a fitting loop has them: values the compiler cannot see,
// so that neither side folds log(sigma) or 1 / sigma at compile time.
double opaque(double v) {
  benchmark::DoNotOptimize(v);
  return v;
}
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
  run(s, [&] { benchmark::DoNotOptimize(ct::value_and_grad(normal, a, opaque(0.3), opaque(1.7))); });
}
void normal_value(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -3, 3, 1);
  run(s, [&] { benchmark::DoNotOptimize(ct::eval(normal, a, opaque(0.3), opaque(1.7))); });
}
void normal_handwritten(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -3, 3, 1);
  run(s, [&] {
    vec g = vec::from_shape({a.size()});
    benchmark::DoNotOptimize(handwritten::normal_log_pdf(a.data(), opaque(0.3), opaque(1.7), g.data(), a.size()));
    benchmark::DoNotOptimize(g.data());
  });
}

// The _into forms against the hand-written loops, both writing into outputs allocated once.
void sum_square_into(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1);
  vec g = vec::from_shape({a.size()});
  double v = 0;
  run(s, [&] {
    ct::value_and_grad_into(sum_square, std::tie(v, g), a);
    benchmark::DoNotOptimize(v);
    benchmark::DoNotOptimize(g.data());
  });
}
void sum_square_handwritten_into(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1);
  vec g = vec::from_shape({a.size()});
  run(s, [&] {
    benchmark::DoNotOptimize(handwritten::sum_square(a.data(), g.data(), a.size()));
    benchmark::DoNotOptimize(g.data());
  });
}
void sin_exp_into(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1), b = random_vec(s.range(0), -1, 1, 2);
  vec ga = vec::from_shape({a.size()}), gb = vec::from_shape({a.size()});
  double v = 0;
  run(s, [&] {
    ct::value_and_grad_into(sin_exp, std::tie(v, ga, gb), a, b);
    benchmark::DoNotOptimize(v);
    benchmark::DoNotOptimize(ga.data());
  });
}
void sin_exp_handwritten_into(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1), b = random_vec(s.range(0), -1, 1, 2);
  vec ga = vec::from_shape({a.size()}), gb = vec::from_shape({a.size()});
  run(s, [&] {
    benchmark::DoNotOptimize(handwritten::sin_exp(a.data(), b.data(), ga.data(), gb.data(), a.size()));
    benchmark::DoNotOptimize(ga.data());
  });
}
void lse_into(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -5, 5, 1);
  vec g = vec::from_shape({a.size()});
  double v = 0;
  run(s, [&] {
    ct::value_and_grad_into(lse, std::tie(v, g), a);
    benchmark::DoNotOptimize(v);
    benchmark::DoNotOptimize(g.data());
  });
}
void lse_handwritten_into(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -5, 5, 1);
  vec g = vec::from_shape({a.size()});
  run(s, [&] {
    benchmark::DoNotOptimize(handwritten::log_sum_exp(a.data(), g.data(), a.size()));
    benchmark::DoNotOptimize(g.data());
  });
}
void normal_into(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -3, 3, 1);
  vec g = vec::from_shape({a.size()});
  double v = 0, dmu = 0, dsigma = 0;
  run(s, [&] {
    ct::value_and_grad_into(normal, std::tie(v, g, dmu, dsigma), a, opaque(0.3), opaque(1.7));
    benchmark::DoNotOptimize(v);
    benchmark::DoNotOptimize(dsigma);
    benchmark::DoNotOptimize(g.data());
  });
}
void normal_handwritten_into(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -3, 3, 1);
  vec g = vec::from_shape({a.size()});
  run(s, [&] {
    benchmark::DoNotOptimize(handwritten::normal_log_pdf(a.data(), opaque(0.3), opaque(1.7), g.data(), a.size()));
    benchmark::DoNotOptimize(g.data());
  });
}

// SIMD math alone, xsimd 8's functions against tenferro's (math.hpp, math_pow.hpp), on 4096 doubles in [-3,
// 3] (in L1): what the elementwise kernels spend on exp, sin and cos. (Batches with |x| <= pi/4 in every lane
// are xsimd's fastest case for sin and cos; tenferro's is about as fast there.)
template <class F>
void math_loop(benchmark::State& s, F&& f) {
  using B = xsimd::batch<double>;
  const vec a = random_vec(4096, -3, 3, 3);
  vec out = vec::from_shape({a.size()});
  for (auto _ : s) {
    for (std::size_t i = 0; i < a.size(); i += B::size)
      f(B::load_unaligned(a.data() + i)).store_unaligned(out.data() + i);
    benchmark::DoNotOptimize(out.data());
  }
  s.SetItemsProcessed(s.iterations() * static_cast<long>(a.size()));
}
namespace tm = tenferro::expr::math;
void math_exp_xsimd(benchmark::State& s) {
  math_loop(s, [](auto b) { return xsimd::exp(b); });
}
void math_exp_tenferro(benchmark::State& s) {
  math_loop(s, [](auto b) { return tm::exp(b); });
}
void math_sin_xsimd(benchmark::State& s) {
  math_loop(s, [](auto b) { return xsimd::sin(b); });
}
void math_sin_tenferro(benchmark::State& s) {
  math_loop(s, [](auto b) { return tm::sin(b); });
}
void math_cos_xsimd(benchmark::State& s) {
  math_loop(s, [](auto b) { return xsimd::cos(b); });
}
void math_cos_tenferro(benchmark::State& s) {
  math_loop(s, [](auto b) { return tm::cos(b); });
}
void math_sincos_xsimd(benchmark::State& s) {
  math_loop(s, [](auto b) {
    const auto [sn, cs] = xsimd::sincos(b);
    return sn + cs;
  });
}
void math_sincos_tenferro(benchmark::State& s) {
  math_loop(s, [](auto b) {
    const auto [sn, cs] = tm::sincos(b);
    return sn + cs;
  });
}
// pow(|x| + 0.5, x): bases in [0.5, 3.5], exponents in [-3, 3] (the abs and add are in both).
void math_pow_xsimd(benchmark::State& s) {
  math_loop(s, [](auto b) { return xsimd::pow(xsimd::abs(b) + decltype(b)(0.5), b); });
}
void math_pow_tenferro(benchmark::State& s) {
  math_loop(s, [](auto b) { return tm::pow(xsimd::abs(b) + decltype(b)(0.5), b); });
}

// The memory bandwidth of this machine, for sum(square(x)) (which reads x and writes its gradient,
// as a copy does): a copy of N doubles split over the threads in 64 Ki-element chunks.
void copy(benchmark::State& s) {
  const vec a = random_vec(s.range(0), -1, 1, 1);
  vec b = vec::from_shape({a.size()});
  run(s, [&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, a.size(), 65536), [&](const auto& r) {
      std::memcpy(b.data() + r.begin(), a.data() + r.begin(), r.size() * sizeof(double));
    });
    benchmark::DoNotOptimize(b.data());
  });
}

// {N, threads}: N from 1 to 1e6 on one thread; 1e3 and 1e7 on one and two (the serial cut-off,
// and the scaling at a size where threads pay).
void sizes(benchmark::internal::Benchmark* b) {
  for (long n : {1L, 16L, 1000L, 10000L, 100000L, 1000000L, 10000000L}) b->Args({n, 1});
  b->Args({1000L, 2});
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
BENCHMARK(sum_square_into)->Apply(sizes);
BENCHMARK(sum_square_handwritten_into)->Apply(sizes);
BENCHMARK(sin_exp_into)->Apply(sizes);
BENCHMARK(sin_exp_handwritten_into)->Apply(sizes);
BENCHMARK(lse_into)->Apply(sizes);
BENCHMARK(lse_handwritten_into)->Apply(sizes);
BENCHMARK(normal_into)->Apply(sizes);
BENCHMARK(normal_handwritten_into)->Apply(sizes);
BENCHMARK(copy)->Apply(sizes);
BENCHMARK(math_exp_xsimd);
BENCHMARK(math_exp_tenferro);
BENCHMARK(math_sin_xsimd);
BENCHMARK(math_sin_tenferro);
BENCHMARK(math_cos_xsimd);
BENCHMARK(math_cos_tenferro);
BENCHMARK(math_sincos_xsimd);
BENCHMARK(math_sincos_tenferro);
BENCHMARK(math_pow_xsimd);
BENCHMARK(math_pow_tenferro);

BENCHMARK_MAIN();
