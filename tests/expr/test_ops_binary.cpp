// Every binary op, and compositions, through the derivative-checking harness; the IEEE edges of
// pow, maximum and minimum with known values.
#include "gradcheck.hpp"

#include <cmath>
#include <limits>
#include <vector>

using namespace tenferro::expr;
using tenferro::column_major_array;
using vec = column_major_array<double>;
using gradcheck::check_op;
using gradcheck::domain;

namespace {
const auto [x, y] = placeholders<2>();
constexpr domain anywhere{-3.0, 3.0};
constexpr domain positive{0.1, 3.0};
constexpr domain away_from_zero{0.5, 3.0, true};
}  // namespace

TEST_CASE("add") { check_op("add", x + y, std::array{anywhere, anywhere}); }
TEST_CASE("sub") { check_op("sub", x - y, std::array{anywhere, anywhere}); }
TEST_CASE("mul") { check_op("mul", x * y, std::array{anywhere, anywhere}); }
TEST_CASE("div") { check_op("div", x / y, std::array{anywhere, away_from_zero}); }
TEST_CASE("pow") { check_op("pow", pow(x, y), std::array{positive, domain{-2.0, 2.0}}); }
TEST_CASE("maximum") { check_op("maximum", maximum(x, y), std::array{anywhere, anywhere}); }
TEST_CASE("minimum") { check_op("minimum", minimum(x, y), std::array{anywhere, anywhere}); }
TEST_CASE("composition") {
  check_op("sin(x) * y + exp(x * y)", sin(x) * y + exp(x * y),
           std::array{domain{-1.0, 1.0}, domain{-1.0, 1.0}});
  check_op("sigmoid(x * y) / (1 + square(y))", sigmoid(x * y) / (1.0 + square(y)),
           std::array{anywhere, anywhere});
}

// ---- IEEE edges -------------------------------------------------------------------------------

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();

// Same value, and the same sign for zeros and infinities (NaN equals NaN).
template <class T>
bool same(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

template <class T>
column_major_array<T> vec_of(const std::vector<double>& v) {
  auto a = column_major_array<T>::from_shape({v.size()});
  for (std::size_t i = 0; i < v.size(); ++i) a(i) = static_cast<T>(v[i]);
  return a;
}

// Every pair of these bases and exponents covers each special case of C's pow.
const std::vector<double> pow_values{0.0,  -0.0, 1.0,  -1.0, 0.5,  -0.5, 2.0,   -2.0, 3.0,
                                     -3.0, 2.5,  -2.5, inf,  -inf, qnan, 1e300, -7.0, 1e-300};

template <class T>
void check_pow_edges() {
  std::vector<double> xs, ys;
  for (double a : pow_values) {
    for (double b : pow_values) {
      xs.push_back(a);
      ys.push_back(b);
    }
  }
  const auto X = vec_of<T>(xs), Y = vec_of<T>(ys);
  const auto simd = eval(pow(x, y), X, Y);  // SIMD body and a padded tail
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const T a = X(i), b = Y(i);
    const T want = std::pow(a, b);
    const T scalar = eval(pow(x, y), a, b)();  // the scalar path
    INFO("pow(" << a << ", " << b << "): want " << want << ", SIMD " << simd(i) << ", scalar " << scalar);
    CHECK(same(scalar, want));
    if (std::isfinite(want) && want != T(0) && want != T(1) && std::isfinite(a) && std::isfinite(b)) {
      // A regular result: within about an ulp of the C library's (itself within an ulp).
      CHECK(std::abs(simd(i) - want) <= 2 * std::numeric_limits<T>::epsilon() * std::abs(want));
      CHECK(std::signbit(simd(i)) == std::signbit(want));
    } else {
      CHECK(same(simd(i), want));
    }
  }
}

}  // namespace

TEST_CASE("pow follows C's pow at zeros, infinities, NaN and negative bases, in f64 and f32") {
  check_pow_edges<double>();
  check_pow_edges<float>();
}

TEST_CASE("regression: pow with a zero base is 1, inf or -inf, not 0") {
  const auto p = eval(pow(x, -1.0), vec{0.0, -0.0, 2.0});
  CHECK(same(p(0), inf));
  CHECK(same(p(1), -inf));
  CHECK(p(2) == 0.5);
  const auto q = eval(pow(x, x), vec{0.0, -0.0, 2.0});
  CHECK(q(0) == 1.0);
  CHECK(q(1) == 1.0);
  CHECK(q(2) == 4.0);
}

TEST_CASE(
    "pow's derivatives at a zero base: b a^(b-1) with 0 where b = 0, a^b ln a with 0 where a = 0 <= b") {
  const vec a{0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0};
  const vec b{0.0, 0.5, 1.0, 2.0, -1.0, -0.5, 3.0};
  const std::vector<double> d_base{0.0, inf, 1.0, 0.0, -inf, -inf, 12.0};
  const std::vector<double> d_exponent{0.0, 0.0, 0.0, 0.0, -inf, -inf, 8.0 * std::log(2.0)};
  const auto gx = eval(derivative(pow(x, y), x), a, b);
  const auto gy = eval(derivative(pow(x, y), y), a, b);
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("a = " << a(i) << ", b = " << b(i));
    CHECK(same(gx(i), d_base[i]));
    CHECK(same(eval(derivative(pow(x, y), x), a(i), b(i))(), d_base[i]));  // the scalar path
    if (std::isfinite(d_exponent[i])) {
      CHECK(gy(i) == Approx(d_exponent[i]));
    } else {
      CHECK(same(gy(i), d_exponent[i]));
    }
  }
  // A constant exponent: d/dx x^2 = 2x, d/dx x^0 = 0 even at 0.
  CHECK(same(eval(derivative(pow(x, 2.0), x), vec{0.0})(0), 0.0));
  CHECK(same(eval(derivative(pow(x, 0.0), x), vec{0.0})(0), 0.0));
  CHECK(to_string(derivative(pow(x, y), x)) == "where_nonzero(x1, x1 * pow(x0, x1 - 1))");
}

TEST_CASE("maximum and minimum propagate NaN from either side, and send its gradient to the NaN") {
  for (const std::size_t n : {std::size_t(1), std::size_t(9), std::size_t(20)}) {  // batch and tail
    INFO("n = " << n);
    vec a = vec::from_shape({n}), b = vec::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
      a(i) = qnan;
      b(i) = 0.0;
    }
    CHECK(std::isnan(eval(maximum(x, y), a, b)(n - 1)));
    CHECK(std::isnan(eval(maximum(x, y), b, a)(n - 1)));
    CHECK(std::isnan(eval(minimum(x, y), a, b)(n - 1)));
    CHECK(std::isnan(eval(minimum(x, y), b, a)(n - 1)));
    // d maximum(a, b)/da is 1 where a is NaN, and d/db is 1 where b is NaN (and a is not).
    CHECK(eval(derivative(maximum(x, y), x), a, b)(n - 1) == 1.0);
    CHECK(eval(derivative(maximum(x, y), y), a, b)(n - 1) == 0.0);
    CHECK(eval(derivative(maximum(x, y), x), b, a)(n - 1) == 0.0);
    CHECK(eval(derivative(maximum(x, y), y), b, a)(n - 1) == 1.0);
    CHECK(eval(derivative(minimum(x, y), x), a, b)(n - 1) == 1.0);
    CHECK(eval(derivative(minimum(x, y), y), b, a)(n - 1) == 1.0);
  }
  CHECK(std::isnan(eval(maximum(x, y), qnan, 0.0)()));  // the scalar path
  CHECK(std::isnan(eval(maximum(x, y), 0.0, qnan)()));
  CHECK(std::isnan(eval(minimum(x, y), 0.0, qnan)()));
}
