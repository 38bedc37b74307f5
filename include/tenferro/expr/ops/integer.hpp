// Integer arithmetic of the ops: what an op's scalar() and batch() do when the compute type is
// i32 or i64, and which expressions have an integer form at all.
//
// Integers wrap modulo 2^bits on overflow, as SIMD lanes do; the scalar forms compute in the
// unsigned type, so nothing is undefined behaviour (INT_MIN / -1 and -INT_MIN are INT_MIN,
// |INT_MIN| is INT_MIN). Division truncates toward zero and `rem` has the dividend's sign, as C++
// and the seed system do. A zero divisor gives a / 0 = 0 and a % 0 = a here (no trap; the
// identity a == (a / b) * b + a % b still holds); the eager ops check divisors first and throw
// InvalidArgument. pow(a, b) for b < 0 is the truncated real value: 1 for a = 1, ±1 for a = -1,
// else 0 (the eager op throws instead, as PyTorch does).
//
// An op has an integer form when its struct says `static constexpr bool integral = true`
// (has_integer_form, ops/forms.hpp).
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/element.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tenferro::expr {

namespace ops::integer {

template <class T>
using unsigned_t = std::make_unsigned_t<T>;

template <class T>
T add(T a, T b) {
  return static_cast<T>(static_cast<unsigned_t<T>>(a) + static_cast<unsigned_t<T>>(b));
}
template <class T>
T sub(T a, T b) {
  return static_cast<T>(static_cast<unsigned_t<T>>(a) - static_cast<unsigned_t<T>>(b));
}
template <class T>
T mul(T a, T b) {
  return static_cast<T>(static_cast<unsigned_t<T>>(a) * static_cast<unsigned_t<T>>(b));
}
// a * b lane by lane, modulo 2^bits for integer lanes: multiplied as unsigned lanes, since where
// the instruction set has no vector multiply of the width (SSE2: i32 and i64; AVX2: i64) xsimd 8
// multiplies lane by lane in the signed type, where overflow is undefined behaviour.
template <class B>
B mul_lanes(const B& a, const B& b) {
  return a * b;
}
template <std::signed_integral T, class A>
xsimd::batch<T, A> mul_lanes(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) {
  using U = xsimd::batch<unsigned_t<T>, A>;
  return xsimd::bitwise_cast<xsimd::batch<T, A>>(xsimd::bitwise_cast<U>(a) * xsimd::bitwise_cast<U>(b));
}
template <class T>
T neg(T a) {
  return static_cast<T>(unsigned_t<T>(0) - static_cast<unsigned_t<T>>(a));
}
template <class T>
T abs(T a) {
  return a < 0 ? neg(a) : a;
}
template <class T>
T div(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return neg(a);
  return a / b;
}
template <class T>
T rem(T a, T b) {
  if (b == 0) return a;
  if (b == -1) return 0;
  return a % b;
}
template <class T>
T pow(T a, T b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  T result = 1;
  for (T base = a; b != 0; b >>= 1) {
    if (b & 1) result = mul(result, base);
    base = mul(base, base);
  }
  return result;
}

// f applied lane by lane (integer division has no SIMD instruction on x86).
template <class B, class F>
B lanes(const B& a, const B& b, F f) {
  using T = typename B::value_type;
  alignas(B::arch_type::alignment()) T x[B::size], y[B::size];
  a.store_aligned(x);
  b.store_aligned(y);
  for (std::size_t k = 0; k < B::size; ++k) x[k] = f(x[k], y[k]);
  return B::load_aligned(x);
}

}  // namespace ops::integer

}  // namespace tenferro::expr
