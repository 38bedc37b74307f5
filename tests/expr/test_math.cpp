// The engine's SIMD exp, sin, cos, sincos and pow (expr/ops/math.hpp, math_pow.hpp): error in ulp against
// long double libm, edge values, and results that depend on each lane's own argument only.
#include <tenferro/expr/ops/math.hpp>
#include <tenferro/expr/ops/math_pow.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace {

using B = xsimd::batch<double>;
using F = xsimd::batch<float>;
constexpr std::size_t W = B::size;
namespace math = tenferro::expr::math;
constexpr double inf = std::numeric_limits<double>::infinity();

// |got - exact| in units of the last place of the double nearest to exact.
double ulps(double got, long double exact) {
  const double nearest = static_cast<double>(exact);
  if (std::isnan(nearest) || std::isinf(nearest))
    return got == nearest || (std::isnan(got) && std::isnan(nearest)) ? 0 : inf;
  const double a = std::fabs(nearest);
  const double ulp = a == 0 ? std::numeric_limits<double>::denorm_min() : std::nextafter(a, inf) - a;
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

struct worst {
  double sin = 0, cos = 0, exp = 0;
};

// Largest error over `count` batches of arguments uniform in [lo, hi].
worst measure(double lo, double hi, int count, bool with_exp) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(lo, hi);
  worst w;
  for (int it = 0; it < count; ++it) {
    alignas(64) std::array<double, W> x, s, c, e;
    for (auto& v : x) v = u(rng);
    const auto [bs, bc] = math::sincos(B::load_aligned(x.data()));
    bs.store_aligned(s.data());
    bc.store_aligned(c.data());
    if (with_exp) math::exp(B::load_aligned(x.data())).store_aligned(e.data());
    for (std::size_t l = 0; l < W; ++l) {
      const long double xl = x[l];
      w.sin = std::max(w.sin, ulps(s[l], std::sin(xl)));
      w.cos = std::max(w.cos, ulps(c[l], std::cos(xl)));
      if (with_exp) w.exp = std::max(w.exp, ulps(e[l], std::exp(xl)));
    }
  }
  return w;
}

double exp1(double x) { return math::exp(B(x)).get(0); }
double sin1(double x) { return math::sin(B(x)).get(0); }
double cos1(double x) { return math::cos(B(x)).get(0); }

}  // namespace

// The bounds hold with fused multiply-adds (AVX-512 or FMA3); without them exp is within 1.25 ulp.
// On AVX-512 exp is the table-driven kernel: the final rounding plus at most 0.05 ulp.
constexpr bool fused =
    XSIMD_WITH_AVX512F || XSIMD_WITH_FMA3_AVX2 || XSIMD_WITH_FMA3_AVX || XSIMD_WITH_FMA3_SSE;
constexpr double exp_bound = XSIMD_WITH_AVX512F ? 0.55 : fused ? 1.0 : 1.3;
constexpr double trig_bound = fused ? 1.0 : 1.3;

TEST_CASE("math: sin, cos and exp are within one ulp of the exact values (exp 0.55 on AVX-512)") {
  // Small arguments (no reduction), one or a few quadrants, up to the end of the own reduction
  // (2^20, where its low part is largest); exp up to the overflow.
  const worst small = measure(-0.78, 0.78, 20000, true);
  CHECK(small.sin <= trig_bound);
  CHECK(small.cos <= trig_bound);
  CHECK(small.exp <= exp_bound);
  const worst mid = measure(-700, 700, 20000, true);
  CHECK(mid.sin <= trig_bound);
  CHECK(mid.cos <= trig_bound);
  CHECK(mid.exp <= exp_bound);
  const worst far = measure(-0x1p20, 0x1p20, 20000, false);
  CHECK(far.sin <= trig_bound);
  CHECK(far.cos <= trig_bound);
  // Beyond 2^20 the lanes come from the C library's sin and cos (glibc: within one ulp).
  const worst huge = measure(-1e300, 1e300, 2000, false);
  CHECK(huge.sin <= 1.0);
  CHECK(huge.cos <= 1.0);
}

TEST_CASE("math: exp at its edges") {
  CHECK(exp1(0.0) == 1.0);
  CHECK(exp1(-0.0) == 1.0);
  CHECK(exp1(inf) == inf);
  CHECK(exp1(-inf) == 0.0);
  CHECK(std::isnan(exp1(std::nan(""))));
  CHECK(exp1(709.78) == std::exp(709.78));  // largest finite results
  CHECK(ulps(exp1(709.78), std::exp(static_cast<long double>(709.78))) <= 1);
  CHECK(exp1(709.79) == inf);
  // Subnormal results, down to the smallest, then 0 (xsimd 8 gives 0 below -708.4).
  for (double x : {-708.5, -720.0, -740.0, -745.0}) {
    INFO("x = " << x);
    CHECK(exp1(x) > 0.0);
    CHECK(ulps(exp1(x), std::exp(static_cast<long double>(x))) <= 1);
  }
  CHECK(exp1(-745.1332191019411) == std::numeric_limits<double>::denorm_min());
  CHECK(exp1(-745.14) == 0.0);
  CHECK(exp1(1.0) == Approx(2.718281828459045).epsilon(1e-16));
}

TEST_CASE("math: sin and cos at their edges") {
  CHECK(std::signbit(sin1(-0.0)));
  CHECK(sin1(-0.0) == 0.0);
  CHECK(!std::signbit(sin1(0.0)));
  CHECK(cos1(-0.0) == 1.0);
  CHECK(sin1(5e-324) == 5e-324);  // sin x = x for tiny x, subnormals included
  CHECK(std::isnan(sin1(inf)));
  CHECK(std::isnan(cos1(-inf)));
  CHECK(std::isnan(sin1(std::nan(""))));
  // Quadrant boundaries and the last fast argument and the first one beyond.
  for (double x : {1.5707963267948966, 3.141592653589793, -4.71238898038469, 0x1p20, 0x1p20 + 1, 1e22}) {
    INFO("x = " << x);
    CHECK(ulps(sin1(x), std::sin(static_cast<long double>(x))) <= 2);
    CHECK(ulps(cos1(x), std::cos(static_cast<long double>(x))) <= 2);
  }
  CHECK(sin1(3.141592653589793) == Approx(1.2246467991473532e-16).epsilon(1e-15));
}

TEST_CASE("math: a lane's result depends on its own argument only") {
  // The same argument, in every lane position, next to small neighbours (no reduction) and next
  // to edge values (far arguments, an overflow, NaN, inf) gives the same bits.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-0.78, 0.78), wide(-40, 40);
  const std::array<double, 7> small{0.1, -0.2, 0.3, 0.05, -0.7, 0.0, 0.6};
  const std::array<double, 7> edges{3.0, 1e7, -900.0, 800.0, std::nan(""), inf, 0x1p20 + 1};
  auto bits = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  int differing = 0;
  for (int it = 0; it < 20000; ++it) {
    const double v = it % 3 == 0 ? wide(rng) : it % 7 == 0 ? -0.0 : u(rng);
    const std::size_t at = static_cast<std::size_t>(it) % W;
    alignas(64) std::array<double, W> a{}, b{};
    for (std::size_t l = 0, j = static_cast<std::size_t>(it); l < W; ++l, ++j) {
      a[l] = small[j % small.size()];
      b[l] = edges[j % edges.size()];
    }
    a[at] = b[at] = v;
    const auto [sa, ca] = math::sincos(B::load_aligned(a.data()));
    const auto [sb, cb] = math::sincos(B::load_aligned(b.data()));
    const B ea = math::exp(B::load_aligned(a.data())), eb = math::exp(B::load_aligned(b.data()));
    differing += bits(sa.get(at)) != bits(sb.get(at));
    differing += bits(ca.get(at)) != bits(cb.get(at));
    differing += bits(ea.get(at)) != bits(eb.get(at));
    // sin and cos alone are the two halves of sincos.
    differing += bits(math::sin(B::load_aligned(b.data())).get(at)) != bits(sb.get(at));
    differing += bits(math::cos(B::load_aligned(b.data())).get(at)) != bits(cb.get(at));
  }
  CHECK(differing == 0);
}

TEST_CASE("math: float batches use xsimd's functions") {
  alignas(64) std::array<float, F::size> x{};
  for (std::size_t l = 0; l < x.size(); ++l) x[l] = -2.0f + 0.37f * static_cast<float>(l);
  const F v = F::load_aligned(x.data());
  CHECK(xsimd::all(math::exp(v) == xsimd::exp(v)));
  CHECK(xsimd::all(math::sin(v) == xsimd::sin(v)));
  CHECK(xsimd::all(math::cos(v) == xsimd::cos(v)));
}

TEST_CASE("math: pow within 1.3 ulp of the exact power (AVX2 1.45, SSE2 1.7), also at the range ends") {
  // Looser where exp is: the polynomial kernel (1.0 ulp with FMA3), and without fused multiply-adds
  // (SSE2: 1.25 ulp; the exact products are Dekker's).
  const double bound = XSIMD_WITH_AVX512F ? 1.3 : fused ? 1.45 : 1.7;
  struct range {
    double log_x_lo, log_x_hi, y_lo, y_hi;
  };
  // Moderate; tiny and huge bases; near 1 with large exponents; results near overflow.
  const range ranges[] = {{std::log(0.5), std::log(2.0), -10, 10},
                          {std::log(1e-300), std::log(1e-200), -1, 1},
                          {0, std::log(1e300), -1, 1},
                          {std::log(0.9), std::log(1.1), -700, 700},
                          {std::log(2.0), std::log(10.0), 100, 300}};
  std::mt19937_64 rng(23);
  for (const range& r : ranges) {
    std::uniform_real_distribution<double> lx(r.log_x_lo, r.log_x_hi), uy(r.y_lo, r.y_hi);
    double worst = 0;
    for (int it = 0; it < 20000; ++it) {
      alignas(64) std::array<double, W> x, y, p;
      for (std::size_t l = 0; l < W; ++l) {
        x[l] = std::exp(lx(rng)) * (l % 2 ? -1 : 1);  // negative bases with integral y below
        y[l] = l % 2 ? std::round(uy(rng)) : uy(rng);
      }
      math::pow(B::load_aligned(x.data()), B::load_aligned(y.data())).store_aligned(p.data());
      for (std::size_t l = 0; l < W; ++l) {
        const long double exact = std::pow(static_cast<long double>(x[l]), static_cast<long double>(y[l]));
        if (std::fabs(exact) < 0x1p-1022L || std::fabs(exact) > 0x1.fffffffffffffp1023L) continue;
        worst = std::max(worst, ulps(p[l], exact));
      }
    }
    INFO("bases in [" << std::exp(r.log_x_lo) << ", " << std::exp(r.log_x_hi) << "], exponents in [" << r.y_lo
                      << ", " << r.y_hi << "]: worst " << worst << " ulp");
    CHECK(worst <= bound);
  }
}
