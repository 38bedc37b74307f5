// Reductions over every element of an elementwise body, to one scalar. Each op is a struct:
//   name                 printed name
//   identity<T>()        the value of an empty reduction
//   combine(a, b)        scalar and batch combination (associative)
// Their derivative rules live in derivative.hpp:
//   sum:  value Σ b_i;  reverse: the scalar cotangent c broadcasts, vjp(b, c); forward: Σ t_i.
//   max:  value max b_i, NaN when some b_i is NaN (-inf when empty);  reverse: c is split evenly
//         over the maximal elements, vjp(b, c [b == m] / Σ[b == m]) (with NaN == NaN: a NaN
//         maximum's cotangent goes to the NaN elements); forward: the mean tangent over the
//         maximal elements.
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/ops/integer.hpp>

#include <limits>
#include <string_view>

namespace tenferro::expr::ops {

struct sum {
  static constexpr bool integral = true;  // wraps (ops/integer.hpp)
  static constexpr bool complex = true;
  static constexpr std::string_view name = "sum";
  template <class T> static constexpr T identity() { return T(0); }
  template <class V> static V combine(const V& a, const V& b) {
    if constexpr (std::is_integral_v<V>) return integer::add(a, b); else return a + b;
  }
};

struct max {
  static constexpr bool integral = true;
  static constexpr std::string_view name = "max";
  template <class T> static constexpr T identity() {  // -inf, or the lowest integer
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity(); else return std::numeric_limits<T>::lowest();
  }
  template <class T> static T combine(T a, T b) { return a >= b || !(a == a) ? a : b; }
  template <class T, class A> static xsimd::batch<T, A> combine(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) {
    // NaN wins. xsimd::max(b, a) keeps a's lane when either is NaN (x86's maxpd returns its second
    // operand), so a NaN accumulator stays; a NaN b is selected by a mask that does not wait for
    // a, which keeps the accumulator's dependency chain at a max and a blend.
    return xsimd::select(!(b == b), b, xsimd::max(b, a));
  }
};

}  // namespace tenferro::expr::ops
