// SIMD exp, sin, cos and sincos for batches of double: the math of the engine's exp/sin/cos ops
// (and of every kernel built on them: sigmoid, log_sum_exp, the eager ops).
//
//   exp(x)     x = k ln2 + r, |r| <= ln2/2 (k by rounding x log2(e); ln2 in two parts, the first
//              exact in k * ln2_hi); e^r by a degree-11 minimax polynomial (relative error of the
//              polynomial 2^-58 on the interval); 2^k added to the exponent bits.
//   sincos(x)  x = k pi/2 + r, |r| <= pi/4; r kept as r + r_lo (pi/2 in four parts, the first two
//              exact in their products with k for |x| <= 2^20); sin r = r + r^3 S(r^2) and
//              cos r = 1 - r^2/2 + r^4 C(r^2), each with 6 minimax coefficients (2^-58 and 2^-64);
//              the quadrant k mod 4 swaps them and sets the signs.
//
// Coefficients come from a Remez fit of the relative error, rounded to double. Measured against
// long double libm over 3.2 million random arguments per range, with fused multiply-adds
// (AVX-512, FMA3): exp <= 0.99 ulp everywhere; sin and cos <= 0.99 ulp for |x| <= 2^20 (xsimd
// 8's: 1.17 near 0, 1.45-1.48 up to 700, 2.2-2.4 beyond); beyond 2^20 as the C library (glibc:
// within one ulp). Without FMA (SSE2, AVX) exp reaches
// 1.25 ulp.
// On AVX-512 exp takes 0.7-0.85x of xsimd's time; sin, cos and sincos 0.9-1.2x (by argument
// range; sin alone costs a sincos).
//
// Edges: exp gives inf above 709.78, subnormals down to 2^-1074 and 0 below (xsimd 8 flushes
// them to 0 below -708.4), NaN for NaN. sin/cos of |x| > 2^20, inf or NaN come from the C
// library's sin and cos, lane by lane (their reduction handles any argument). sin(-0) = -0. Each lane's
// result depends on its own argument only: a batch with an edge lane recomputes, and keeps the others' bits
// unchanged.
//
// Batches of float use xsimd's functions.
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/xtensor.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tenferro::expr::math {

namespace detail {

// x * y + z and z - x * y, rounded once. xsimd 8 has no AVX-512 kernel for fma: its generic one
// is x * y + z, fused only where the compiler contracts it (not at -O1, not under
// -ffp-contract=off, which -std=c++20 implies), so AVX-512 batches use the instructions directly.
template <class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<double, A> fmadd(const xsimd::batch<double, A>& x,
                                                     const xsimd::batch<double, A>& y,
                                                     const xsimd::batch<double, A>& z) {
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    return _mm512_fmadd_pd(x, y, z);
  } else
#endif
  {
    return xsimd::fma(x, y, z);
  }
}
template <class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<double, A> fnmadd(const xsimd::batch<double, A>& x,
                                                      const xsimd::batch<double, A>& y,
                                                      const xsimd::batch<double, A>& z) {
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    return _mm512_fnmadd_pd(x, y, z);
  } else
#endif
  {
    return xsimd::fnma(x, y, z);
  }
}

template <class B, std::size_t N>
TENFERRO_ALWAYS_INLINE B horner(const B& x, const double (&c)[N]) {
  B p(c[N - 1]);
  for (std::size_t i = N - 1; i-- > 0;) p = fmadd(p, x, B(c[i]));
  return p;
}

// Adding 1.5 * 2^52 rounds to an integer and leaves it (plus 2^51) in the low mantissa bits.
inline constexpr double shifter = 0x1.8p52;

// e^r for |r| <= ln2/2, coefficients of r^0 ... r^11.
inline constexpr double exp_poly[] = {0x1.0000000000000p+0,  0x1.0000000000000p+0,  0x1.0000000000010p-1,
                                      0x1.55555555554a2p-3,  0x1.555555554f370p-5,  0x1.1111111130dd6p-7,
                                      0x1.6c16c1878110dp-10, 0x1.a01a011057234p-13, 0x1.a01992d100b0dp-16,
                                      0x1.71df4520c3b82p-19, 0x1.28b311c6191e1p-22, 0x1.ad661c608dabcp-26};
inline constexpr double log2e = 0x1.71547652b82fep+0;
inline constexpr double ln2_hi = 0x1.62e42fefa3800p-1;  // 42 bits: k * ln2_hi exact for |k| < 2^11
inline constexpr double ln2_lo = 0x1.ef35793c76730p-45;

// sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2) for |r| <= pi/4.
inline constexpr double sin_poly[] = {-0x1.5555555555548p-3, 0x1.111111110f7d0p-7,   -0x1.a01a019bfdf03p-13,
                                      0x1.71de3567d48d0p-19, -0x1.ae5e5a9294577p-26, 0x1.5d8fd1fdd151dp-33};
inline constexpr double cos_poly[] = {0x1.555555555554bp-5,   -0x1.6c16c16c14f91p-10, 0x1.a01a019c844f6p-16,
                                      -0x1.27e4f7eac4c06p-22, 0x1.1ee9d7b4e6799p-29,  -0x1.8fa49a099b86bp-37};
inline constexpr double two_over_pi = 0x1.45f306dc9c883p-1;
inline constexpr double pio2_1 = 0x1.921fb54400000p+0;    // 31 bits
inline constexpr double pio2_2 = 0x1.0b4611a600000p-34;   // 33 bits
inline constexpr double pio2_34 = 0x1.3198a2e037073p-69;  // the rest, rounded
inline constexpr double trig_fast_limit = 0x1p20;         // k < 2^20: k * pio2_1, k * pio2_2 exact

template <class A>
using int_batch = xsimd::batch<std::int64_t, A>;

// e^(x - k ln2) for k = round(x log2 e); returns k's shifted form t (k + 2^51 in the low bits).
template <class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<double, A> exp_reduced(const xsimd::batch<double, A>& x,
                                                           xsimd::batch<double, A>& t) {
  using B = xsimd::batch<double, A>;
  t = fmadd(x, B(log2e), B(shifter));
  const B k = t - B(shifter);
  B r = fnmadd(k, B(ln2_hi), x);
  r = fnmadd(k, B(ln2_lo), r);
  return horner(r, exp_poly);
}

// 2^j for integral j in [-1022, 1023].
template <class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<double, A> pow2(const xsimd::batch<double, A>& j) {
  using B = xsimd::batch<double, A>;
  return xsimd::bitwise_cast<B>(xsimd::bitwise_cast<int_batch<A>>(j + B(shifter + 1023.0)) << 52);
}

// exp for a batch with a lane outside |x| < 708 (or NaN): 2^k applied in two factors, so results
// overflow to inf and underflow through the subnormals; lanes inside get the same bits as the
// fast path (both factors are exact there).
template <class A>
[[gnu::noinline]] xsimd::batch<double, A> exp_edges(const xsimd::batch<double, A>& x) {
  using B = xsimd::batch<double, A>;
  const B clamped = xsimd::min(xsimd::max(x, B(-746.0)), B(746.0));
  B t;
  const B p = exp_reduced(clamped, t);
  const B k = t - B(shifter);
  const B k1 = xsimd::trunc(k * B(0.5));
  const B y = p * pow2(k1) * pow2(k - k1);
  return xsimd::select(xsimd::isnan(x), x + x, y);
}

// sin and cos of r + r_lo (|r| <= pi/4; |r_lo| up to a few dozen ulp of r near |x| = 2^20), to
// first order in r_lo with the computed values themselves: sin(r + r_lo) = sin r + r_lo cos r,
// cos(r + r_lo) = cos r - r_lo sin r (the second-order term r_lo^2 / 2 is below 2^-95).
template <class A>
TENFERRO_ALWAYS_INLINE std::pair<xsimd::batch<double, A>, xsimd::batch<double, A>> sincos_reduced(
    const xsimd::batch<double, A>& r, const xsimd::batch<double, A>& r_lo) {
  using B = xsimd::batch<double, A>;
  const B z = r * r;
  const B rz = r * z;
  const B zz = z * z;
  const B sp = horner(z, sin_poly);
  const B cp = horner(z, cos_poly);
  const B sin_r = fmadd(rz, sp, r);                     // for the corrections only
  const B cos_r = B(1.0) + fmadd(z, B(-0.5), zz * cp);  // (each result rounds its small terms once)
  const B s = r + fmadd(rz, sp, r_lo * cos_r);
  const B c = B(1.0) + fmadd(z, B(-0.5), fnmadd(r_lo, sin_r, zz * cp));
  return {s, c};
}

// sincos for a batch with a lane beyond 2^20, inf or NaN: those lanes from the C library's sin and
// cos (which reduce any argument exactly), one lane at a time; the others kept. Out of line and
// cold: such arguments are rare, and the scalar calls keep a multi-precision reduction out of
// every kernel that inlines sincos.
template <class A>
[[gnu::noinline, gnu::cold]] std::pair<xsimd::batch<double, A>, xsimd::batch<double, A>> sincos_far(
    const xsimd::batch<double, A>& x, const xsimd::batch<double, A>& sin_x,
    const xsimd::batch<double, A>& cos_x) {
  using B = xsimd::batch<double, A>;
  alignas(A::alignment()) double xs[B::size], s[B::size], c[B::size];
  x.store_aligned(xs);
  sin_x.store_aligned(s);
  cos_x.store_aligned(c);
  for (std::size_t i = 0; i < B::size; ++i) {
    if (!(std::abs(xs[i]) <= trig_fast_limit)) {
      s[i] = std::sin(xs[i]);
      c[i] = std::cos(xs[i]);
    }
  }
  return {B::load_aligned(s), B::load_aligned(c)};
}

}  // namespace detail

template <class T, class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<T, A> exp(const xsimd::batch<T, A>& x) {
  return xsimd::exp(x);
}

template <class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<double, A> exp(const xsimd::batch<double, A>& x) {
  using B = xsimd::batch<double, A>;
  using I = detail::int_batch<A>;
  B t;
  const B p = detail::exp_reduced(x, t);
  const B y = xsimd::bitwise_cast<B>(xsimd::bitwise_cast<I>(p) + (xsimd::bitwise_cast<I>(t) << 52));
  if (xsimd::all(xsimd::abs(x) < B(708.0))) [[likely]] {
    return y;
  }
  return detail::exp_edges(x);
}

template <class T, class A>
TENFERRO_ALWAYS_INLINE std::pair<xsimd::batch<T, A>, xsimd::batch<T, A>> sincos(const xsimd::batch<T, A>& x) {
  return xsimd::sincos(x);
}

template <class A>
TENFERRO_ALWAYS_INLINE std::pair<xsimd::batch<double, A>, xsimd::batch<double, A>> sincos(
    const xsimd::batch<double, A>& x) {
  using B = xsimd::batch<double, A>;
  using I = detail::int_batch<A>;
  const B t = detail::fmadd(x, B(detail::two_over_pi), B(detail::shifter));
  const B k = t - B(detail::shifter);
  // r + r_lo = x - k pi/2: the first two products are exact, the first difference too.
  const B r1 = detail::fnmadd(k, B(detail::pio2_1), x);
  const B p2 = k * B(detail::pio2_2);
  const B r = r1 - p2;
  const B r_lo = detail::fnmadd(k, B(detail::pio2_34), (r1 - r) - p2);
  const auto [s, c] = detail::sincos_reduced(r, r_lo);
  // Quadrant q = k mod 4: odd q swaps sin and cos; sin is negated for q = 2, 3, cos for q = 1, 2.
  const I q = xsimd::bitwise_cast<I>(t);
  const B flip = (s ^ c) & xsimd::bitwise_cast<B>(-(q & I(1)));
  const B sin_x = xsimd::select(x == B(0.0), x, (s ^ flip) ^ xsimd::bitwise_cast<B>((q & I(2)) << 62));
  const B cos_x = (c ^ flip) ^ xsimd::bitwise_cast<B>(((q + I(1)) & I(2)) << 62);
  if (xsimd::all(xsimd::abs(x) <= B(detail::trig_fast_limit))) [[likely]] {
    return {sin_x, cos_x};
  }
  return detail::sincos_far(x, sin_x, cos_x);
}

template <class T, class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<T, A> sin(const xsimd::batch<T, A>& x) {
  if constexpr (std::is_same_v<T, double>) {
    return math::sincos(x).first;
  } else {
    return xsimd::sin(x);
  }
}

template <class T, class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<T, A> cos(const xsimd::batch<T, A>& x) {
  if constexpr (std::is_same_v<T, double>) {
    return math::sincos(x).second;
  } else {
    return xsimd::cos(x);
  }
}

}  // namespace tenferro::expr::math
