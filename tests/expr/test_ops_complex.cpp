// The compile-time layer over complex arrays (ops/forms.hpp, element.hpp): the compute type rule,
// values of every op with a complex form against std::complex (SIMD path, every tail length, c32
// and c64), sums, and the plain (holomorphic) derivatives value_and_grad, vjp and jvp give.
#include <tenferro/expr.hpp>

#include <catch2/catch.hpp>

#include <complex>
#include <random>

using namespace tenferro::expr;
using tenferro::column_major_array;

namespace {
const auto [x, y] = placeholders<2>();

template <class C>
column_major_array<C> random_complex(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  auto a = column_major_array<C>::from_shape({n});
  for (std::size_t i = 0; i < n; ++i) a(i) = C(u(rng), u(rng));
  return a;
}

template <class C>
double relative(C got, std::complex<double> want) {
  return std::abs(std::complex<double>(got) - want) / std::max(1.0, std::abs(want));
}
}  // namespace

TEST_CASE("the compute type of complex inputs: complex of the floating rule") {
  using detail::compute_type_t;
  using c32a = column_major_array<std::complex<float>>;
  using c64a = column_major_array<std::complex<double>>;
  using f64a = column_major_array<double>;
  using i64a = column_major_array<std::int64_t>;
  STATIC_REQUIRE(std::is_same_v<compute_type_t<c32a>, std::complex<float>>);
  STATIC_REQUIRE(std::is_same_v<compute_type_t<c32a, f64a>, std::complex<double>>);  // c32 with f64: c64
  STATIC_REQUIRE(std::is_same_v<compute_type_t<c32a, i64a>, std::complex<float>>);
  STATIC_REQUIRE(std::is_same_v<compute_type_t<c32a, float>, std::complex<float>>);
  STATIC_REQUIRE(std::is_same_v<compute_type_t<c64a, c32a>, std::complex<double>>);
  STATIC_REQUIRE(has_complex_form<decltype(exp(x) * y + log(x) / sqrt(x) - pow(x, y))>);
  STATIC_REQUIRE(!has_complex_form<decltype(maximum(x, y))>);
  STATIC_REQUIRE(complex_differentiable<decltype(sum(sin(x) * exp(y)))>);
  STATIC_REQUIRE(complex_differentiable<decltype(sum(pow(x, y)))>);  // its masks compare real parts
  STATIC_REQUIRE(!complex_differentiable<decltype(sum(maximum(x, y)))>);
}

TEMPLATE_TEST_CASE("complex values of every op with a complex form match std::complex", "",
                   std::complex<float>, std::complex<double>) {
  using C = TestType;
  const double tol = std::is_same_v<C, std::complex<float>> ? 2e-5 : 1e-13;
  for (const std::size_t n : {std::size_t(1), std::size_t(5), std::size_t(19), std::size_t(301)}) {
    INFO("n = " << n);
    const auto a = random_complex<C>(n, 1), b = random_complex<C>(n, 2);
    const auto r =
        eval(exp(x) * y + log(x) / x - sqrt(y) + tanh(x) + sin(x) * cos(y) + square(x) - 2.0 * x, a, b);
    const auto p = eval(pow(x, y) - (-x) / (y + 3.0), a, b);
    for (std::size_t i = 0; i < n; ++i) {
      const std::complex<double> z(a(i)), w(b(i));
      const auto want = std::exp(z) * w + std::log(z) / z - std::sqrt(w) + std::tanh(z) +
                        std::sin(z) * std::cos(w) + z * z - 2.0 * z;
      REQUIRE(relative(r(i), want) < tol * 10);
      REQUIRE(relative(p(i), std::pow(z, w) + z / (w + 3.0)) < tol * 10);
    }
    std::complex<double> total = 0;
    for (std::size_t i = 0; i < n; ++i) total += std::complex<double>(a(i)) * std::complex<double>(b(i));
    CHECK(relative(eval(sum(x * y), a, b), total) < tol * 10);
  }
}

TEST_CASE("complex derivatives are the plain holomorphic ones: sum of c f'(z), no conjugation") {
  using C = std::complex<double>;
  const auto a = random_complex<C>(37, 3), b = random_complex<C>(37, 4);
  const auto [value, grads] = value_and_grad(sum(exp(x) * y + sin(x * y)), a, b);
  const auto& [ga, gb] = grads;
  C total = 0;
  for (std::size_t i = 0; i < 37; ++i) {
    const C z = a(i), w = b(i);
    total += std::exp(z) * w + std::sin(z * w);
    CHECK(std::abs(ga(i) - (std::exp(z) * w + std::cos(z * w) * w)) < 1e-13);
    CHECK(std::abs(gb(i) - (std::exp(z) + std::cos(z * w) * z)) < 1e-13);
  }
  CHECK(std::abs(value - total) < 1e-12);
  const auto c = random_complex<C>(37, 5);
  const auto [va] = vjp(square(x) + x, c, a);
  for (std::size_t i = 0; i < 37; ++i) CHECK(std::abs(va(i) - c(i) * (2.0 * a(i) + 1.0)) < 1e-13);
  const auto [v, t] = jvp(tanh(x), std::tie(a), std::tie(c));
  for (std::size_t i = 0; i < 37; ++i) {
    CHECK(std::abs(v(i) - std::tanh(a(i))) < 1e-14);
    // Relative: near the poles of tanh (Im z = pi/2) the tangent reaches the hundreds.
    const C want = (1.0 - std::tanh(a(i)) * std::tanh(a(i))) * c(i);
    INFO("tangent " << want << ", error " << std::abs(t(i) - want));
    CHECK(std::abs(t(i) - want) < 1e-14 * std::max(1.0, std::abs(want)));
  }
  // pow in both operands: w z^(w-1) and z^w log z; at z = 0 with Re w >= 0 the second is 0.
  const auto [pv, pg] = value_and_grad(sum(pow(x, y)), a, b);
  const auto& [pa, pb] = pg;
  for (std::size_t i = 0; i < 37; ++i) {
    const C z = a(i), w = b(i);
    CHECK(std::abs(pa(i) - w * std::pow(z, w - 1.0)) < 1e-12 * (1 + std::abs(pa(i))));
    CHECK(std::abs(pb(i) - std::pow(z, w) * std::log(z)) < 1e-12 * (1 + std::abs(pb(i))));
  }
  column_major_array<C> zero = column_major_array<C>::from_shape({2});
  zero(0) = 0, zero(1) = 0;
  column_major_array<C> e = column_major_array<C>::from_shape({2});
  e(0) = C(2, 1), e(1) = C(-0.5, 3);
  const auto [zv, zg] = value_and_grad(sum(pow(x, y)), zero, e);
  CHECK(std::get<1>(zg)(0) == C(0));                 // Re w = 2 >= 0: masked
  CHECK(!std::isfinite(std::get<1>(zg)(1).real()));  // Re w < 0: not masked
}
