// expr/ops/integer.hpp: the compile-time layer over i32 and i64 arrays — the compute type rule,
// wrapping arithmetic against an exact reference (SIMD path, scalar path, every tail length),
// exact reductions (no hoisting through doubles), and the refusals (fractional constants).
#include <tenferro/expr.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>

using namespace tenferro::expr;
using tenferro::column_major_array;
using tenferro::Error;
using tenferro::ErrorKind;

namespace {

// Exact arithmetic for the references (a GCC and Clang extension).
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;
const auto [x, y] = placeholders<2>();

template <class T>
column_major_array<T> array_of(const std::vector<T>& v) {
  auto a = column_major_array<T>::from_shape({v.size()});
  std::copy(v.begin(), v.end(), a.data());
  return a;
}

// v modulo 2^bits of T.
template <class T>
T wrapped(i128 v) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<u128>(v)));
}

template <class T>
std::vector<T> edge_values(std::size_t n, std::uint64_t seed) {
  using lim = std::numeric_limits<T>;
  const T edges[] = {lim::max(), lim::lowest(), T(-1), T(0), T(1), T(3), T(-3), T(lim::max() - 2)};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<T> any(lim::lowest(), lim::max());
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i < 64 ? edges[(i * (seed + 1)) % 8] : any(rng);
  return v;
}
}  // namespace

TEST_CASE("the compute type: integer arrays compute in the widest integer unless a float takes part") {
  using detail::compute_type_t;
  using i32a = column_major_array<std::int32_t>;
  using i64a = column_major_array<std::int64_t>;
  using f32a = column_major_array<float>;
  STATIC_REQUIRE(std::is_same_v<compute_type_t<i32a>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<compute_type_t<i32a, i64a>, std::int64_t>);
  STATIC_REQUIRE(std::is_same_v<compute_type_t<i32a, int>, std::int32_t>);  // an int scalar does not widen
  STATIC_REQUIRE(std::is_same_v<compute_type_t<i64a, f32a>, float>);        // i64 with f32: f32
  STATIC_REQUIRE(std::is_same_v<compute_type_t<i32a, double>, double>);     // a floating scalar wins
  STATIC_REQUIRE(std::is_same_v<compute_type_t<f32a, int>, double>);        // as before: int scalars
  STATIC_REQUIRE(std::is_same_v<compute_type_t<f32a, float>, float>);
  STATIC_REQUIRE(has_integer_form<decltype(abs(x) * y - maximum(x, y) / 3)>);
  STATIC_REQUIRE(has_integer_form<decltype(sum(square(x)) + max(x))>);
  STATIC_REQUIRE(!has_integer_form<decltype(exp(x) + y)>);
}

TEMPLATE_TEST_CASE("integer expressions wrap exactly like 128-bit arithmetic cut to the width", "",
                   std::int32_t, std::int64_t) {
  using T = TestType;
  for (const std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(17), std::size_t(1000)}) {
    INFO("n = " << n);
    const auto a = edge_values<T>(n, 1), b = edge_values<T>(n, 2);
    const auto xa = array_of(a), yb = array_of(b);
    const auto r = eval(x * y + abs(x) - square(y) * 3, xa, yb);
    const auto q = eval(x / y + rem(x, y) * 2, xa, yb);  // b = 0: a / 0 = 0 and a % 0 = a
    const auto m = eval(-minimum(x, y) + sign(x) * maximum(x, y), xa, yb);
    for (std::size_t i = 0; i < n; ++i) {
      INFO(a[i] << ", " << b[i]);
      const i128 p = a[i], s = b[i];
      // Ring operations commute with the cut to the width: compute modulo 2^128, then cut.
      const u128 up = static_cast<u128>(p), us = static_cast<u128>(s);
      REQUIRE(r(i) ==
              wrapped<T>(static_cast<i128>(up * us + static_cast<u128>(p < 0 ? -p : p) - 3 * us * us)));
      const T quotient = s == 0 ? T(0) : wrapped<T>(p / s);
      const T remainder = s == 0 ? a[i] : wrapped<T>(p % s);
      REQUIRE(q(i) == wrapped<T>(i128(quotient) + wrapped<T>(i128(remainder) * 2)));
      const T mn = std::min(a[i], b[i]), mx = std::max(a[i], b[i]);
      REQUIRE(m(i) == wrapped<T>(-i128(mn) + i128(a[i] > 0 ? 1 : a[i] < 0 ? -1 : 0) * mx));
    }
    // The scalar path (the tests' reference policy) agrees element for element.
    const auto ref = detail::eval_with<detail::reference_policy>(x * y + abs(x) - square(y) * 3, xa, yb);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(ref(i) == r(i));
  }
}

TEST_CASE("integer pow: exponents by squaring with wrapping and truncated negative exponents") {
  const auto base = array_of<std::int64_t>({2, -3, 10, 1, -1, -1, 5, 0});
  const auto expo = array_of<std::int64_t>({10, 3, 19, -4, -3, -2, -1, 0});
  const auto r = eval(pow(x, y), base, expo);
  const std::int64_t want[] = {1024, -27, wrapped<std::int64_t>(i128(1000000000000000000) * 10), 1, -1, 1,
                               0,    1};
  for (std::size_t i = 0; i < 8; ++i) CHECK(r(i) == want[i]);
  const auto big = eval(pow(x, 3), array_of<std::int32_t>({2000, -2000}));
  CHECK(big(0) == wrapped<std::int32_t>(i128(8000000000)));
  CHECK(big(1) == wrapped<std::int32_t>(-i128(8000000000)));
}

TEST_CASE("integer reductions are exact: no hoisting through doubles") {
  // 2^53 + 1 is not a double: a sum of c * x hoisted as c * sum(x) in double would round it.
  const std::int64_t big = (std::int64_t(1) << 53) + 1;
  std::vector<std::int64_t> v(1001, big);
  v[5] = -3;
  const auto a = array_of(v);
  i128 want = 0;
  for (const auto e : v) want += i128(e) * 3 + 1;
  CHECK(eval(sum(x * 3 + 1), a) == wrapped<std::int64_t>(want));
  CHECK(eval(max(x), a) == big);
  CHECK(eval(max(-x), a) == 3);
  CHECK(eval(sum(x) / 1000, a) == wrapped<std::int64_t>((i128(big) * 1000 - 3) / 1000));
}

TEST_CASE("an integer computation refuses a constant that is not a whole number of its type") {
  const auto a = array_of<std::int32_t>({1, 2, 3});
  try {
    (void)eval(x * 2.5, a);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK(std::string(e.what()).find("2.5") != std::string::npos);
    CHECK(std::string(e.what()).find("i32") != std::string::npos);
  }
  CHECK_THROWS_AS(eval(x + 3e9, a), Error);  // beyond i32
  const auto r = eval(x * 2.5, a, 1.0);      // a floating scalar input: computed in double
  CHECK(r(2) == 7.5);
  const auto mixed = eval(x + y, a, array_of<double>({0.5, 0.5, 0.5}));  // an i32 and an f64 array
  CHECK(mixed(0) == 1.5);
}
