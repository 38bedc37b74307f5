// to_string(e): readable infix text of an expression, for teaching and debugging.
// Placeholders print as x0, x1, ...; the element count of mean() as n; indicator functions as
// Iverson brackets [a >= b]. Example: derivative(sin(x) * y + exp(x * y), x) prints
// "cos(x0) * x1 + exp(x0 * x1) * x1".
#pragma once

#include <tenferro/expr/nodes.hpp>
#include <tenferro/expr/ops/binary.hpp>
#include <tenferro/expr/ops/reduce.hpp>
#include <tenferro/expr/ops/unary.hpp>

#include <cstdio>
#include <string>

namespace tenferro::expr {
namespace detail {

// Binding strength of a node's printed form (higher binds tighter).
template <class E>
inline constexpr int print_precedence = 10;  // leaves, calls, brackets
template <class E>
inline constexpr int print_precedence<unary<ops::neg, E>> = 5;
template <class Op, class L, class R>
inline constexpr int print_precedence<binary<Op, L, R>> = Op::precedence > 0 ? Op::precedence : 10;

inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

template <class E>
std::string text(const E& e);

template <class E>
std::string operand_text(const E& e, bool paren) {
  return paren ? "(" + text(e) + ")" : text(e);
}

template <class E>
std::string text(const E& e) {
  if constexpr (requires { E::index; }) {
    return "x" + std::to_string(E::index);
  } else if constexpr (std::is_same_v<E, constant>) {
    return number_text(e.value);
  } else if constexpr (std::is_same_v<E, zero>) {
    return "0";
  } else if constexpr (std::is_same_v<E, one>) {
    return "1";
  } else if constexpr (std::is_same_v<E, numel>) {
    return "n";
  } else if constexpr (requires { e.operand; }) {
    using Op = typename E::op_type;
    if constexpr (std::is_same_v<Op, ops::neg>) {
      return "-" + operand_text(e.operand, print_precedence<std::remove_cvref_t<decltype(e.operand)>> < 10);
    } else {
      return std::string(Op::name) + "(" + text(e.operand) + ")";
    }
  } else if constexpr (requires { e.lhs; }) {
    using Op = typename E::op_type;
    using L = std::remove_cvref_t<decltype(e.lhs)>;
    using R = std::remove_cvref_t<decltype(e.rhs)>;
    if constexpr (Op::precedence > 0) {
      constexpr int p = Op::precedence;
      // a - (b + c), a / (b * c): the right operand of - and / needs parentheses at equal
      // precedence; a negated operand always gets them, a * (-b).
      constexpr bool non_commutative = std::is_same_v<Op, ops::sub> || std::is_same_v<Op, ops::div>;
      const bool lhs_paren = print_precedence<L> < p;
      const bool rhs_paren = print_precedence<R> < p || (non_commutative && print_precedence<R> == p) ||
                             print_precedence<R> == 5;
      return operand_text(e.lhs, lhs_paren) + " " + std::string(Op::symbol) + " " + operand_text(e.rhs, rhs_paren);
    } else if constexpr (Op::precedence < 0) {
      return "[" + text(e.lhs) + " " + std::string(Op::symbol) + " " + text(e.rhs) + "]";
    } else {
      return std::string(Op::symbol) + "(" + text(e.lhs) + ", " + text(e.rhs) + ")";
    }
  } else {
    using Op = typename E::op_type;
    return std::string(Op::name) + "(" + text(e.body) + ")";
  }
}

}  // namespace detail

template <Expression E>
std::string to_string(const E& e) {
  return detail::text(e);
}

}  // namespace tenferro::expr
