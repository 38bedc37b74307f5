// Predicates: the comparisons of IEEE 754 (lt, le, gt, ge, eq, ne: false when an operand is NaN,
// except ne, which is then true) as Iverson brackets indicator<lt>, ..., and the logical ops,
// whose operands count as true when nonzero (NaN too). Their values are 1 or 0 in the compute type
// and their derivatives are 0. An op marked `predicate` gives a Bool result as an eager op
// (EagerTensor::lt, logical_and, ...); the brackets of binary.hpp (greater_equal, ...), which
// count a NaN operand as the winner, are for derivative rules only.
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/nodes.hpp>
#include <tenferro/expr/ops/binary.hpp>

#include <string_view>

namespace tenferro::expr::ops {

// xsimd's ordered comparisons are false when a lane is NaN, as IEEE's are; != is written !(==)
// (see is_nan).
#define TENFERRO_COMPARISON(NAME, SYMBOL, EXPR)               \
  struct NAME {                                               \
    static constexpr bool predicate = true;                   \
    static constexpr std::string_view symbol = SYMBOL;        \
    static constexpr std::string_view indicator_name = #NAME; \
    template <class V>                                        \
    auto operator()(const V& a, const V& b) const {           \
      return EXPR;                                            \
    }                                                         \
  };
TENFERRO_COMPARISON(lt, "<", a < b)
TENFERRO_COMPARISON(le, "<=", a <= b)
TENFERRO_COMPARISON(gt, ">", a > b)
TENFERRO_COMPARISON(ge, ">=", a >= b)
TENFERRO_COMPARISON(eq, "==", a == b)
TENFERRO_COMPARISON(ne, "!=", !(a == b))
#undef TENFERRO_COMPARISON

// v != 0 as 1 or 0 (NaN counts as nonzero).
template <class V>
V truth(const V& v) {
  using T = typename V::value_type;
  return xsimd::select(!(v == V(T(0))), V(T(1)), V(T(0)));
}
template <class T>
T truth_of(T v) {
  return !(v == T(0)) ? T(1) : T(0);
}

// A logical op: Rule::scalar on 1/0 truth values.
template <class Rule>
struct logical {
  static constexpr bool integral = true;
  static constexpr bool predicate = true;
  static constexpr std::string_view name = Rule::name;  // in the op table
  static constexpr int cost = 1;
  static constexpr std::string_view symbol = Rule::name;
  static constexpr int precedence = 0;
  template <class T>
  static T scalar(T a, T b) {
    return Rule::apply(truth_of(a), truth_of(b));
  }
  template <class B>
  static B batch(const B& a, const B& b) {
    return Rule::apply(truth(a), truth(b));
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
// On truth values 1 and 0: and = a * b, or = max(a, b) written a + b - a * b, xor = (a - b)^2.
struct and_rule {
  static constexpr std::string_view name = "logical_and";
  template <class V>
  static V apply(const V& a, const V& b) {
    return a * b;
  }
};
struct or_rule {
  static constexpr std::string_view name = "logical_or";
  template <class V>
  static V apply(const V& a, const V& b) {
    return a + b - a * b;
  }
};
struct xor_rule {
  static constexpr std::string_view name = "logical_xor";
  template <class V>
  static V apply(const V& a, const V& b) {
    return (a - b) * (a - b);
  }
};
using logical_and = logical<and_rule>;
using logical_or = logical<or_rule>;
using logical_xor = logical<xor_rule>;

// 1 where x is 0, else 0.
struct logical_not {
  static constexpr bool integral = true;
  static constexpr bool predicate = true;
  static constexpr std::string_view name = "logical_not";
  static constexpr int cost = 1;
  template <class T>
  static T scalar(T x) {
    return T(1) - truth_of(x);
  }
  template <class B>
  static B batch(const B& x) {
    using T = typename B::value_type;
    return B(T(1)) - truth(x);
  }
  template <class A>
  static auto derivative(const A&) {
    return zero{};
  }
};

}  // namespace tenferro::expr::ops
