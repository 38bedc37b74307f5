// SIMD pow for batches of double and float: the math of the engine's pow op.
//
//   x^y = e^(y ln|x|), with ln|x| = k ln2 + ln m (|x| = 2^k m, m in [sqrt(1/2), sqrt(2)]) carried
//   as a double-double: k ln2 exactly in two parts, ln m = 2 atanh(s), s = (m - 1)/(m + 1),
//   |s| <= 0.1716, as 2s (with s's rounding error) plus (2/3) s^3 (with its roundings) plus s^5
//   times a Taylor polynomial in s^2 (10 terms). The product y ln|x| keeps its rounding error
//   (fma), and e^(p + e) = e^p (1 + e) with the exp of math.hpp. Measured against long double
//   powl on 3.2 million random arguments per range (AVX-512): within 1.03 ulp for |y| <= 10 and
//   for tiny or huge x, 1.26 ulp near overflow (|y ln x| up to 700); xsimd 8's pow, e^(y ln|x|)
//   in plain double: 10, 511 and 764 ulp. With FMA3 (AVX2), whose exp is the polynomial kernel, within
//   1.41 ulp; without fused multiply-adds (SSE2) the exact products are Dekker's (product_error):
//   within 1.64 ulp on the same ranges. Float batches are computed in double, rounded once.
//
// Special cases as C's pow (C11 F.10.4.4), lane by lane: pow(x, ±0) = 1 and pow(1, y) = 1 even for
// NaN; pow(-1, ±inf) = 1; otherwise NaN in gives NaN; a zero or infinite base, or an infinite
// exponent, gives 0 or inf by whether |x| > 1 and y > 0 agree, negated for an odd integral y when
// the base is negative (-0 included); a negative finite base with a finite non-integral y gives NaN.
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/ops/math.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>

namespace tenferro::expr::math {

namespace detail {

// ln m = 2 atanh s = 2s + (2/3) s^3 + s^5 (2/5 + 2/7 s^2 + ... + 2/23 s^18).
inline constexpr double atanh_tail[] = {2.0 / 5,  2.0 / 7,  2.0 / 9,  2.0 / 11, 2.0 / 13,
                                        2.0 / 15, 2.0 / 17, 2.0 / 19, 2.0 / 21, 2.0 / 23};
inline constexpr double two_thirds_hi = 2.0 / 3;                // 2/3 rounded
inline constexpr double two_thirds_lo = 0x1.5555555555555p-56;  // 2/3 - two_thirds_hi

// ln|x| as hi + lo (relative error about 2^-60) for finite non-zero x.
template <class A>
TENFERRO_ALWAYS_INLINE void log_abs_dd(const xsimd::batch<double, A>& x, xsimd::batch<double, A>& hi,
                                       xsimd::batch<double, A>& lo) {
  using B = xsimd::batch<double, A>;
  using I = int_batch<A>;
  B ax = xsimd::abs(x);
  const auto subnormal = ax < B(0x1p-1022);
  ax = xsimd::select(subnormal, ax * B(0x1p54), ax);
  const I bits = xsimd::bitwise_cast<I>(ax);
  // The biased exponent as a double: placed in the low bits of 2^52's mantissa.
  const B biased = xsimd::bitwise_cast<B>((bits >> 52) | I(0x4330000000000000)) - B(0x1p52);
  B m = xsimd::bitwise_cast<B>((bits & I(0x000FFFFFFFFFFFFF)) | I(0x3FF0000000000000));  // [1, 2)
  const auto high = m > B(0x1.6a09e667f3bcdp0);                                          // sqrt(2)
  m = xsimd::select(high, m * B(0.5), m);
  const B k =
      biased - B(1023.0) + xsimd::select(high, B(1.0), B(0.0)) - xsimd::select(subnormal, B(54.0), B(0.0));
  // s = f / d with f = m - 1 (exact) and d = 2 + f = d_hi + d_lo; s_lo: the rest of the quotient.
  const B f = m - B(1.0);
  const B d = B(2.0) + f;
  const B d_lo = (B(2.0) - d) + f;
  const B s = f / d;
  B rest_f;  // f - s d, exact (s d is within an ulp of f)
  if constexpr (fused_multiply_add<A>) {
    rest_f = fnmadd(s, d, f);
  } else {
    const B sd = s * d;
    rest_f = (f - sd) - product_error(s, d, sd);
  }
  const B s_lo = (rest_f - s * d_lo) / d;
  // (2/3) s^3 (up to 0.0034) as c + c_lo, each of its roundings kept; the rest of the series (below
  // 6e-5) and the correction for s_lo need no more than plain double. (An error of 2^-59 of ln|x|
  // is several ulp of x^y once y ln|x| nears 700.)
  const B z = s * s;
  const B z_lo = product_error(s, s, z);
  const B s3 = s * z;
  const B s3_lo = fmadd(s, z_lo, product_error(s, z, s3));
  const B c = s3 * B(two_thirds_hi);
  const B c_lo =
      fmadd(s3_lo, B(two_thirds_hi), fmadd(s3, B(two_thirds_lo), product_error(s3, B(two_thirds_hi), c)));
  const B ds = B(2.0) * s_lo;  // (2 atanh)'(s) s_lo = 2 s_lo / (1 - s^2) = 2 s_lo (1 + s^2 + ...)
  const B tail = fmadd(s3 * z, horner(z, atanh_tail), fmadd(ds, z, ds) + c_lo);
  // k ln2 + 2s + c + tail: k ln2_hi and 2s are exact; two sums with their rounding errors, then
  // renormalized so that |lo| <= ulp(hi) / 2 (e^(p + e) = e^p (1 + e) needs e that small).
  const B a = k * B(ln2_hi);
  const B b = B(2.0) * s;
  const B sum = a + b;
  const B bb = sum - a;
  const B err = (a - (sum - bb)) + (b - bb);
  const B sum2 = sum + c;
  const B cc = sum2 - sum;
  const B err2 = (sum - (sum2 - cc)) + (c - cc);
  const B rest = err + err2 + fmadd(k, B(ln2_lo), tail);
  hi = sum2 + rest;
  lo = rest - (hi - sum2);
}

// x^y for double batches, special cases included.
template <class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<double, A> pow_double(const xsimd::batch<double, A>& x,
                                                          const xsimd::batch<double, A>& y) {
  using B = xsimd::batch<double, A>;
  constexpr double inf = std::numeric_limits<double>::infinity();
  B l_hi, l_lo;
  log_abs_dd(x, l_hi, l_lo);
  const B p = y * l_hi;
  const B p_lo = fmadd(y, l_lo, product_error(y, l_hi, p));  // y (l_hi + l_lo) - p
  B r = math::exp(p);
  r = xsimd::select(xsimd::isfinite(r) & xsimd::isfinite(p_lo), fmadd(r, p_lo, r), r);
  const B ax = xsimd::abs(x);
  const auto infinite = (ax == B(0.0)) | (ax == B(inf)) | xsimd::isinf(y);
  // inf where |x| > 1 and y > 0 agree. Written with & | !: xsimd 8's ^ of AVX-512 masks is an OR,
  // and its != of SSE2 masks compares them as doubles (NaN != NaN).
  const auto big = ax > B(1.0);
  const auto negative = y < B(0.0);
  r = xsimd::select(infinite, xsimd::select((big & !negative) | (negative & !big), B(inf), B(0.0)), r);
  // An odd integral exponent keeps the base's sign (bitofsign: the sign bit alone, -0 included).
  const auto integral = xsimd::is_flint(y);
  const auto odd = integral & !xsimd::is_flint(y * B(0.5));
  r = xsimd::select(odd, r ^ xsimd::bitofsign(x), r);
  const auto complex = (x < B(0.0)) & xsimd::isfinite(x) & xsimd::isfinite(y) & !integral;
  r = xsimd::select(complex | xsimd::isnan(x) | xsimd::isnan(y), B(std::numeric_limits<double>::quiet_NaN()),
                    r);
  const auto one = (y == B(0.0)) | (x == B(1.0)) | ((ax == B(1.0)) & xsimd::isinf(y));
  return xsimd::select(one, B(1.0), r);
}

}  // namespace detail

// x^y (see the top of this header).
template <class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<double, A> pow(const xsimd::batch<double, A>& x,
                                                   const xsimd::batch<double, A>& y) {
  return detail::pow_double(x, y);
}

// Complex lanes: xsimd's principal value, exp(y log x).
template <class T, class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<std::complex<T>, A> pow(const xsimd::batch<std::complex<T>, A>& x,
                                                            const xsimd::batch<std::complex<T>, A>& y) {
  return xsimd::pow(x, y);
}

// Float lanes widened to double (through memory: xsimd 8 has no widening conversion), computed and
// rounded once.
template <class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<float, A> pow(const xsimd::batch<float, A>& x,
                                                  const xsimd::batch<float, A>& y) {
  using F = xsimd::batch<float, A>;
  using D = xsimd::batch<double, A>;
  alignas(A::alignment()) float xs[F::size], ys[F::size];
  alignas(A::alignment()) double xd[D::size], yd[D::size];
  x.store_aligned(xs);
  y.store_aligned(ys);
  for (std::size_t h = 0; h < F::size; h += D::size) {
    for (std::size_t i = 0; i < D::size; ++i) {
      xd[i] = xs[h + i];
      yd[i] = ys[h + i];
    }
    const D r = detail::pow_double(D::load_aligned(xd), D::load_aligned(yd));
    r.store_aligned(xd);
    for (std::size_t i = 0; i < D::size; ++i) xs[h + i] = static_cast<float>(xd[i]);
  }
  return F::load_aligned(xs);
}

}  // namespace tenferro::expr::math
