// Elementwise binary ops. Each op is a small struct:
//   name                  its name in the eager op table ("add"; ad/ops/expression.hpp)
//   cost                  rough price of one evaluation in multiplies
//   symbol, precedence    infix printing (precedence 0: printed as a call `name(a, b)`)
//   scalar(a, b)          value of one element
//   batch(a, b)           value of an xsimd batch
//   d_lhs(a, b), d_rhs(a, b)   the partial derivatives ∂f/∂a and ∂f/∂b as expressions
// Reverse rule of binary<Op, A, B>:  vjp(a, c * d_lhs(a, b)) + vjp(b, c * d_rhs(a, b)).
// Forward rule:  tangent = d_lhs(a, b) * tangent(a) + d_rhs(a, b) * tangent(b).
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/nodes.hpp>
#include <tenferro/expr/ops/integer.hpp>
#include <tenferro/expr/ops/math_pow.hpp>

#include <cmath>
#include <string_view>

namespace tenferro::expr::ops {

// True where v is NaN, for a number or a batch. Written !(v == v), never v != v: xsimd 8's != on
// AVX and AVX-512 batches is an ordered comparison (false when either lane is NaN).
template <class V>
auto is_nan(const V& v) {
  return !(v == v);
}

// True when an eager op of Op gives a Bool result.
template <class Op>
constexpr bool is_predicate() {
  if constexpr (requires { Op::predicate; }) {
    return Op::predicate;
  } else {
    return false;
  }
}

// a + b;  ∂/∂a = 1, ∂/∂b = 1
struct add {
  static constexpr bool complex = true;
  static constexpr bool integral = true;
  static constexpr std::string_view name = "add";  // in the op table
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "+";
  static constexpr int precedence = 1;
  template <class T>
  static T scalar(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return integer::add(a, b);
    } else {
      return a + b;
    }
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return a + b;
  }
  template <class A, class C>
  static auto d_lhs(const A&, const C&);
  template <class A, class C>
  static auto d_rhs(const A&, const C&);
};

// a - b;  ∂/∂a = 1, ∂/∂b = -1
struct sub {
  static constexpr bool complex = true;
  static constexpr bool integral = true;
  static constexpr std::string_view name = "sub";  // in the op table
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "-";
  static constexpr int precedence = 1;
  template <class T>
  static T scalar(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return integer::sub(a, b);
    } else {
      return a - b;
    }
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return a - b;
  }
  template <class A, class C>
  static auto d_lhs(const A&, const C&);
  template <class A, class C>
  static auto d_rhs(const A&, const C&);
};

// a * b;  ∂/∂a = b, ∂/∂b = a
struct mul {
  static constexpr bool complex = true;
  static constexpr bool integral = true;
  static constexpr std::string_view name = "mul";  // in the op table
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "*";
  static constexpr int precedence = 2;
  template <class T>
  static T scalar(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return integer::mul(a, b);
    } else {
      return a * b;
    }
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return integer::mul_lanes(a, b);
  }
  template <class A, class C>
  static auto d_lhs(const A&, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C&);
};

// a / b;  ∂/∂a = 1/b, ∂/∂b = -(a/b)/b;  b = 0 gives inf/NaN as IEEE does
struct div {
  static constexpr bool complex = true;
  static constexpr bool integral = true;
  static constexpr std::string_view name = "div";  // in the op table
  static constexpr int cost = 4;
  static constexpr std::string_view symbol = "/";
  static constexpr int precedence = 2;
  template <class T>
  static T scalar(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return integer::div(a, b);
    } else {
      return a / b;
    }
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    if constexpr (std::is_integral_v<typename B::value_type>) {
      return integer::lanes(a, b, [](auto x, auto y) { return integer::div(x, y); });
    } else {
      return a / b;
    }
  }
  template <class A, class C>
  static auto d_lhs(const A&, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C& b);
};

// a^b with C's special cases (pow(0, -1) = inf, pow(-0, -1) = -inf, pow(x, 0) = 1, pow(-8, 1/3) =
// NaN; see ops/math.hpp);  ∂/∂a = b a^(b-1), and 0 where b = 0 (a^(b-1) may be inf there);
// ∂/∂b = a^b ln a, and 0 where a = 0 and b >= 0 (ln 0 = -inf). At a = 0 ∂/∂a is inf for
// 0 < b < 1, -inf for b < 0, 1 for b = 1, 0 for b > 1. With a constant exponent (pow(e, 2.5))
// only ∂/∂a is ever built, so a may be any value where a^b is real.
struct pow {
  static constexpr bool complex = true;
  static constexpr bool integral = true;
  static constexpr std::string_view name = "pow";  // in the op table
  static constexpr int cost = 25;
  static constexpr std::string_view symbol = "pow";
  static constexpr int precedence = 0;
  template <class T>
  static T scalar(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return integer::pow(a, b);
    } else {
      return std::pow(a, b);
    }
  }
  template <class B>
  TENFERRO_ALWAYS_INLINE static B batch(const B& a, const B& b) {
    if constexpr (std::is_integral_v<typename B::value_type>) {
      return integer::lanes(a, b, [](auto x, auto y) { return integer::pow(x, y); });
    } else {
      return math::pow(a, b);
    }
  }
  template <class A, class C>
  static auto d_lhs(const A& a, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C& b);
};

// The remainder of truncating division, with the dividend's sign (C's fmod; C++'s % on
// integers, see ops/integer.hpp);  ∂/∂a = 1, ∂/∂b = -trunc(a/b), computed as (rem(a, b) - a) / b.
struct rem {
  static constexpr bool integral = true;
  static constexpr std::string_view name = "rem";  // in the op table
  static constexpr int cost = 8;
  static constexpr std::string_view symbol = "rem";
  static constexpr int precedence = 0;
  template <class T>
  static T scalar(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return integer::rem(a, b);
    } else {
      return std::fmod(a, b);
    }
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return integer::lanes(a, b, [](auto x, auto y) { return scalar(x, y); });
  }
  template <class A, class C>
  static auto d_lhs(const A&, const C&);
  template <class A, class C>
  static auto d_rhs(const A& a, const C& b);
};

// max(a, b), NaN if either is NaN;  ∂/∂a = [a >= b], ∂/∂b = [a < b], where a NaN operand counts
// as the larger (the gradient goes to the NaN) and at a tie the whole gradient goes to a.
struct maximum {
  static constexpr bool integral = true;
  static constexpr std::string_view name = "maximum";  // in the op table
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "maximum";
  static constexpr int precedence = 0;
  template <class T>
  static T scalar(T a, T b) {
    return a >= b || is_nan(a) ? a : b;
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return xsimd::select((a >= b) | is_nan(a), a, b);
  }
  template <class A, class C>
  static auto d_lhs(const A& a, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C& b);
};

// min(a, b), NaN if either is NaN;  ∂/∂a = [a <= b], ∂/∂b = [a > b], where a NaN operand counts
// as the smaller (the gradient goes to the NaN) and at a tie the whole gradient goes to a.
struct minimum {
  static constexpr bool integral = true;
  static constexpr std::string_view name = "minimum";  // in the op table
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "minimum";
  static constexpr int precedence = 0;
  template <class T>
  static T scalar(T a, T b) {
    return a <= b || is_nan(a) ? a : b;
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return xsimd::select((a <= b) | is_nan(a), a, b);
  }
  template <class A, class C>
  static auto d_lhs(const A& a, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C& b);
};

// v where c != 0, else 0 (also where v is inf or NaN: a select, not a product);  ∂/∂c = 0,
// ∂/∂v = [c != 0]. Masks the points where a derivative formula is inf * 0 but the limit is 0
// (pow's rules, also complex).
struct where_nonzero {
  static constexpr bool integral = true;
  static constexpr bool complex = true;
  static constexpr std::string_view name = "where_nonzero";  // in the op table
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "where_nonzero";
  static constexpr int precedence = 0;
  template <class T>
  static T scalar(T c, T v) {
    return !(c == T(0)) ? v : T(0);
  }
  template <class B>
  static B batch(const B& c, const B& v) {
    using T = typename B::value_type;
    return xsimd::select(!(c == B(T(0))), v, B(T(0)));
  }
  template <class A, class C>
  static auto d_lhs(const A&, const C&) {
    return zero{};
  }
  template <class A, class C>
  static auto d_rhs(const A& c, const C& v);
};

// Iverson brackets [a >= b], [a < b], [a == b] with values 1 or 0 and derivative 0 (piecewise
// constant). They appear in the derivatives of maximum, minimum and max-reductions.
template <class Cmp>
struct indicator {
  static constexpr bool integral = true;
  static constexpr bool complex = [] {  // pow's rules (rules.hpp)
    if constexpr (requires { Cmp::complex; }) {
      return Cmp::complex;
    } else {
      return false;
    }
  }();
  static constexpr bool predicate = is_predicate<Cmp>();         // the IEEE comparisons of logical.hpp
  static constexpr std::string_view name = Cmp::indicator_name;  // in the op table
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = Cmp::symbol;
  static constexpr int precedence = -1;  // printed as [a op b]
  template <class T>
  static T scalar(T a, T b) {
    return Cmp{}(a, b) ? T(1) : T(0);
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    using T = typename B::value_type;
    return xsimd::select(Cmp{}(a, b), B(T(1)), B(T(0)));
  }
  template <class A, class C>
  static auto d_lhs(const A&, const C&) {
    return zero{};
  }
  template <class A, class C>
  static auto d_rhs(const A&, const C&) {
    return zero{};
  }
};
// The comparisons of the brackets. Those of maximum and minimum count a NaN operand as the winner
// (printed as the plain comparison): exactly one of [a >= b] and [a < b] is 1 for any a, b.
// "Differs" is written !(a == b), never with != (see is_nan).
struct greater_equal {  // a >= b, or a is NaN
  static constexpr std::string_view symbol = ">=";
  static constexpr std::string_view indicator_name = "indicator_ge";
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return (a >= b) | is_nan(a);
  }
};
struct less {  // not greater_equal: a < b, or b is NaN and a is not
  static constexpr std::string_view symbol = "<";
  static constexpr std::string_view indicator_name = "indicator_lt";
  static constexpr bool complex = true;  // of complex operands, their real parts (as PyTorch's pow rule)
  template <class V>
  auto operator()(const V& a, const V& b) const {
    if constexpr (requires { a.real(); }) {
      return (*this)(a.real(), b.real());
    } else {
      return !((a >= b) | is_nan(a));
    }
  }
};
struct less_equal {  // a <= b, or a is NaN
  static constexpr std::string_view symbol = "<=";
  static constexpr std::string_view indicator_name = "indicator_le";
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return (a <= b) | is_nan(a);
  }
};
struct greater {  // not less_equal
  static constexpr std::string_view symbol = ">";
  static constexpr std::string_view indicator_name = "indicator_gt";
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return !((a <= b) | is_nan(a));
  }
};
struct equal {  // a == b, or both are NaN (a max reduction's NaN result is "at" its NaN elements)
  static constexpr std::string_view symbol = "==";
  static constexpr std::string_view indicator_name = "indicator_eq";
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return (a == b) | (is_nan(a) & is_nan(b));
  }
};
struct not_equal {  // a != b (true when either is NaN)
  static constexpr std::string_view symbol = "!=";
  static constexpr std::string_view indicator_name = "indicator_ne";
  static constexpr bool complex = true;
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return !(a == b);
  }
};

}  // namespace tenferro::expr::ops
