// SIMD exp, sin, cos and sincos for batches of double: the math of the engine's exp/sin/cos ops
// (and of every kernel built on them: sigmoid, log_sum_exp, the eager ops).
//
//   exp(x)     AVX-512: x = (16 m + j) ln2/16 + r, |r| <= ln2/32; 2^(j/16) from a 16-entry table
//              (one vpermt2pd; each entry with its rounding error in a second table), e^r - 1 by
//              a degree-7 polynomial (2^-64); 2^m added to the exponent bits. Other instruction
//              sets: x = k ln2 + r, |r| <= ln2/2 (k by rounding x log2(e); ln2 in two parts, the
//              first exact in k * ln2_hi); e^r by a degree-11 minimax polynomial (2^-58).
//   sincos(x)  x = k pi/2 + r, |r| <= pi/4; r kept as r + r_lo (pi/2 in four parts, the first two
//              exact in their products with k for |x| <= 2^20); sin r = r + r^3 S(r^2) and
//              cos r = 1 - r^2/2 + r^4 C(r^2), each with 6 minimax coefficients (2^-58 and 2^-64);
//              the quadrant k mod 4 swaps them and sets the signs.
//
// Coefficients come from a Remez fit of the relative error (exp's table kernel: a Chebyshev fit,
// scripts/exp_table.py), rounded to double. Measured against long double libm over 3.2 million random
// arguments per range: exp on AVX-512 <= 0.535 ulp everywhere (the final rounding and at most 0.05 ulp before
// it); elsewhere, with fused multiply-adds (FMA3), exp <= 1.0 ulp, and without them (SSE2, AVX)
// 1.25 ulp; sin and cos <= 0.99 ulp for |x| <= 2^20 with fused multiply-adds (xsimd 8's: 1.17
// near 0, 1.45-1.48 up to 700, 2.2-2.4 beyond); beyond 2^20 as the C library (glibc: within one
// ulp). On AVX-512 exp takes 0.6-0.75x of xsimd's time; sin, cos and sincos 0.9-1.2x (by
// argument range; sin alone costs a sincos).
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
#include <tenferro/expr/element.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
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

// Whether fmadd and fnmadd round once on x86 architecture A (AVX-512, FMA3, FMA4). Elsewhere they
// are a multiply and an add, and the error-free steps that need one rounding use product_error.
template <class A>
inline constexpr bool fused_multiply_add =
    std::is_base_of_v<xsimd::avx512f, A> || std::is_base_of_v<xsimd::fma3<xsimd::avx2>, A> ||
    std::is_base_of_v<xsimd::fma3<xsimd::avx>, A> || std::is_base_of_v<xsimd::fma3<xsimd::sse4_2>, A> ||
    std::is_base_of_v<xsimd::fma4, A>;

// x * y - p exactly, for p = x * y rounded: one fused multiply-add, or Dekker's product of the
// halves of x and y (each split into 26 bits by Veltkamp's 2^27 + 1 trick; its products must be
// rounded, as they are on the tags that take it, built without FMA hardware to contract them).
// For |x| or |y| beyond 2^996 the split overflows and the result is NaN: pow's only such case,
// |y| that large, has an exp of 0 or inf, where pow_double ignores a non-finite error term.
template <class A>
TENFERRO_ALWAYS_INLINE xsimd::batch<double, A> product_error(const xsimd::batch<double, A>& x,
                                                             const xsimd::batch<double, A>& y,
                                                             const xsimd::batch<double, A>& p) {
  using B = xsimd::batch<double, A>;
  if constexpr (fused_multiply_add<A>) {
    return fmadd(x, y, -p);
  } else {
    const B split(0x1p27 + 1);
    const B cx = x * split, cy = y * split;
    const B x_hi = cx - (cx - x), y_hi = cy - (cy - y);
    const B x_lo = x - x_hi, y_lo = y - y_hi;
    return ((x_hi * y_hi - p) + x_hi * y_lo + x_lo * y_hi) + x_lo * y_lo;
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

#if defined(__AVX512F__)
// exp on AVX-512: x = (16 m + j) ln2/16 + r, |r| <= ln2/32, and e^x = 2^m 2^(j/16) e^r. The 16
// values 2^(j/16) sit in two registers and one vpermt2pd picks a lane's; each is a double T_j
// plus its relative error d_j (a second table), so e^x = 2^m T_j (1 + d_j + (e^r - 1)) to
// 2^-59. e^r - 1 = r + r^2 Q(r), Q of degree 5 (Chebyshev fit; 2^-64 absolute). 10 multiply-adds,
// a multiply and an add against 14 multiply-adds for the degree-11 polynomial on |r| <= ln2/2,
// and within 0.54 ulp instead of 0.99.
inline constexpr double exp16_table[] = {
    0x1.0000000000000p+0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
    0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
    0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f090p+0,
    0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0};
// clang-format off
alignas(64) inline constexpr double exp16_error[] = {
    0.0,                    0x1.79aa65d837b6dp-54,  -0x1.01b15eaa59348p-55, 0x1.68efde3a8a894p-54,
    0x1.34d754db0abb6p-55,  0x1.59f48a72a4c6dp-55,  0x1.690cebb7aafb0p-56,  0x1.063e1e21c5409p-54,
    -0x1.3b3efbf5e2228p-54, -0x1.b32dcb94da51dp-56, 0x1.db72fc1f0eab4p-55,  0x1.1affc2b91ce27p-56,
    0x1.c1a7792cb3387p-55,  0x1.36eae30af0cb3p-56,  0x1.4a385a63d07a7p-56,  -0x1.ff7128fd391f0p-55};
// clang-format on
// The bits of T_j minus j * 2^48: adding t's bits shifted left by 48 (that is (16 m + j) * 2^48)
// gives the bits of 2^m T_j in one integer addition.
struct exp16_bits_table {
  alignas(64) std::int64_t v[16];
};
inline constexpr exp16_bits_table exp16_bits = [] {
  exp16_bits_table b{};
  for (int j = 0; j < 16; ++j) b.v[j] = std::bit_cast<std::int64_t>(exp16_table[j]) - (std::int64_t{j} << 48);
  return b;
}();
inline constexpr double exp16_q[] = {0x1.0000000000001p-1, 0x1.5555555555556p-3,  0x1.55555554e93b7p-5,
                                     0x1.11111110e1059p-7, 0x1.6c17ed5c1f49ep-10, 0x1.a01b0c3c80bbcp-13};
inline constexpr double sixteen_over_ln2 = 0x1.71547652b82fep+4;
inline constexpr double ln2_16_hi = 0x1.62e42fefa0000p-5;  // 36 bits: k * ln2_16_hi exact for |k| < 2^17
inline constexpr double ln2_16_lo = 0x1.cf79abc9e3b3ap-44;

// The parts of e^x: t = 16 m + j shifted (as exp_reduced's t), T_j's bits minus j * 2^48, and
// d_j + e^r - 1.
struct exp16_parts {
  __m512d t;
  __m512i bits;
  __m512d p;
};
TENFERRO_ALWAYS_INLINE exp16_parts exp16_reduced(__m512d x) {
  const __m512d t = _mm512_fmadd_pd(x, _mm512_set1_pd(sixteen_over_ln2), _mm512_set1_pd(shifter));
  const __m512d k = _mm512_sub_pd(t, _mm512_set1_pd(shifter));
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(ln2_16_hi), x);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(ln2_16_lo), r);
  __m512d q = _mm512_set1_pd(exp16_q[5]);
  for (int i = 4; i >= 0; --i) q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(exp16_q[i]));
  const __m512d em1 = _mm512_fmadd_pd(_mm512_mul_pd(r, r), q, r);
  // vpermt2pd reads the low 4 bits of each index lane: j.
  const __m512i ti = _mm512_castpd_si512(t);
  const __m512i bits =
      _mm512_permutex2var_epi64(_mm512_load_si512(exp16_bits.v), ti, _mm512_load_si512(exp16_bits.v + 8));
  const __m512d d = _mm512_permutex2var_pd(_mm512_load_pd(exp16_error), ti, _mm512_load_pd(exp16_error + 8));
  return {t, bits, _mm512_add_pd(em1, d)};
}
#endif

// Unscaled e^x and the power of two still to apply: e^x = y * 2^m. The slow path's helper, for x
// clamped to |x| <= 746.
template <class A>
TENFERRO_ALWAYS_INLINE std::pair<xsimd::batch<double, A>, xsimd::batch<double, A>> exp_unscaled(
    const xsimd::batch<double, A>& x) {
  using B = xsimd::batch<double, A>;
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    const exp16_parts e = exp16_reduced(x);
    const __m512i j = _mm512_and_si512(_mm512_castpd_si512(e.t), _mm512_set1_epi64(15));
    const __m512d table = _mm512_castsi512_pd(_mm512_add_epi64(e.bits, _mm512_slli_epi64(j, 48)));
    const B k = B(e.t) - B(shifter);
    return {B(_mm512_fmadd_pd(table, e.p, table)), xsimd::floor(k * B(1.0 / 16))};
  } else
#endif
  {
    B t;
    const B p = exp_reduced(x, t);
    return {p, t - B(shifter)};
  }
}

// The slow paths below are out of line and take and return their batches as raw registers, by
// value: passed in vector registers, where a `const batch&` would make every iteration of the
// loop that inlines exp or sincos store its batches to the stack in case the call happens.
template <class A>
using reg = typename xsimd::batch<double, A>::register_type;

// exp for a batch with a lane outside |x| < 708 (or NaN): 2^m applied in two factors, so results
// overflow to inf and underflow through the subnormals; lanes inside get the same bits as the
// fast path (both factors are exact there).
template <class A>
[[gnu::noinline]] reg<A> exp_edges(reg<A> xr) {
  using B = xsimd::batch<double, A>;
  const B x(xr);
  const B clamped = xsimd::min(xsimd::max(x, B(-746.0)), B(746.0));
  const auto [p, m] = exp_unscaled(clamped);
  const B m1 = xsimd::trunc(m * B(0.5));
  const B y = p * pow2(m1) * pow2(m - m1);
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

// sin (cosine false) or cos of a batch with a lane beyond 2^20, inf or NaN: those lanes from the
// C library's sin or cos (which reduce any argument exactly), one lane at a time; the others keep
// `fast`. Out of line and cold: such arguments are rare, and the scalar calls keep a
// multi-precision reduction out of every kernel that inlines sincos. (Two calls, one per result:
// a returned pair would travel through memory on the fast path too.)
template <class A>
[[gnu::noinline, gnu::cold]] reg<A> trig_far(reg<A> x, reg<A> fast, bool cosine) {
  using B = xsimd::batch<double, A>;
  alignas(A::alignment()) double xs[B::size], out[B::size];
  B(x).store_aligned(xs);
  B(fast).store_aligned(out);
  for (std::size_t i = 0; i < B::size; ++i) {
    if (!(std::abs(xs[i]) <= trig_fast_limit)) out[i] = cosine ? std::cos(xs[i]) : std::sin(xs[i]);
  }
  return B::load_aligned(out);
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
  B y;
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    const detail::exp16_parts e = detail::exp16_reduced(x);
    const __m512d scale =
        _mm512_castsi512_pd(_mm512_add_epi64(e.bits, _mm512_slli_epi64(_mm512_castpd_si512(e.t), 48)));
    y = _mm512_fmadd_pd(scale, e.p, scale);
  } else
#endif
  {
    B t;
    const B p = detail::exp_reduced(x, t);
    y = xsimd::bitwise_cast<B>(xsimd::bitwise_cast<I>(p) + (xsimd::bitwise_cast<I>(t) << 52));
  }
  if (xsimd::all(xsimd::abs(x) < B(708.0))) [[likely]] {
    return y;
  }
  return B(detail::exp_edges<A>(x));
}

template <class T, class A>
TENFERRO_ALWAYS_INLINE std::pair<xsimd::batch<T, A>, xsimd::batch<T, A>> sincos(const xsimd::batch<T, A>& x) {
  if constexpr (Complex<T>) {
    return {xsimd::sin(x), xsimd::cos(x)};
  } else {
    return xsimd::sincos(x);
  }
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
  // Quadrant q = k mod 4: odd q swaps sin and cos; sin is negated for q = 2, 3, cos for q = 1, 2
  // (bit 1 of q, of q + 1, moved to the sign bit). sin(-0) = -0.
  B sin_x, cos_x;
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    // Mask blends for the swap and one ternary-logic op per sign (a ^ (b & sign)): 10
    // instructions where the generic form below compiles to 13.
    const __m512i q = _mm512_castpd_si512(t);
    const __mmask8 odd = _mm512_test_epi64_mask(q, _mm512_set1_epi64(1));
    const __m512i sign = _mm512_set1_epi64(std::numeric_limits<std::int64_t>::min());
    const __m512i qs = _mm512_slli_epi64(q, 62);
    const __m512i qc = _mm512_slli_epi64(_mm512_add_epi64(q, _mm512_set1_epi64(1)), 62);
    const __m512i sin_bits =
        _mm512_ternarylogic_epi64(_mm512_castpd_si512(_mm512_mask_blend_pd(odd, s, c)), qs, sign, 0x78);
    const __m512i cos_bits =
        _mm512_ternarylogic_epi64(_mm512_castpd_si512(_mm512_mask_blend_pd(odd, c, s)), qc, sign, 0x78);
    const __mmask8 zero = _mm512_cmp_pd_mask(x, _mm512_setzero_pd(), _CMP_EQ_OQ);
    sin_x = _mm512_mask_blend_pd(zero, _mm512_castsi512_pd(sin_bits), x);
    cos_x = _mm512_castsi512_pd(cos_bits);
  } else
#endif
  {
    const I q = xsimd::bitwise_cast<I>(t);
    const B flip = (s ^ c) & xsimd::bitwise_cast<B>(-(q & I(1)));
    sin_x = xsimd::select(x == B(0.0), x, (s ^ flip) ^ xsimd::bitwise_cast<B>((q & I(2)) << 62));
    cos_x = (c ^ flip) ^ xsimd::bitwise_cast<B>(((q + I(1)) & I(2)) << 62);
  }
  if (xsimd::all(xsimd::abs(x) <= B(detail::trig_fast_limit))) [[likely]] {
    return {sin_x, cos_x};
  }
  return {B(detail::trig_far<A>(x, sin_x, false)), B(detail::trig_far<A>(x, cos_x, true))};
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
