// Elementwise binary ops. Each op is a small struct:
//   cost                  rough price of one evaluation in multiplies
//   symbol, precedence    infix printing (precedence 0: printed as a call `name(a, b)`)
//   scalar(a, b)          value of one element
//   batch(a, b)           value of an xsimd batch
//   d_lhs(a, b), d_rhs(a, b)   the partial derivatives ∂f/∂a and ∂f/∂b as expressions
// Reverse rule of binary<Op, A, B>:  vjp(a, c * d_lhs(a, b)) + vjp(b, c * d_rhs(a, b)).
// Forward rule:  tangent = d_lhs(a, b) * tangent(a) + d_rhs(a, b) * tangent(b).
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/nodes.hpp>

#include <cmath>
#include <string_view>

namespace tenferro::expr::ops {

// a + b;  ∂/∂a = 1, ∂/∂b = 1
struct add {
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "+";
  static constexpr int precedence = 1;
  template <class T>
  static T scalar(T a, T b) {
    return a + b;
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
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "-";
  static constexpr int precedence = 1;
  template <class T>
  static T scalar(T a, T b) {
    return a - b;
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
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "*";
  static constexpr int precedence = 2;
  template <class T>
  static T scalar(T a, T b) {
    return a * b;
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return a * b;
  }
  template <class A, class C>
  static auto d_lhs(const A&, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C&);
};

// a / b;  ∂/∂a = 1/b, ∂/∂b = -(a/b)/b;  b = 0 gives inf/NaN as IEEE does
struct div {
  static constexpr int cost = 4;
  static constexpr std::string_view symbol = "/";
  static constexpr int precedence = 2;
  template <class T>
  static T scalar(T a, T b) {
    return a / b;
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return a / b;
  }
  template <class A, class C>
  static auto d_lhs(const A&, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C& b);
};

// a^b;  ∂/∂a = b a^(b-1), ∂/∂b = a^b ln a.  Domain: a > 0 for a real exponent; with a constant
// exponent (pow(e, 2.5)) only ∂/∂a is ever built, so a may be any value where a^b is real.
struct pow {
  static constexpr int cost = 25;
  static constexpr std::string_view symbol = "pow";
  static constexpr int precedence = 0;
  template <class T>
  static T scalar(T a, T b) {
    return std::pow(a, b);
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return xsimd::pow(a, b);
  }
  template <class A, class C>
  static auto d_lhs(const A& a, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C& b);
};

// max(a, b);  ∂/∂a = [a >= b], ∂/∂b = [a < b]: at a tie the whole gradient goes to a.
struct maximum {
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "maximum";
  static constexpr int precedence = 0;
  template <class T>
  static T scalar(T a, T b) {
    return a >= b ? a : b;
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return xsimd::select(a >= b, a, b);
  }
  template <class A, class C>
  static auto d_lhs(const A& a, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C& b);
};

// min(a, b);  ∂/∂a = [a <= b], ∂/∂b = [a > b]: at a tie the whole gradient goes to a.
struct minimum {
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = "minimum";
  static constexpr int precedence = 0;
  template <class T>
  static T scalar(T a, T b) {
    return a <= b ? a : b;
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return xsimd::select(a <= b, a, b);
  }
  template <class A, class C>
  static auto d_lhs(const A& a, const C& b);
  template <class A, class C>
  static auto d_rhs(const A& a, const C& b);
};

// Iverson brackets [a >= b], [a < b], [a == b] with values 1 or 0 and derivative 0 (piecewise
// constant). They appear in the derivatives of maximum, minimum and max-reductions.
template <class Cmp>
struct indicator {
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
struct greater_equal {
  static constexpr std::string_view symbol = ">=";
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a >= b;
  }
};
struct less {
  static constexpr std::string_view symbol = "<";
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a < b;
  }
};
struct less_equal {
  static constexpr std::string_view symbol = "<=";
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a <= b;
  }
};
struct greater {
  static constexpr std::string_view symbol = ">";
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a > b;
  }
};
struct equal {
  static constexpr std::string_view symbol = "==";
  template <class V>
  auto operator()(const V& a, const V& b) const {
    return a == b;
  }
};

}  // namespace tenferro::expr::ops
