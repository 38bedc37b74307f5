// Building expressions: placeholders, operators, named functions and reductions. Builders fold
// the compile-time constants zero and one (0 * e = 0, 1 * e = e, e + 0 = e, ...), which is the
// whole of the simplification derivatives need: it happens as types are formed, at compile time.
#pragma once

#include <tenferro/expr/nodes.hpp>
#include <tenferro/expr/ops/binary.hpp>
#include <tenferro/expr/ops/logical.hpp>
#include <tenferro/expr/ops/reduce.hpp>
#include <tenferro/expr/ops/unary.hpp>

#include <tuple>
#include <utility>

namespace tenferro::expr {

// placeholders<N>() → arg<0>{}, ..., arg<N-1>{}:  auto [x, y] = placeholders<2>();
template <std::size_t N>
constexpr auto placeholders() {
  return []<std::size_t... I>(std::index_sequence<I...>) { return std::tuple<arg<I>...>{}; }
  (std::make_index_sequence<N>{});
}

namespace detail {

template <class T, class Op>
inline constexpr bool is_unary_of = false;
template <class Op, class E>
inline constexpr bool is_unary_of<unary<Op, E>, Op> = true;

template <class T>
inline constexpr bool is_scaled = false;  // c * e with a run-time constant c
template <class E>
inline constexpr bool is_scaled<binary<ops::mul, constant, E>> = true;

template <class E>
constexpr auto make_neg(E e) {
  if constexpr (std::is_same_v<E, zero>) {
    return zero{};
  } else if constexpr (std::is_same_v<E, constant>) {
    return constant(-e.value);
  } else if constexpr (is_scaled<E>) {
    return binary<ops::mul, constant, decltype(e.rhs)>(constant(-e.lhs.value), e.rhs);
  } else if constexpr (is_unary_of<E, ops::neg>) {
    return e.operand;
  } else {
    return unary<ops::neg, E>(std::move(e));
  }
}

template <class L, class R>
constexpr auto make_add(L l, R r) {
  if constexpr (std::is_same_v<L, zero>) {
    return r;
  } else if constexpr (std::is_same_v<R, zero>) {
    return l;
  } else {
    return binary<ops::add, L, R>(std::move(l), std::move(r));
  }
}

template <class L, class R>
constexpr auto make_sub(L l, R r) {
  if constexpr (std::is_same_v<R, zero>) {
    return l;
  } else if constexpr (std::is_same_v<L, zero>) {
    return make_neg(std::move(r));
  } else {
    return binary<ops::sub, L, R>(std::move(l), std::move(r));
  }
}

// Products keep run-time constants in front and folded: c1 * (c2 * e) = (c1 c2) * e, e * c = c * e,
// (c * a) * b = c * (a * b). So the derivative of -0.5 * square(u) is -1 * u, not
// 2 * u * -0.5: fewer multiplies in every gradient loop.
template <class L, class R>
constexpr auto make_mul(L l, R r) {
  if constexpr (std::is_same_v<L, zero> || std::is_same_v<R, zero>) {
    return zero{};
  } else if constexpr (std::is_same_v<L, one>) {
    return r;
  } else if constexpr (std::is_same_v<R, one>) {
    return l;
  } else if constexpr (std::is_same_v<L, unary<ops::neg, one>>) {
    return make_neg(std::move(r));
  } else if constexpr (std::is_same_v<R, unary<ops::neg, one>>) {
    return make_neg(std::move(l));
  } else if constexpr (std::is_same_v<L, constant> && std::is_same_v<R, constant>) {
    return constant(l.value * r.value);
  } else if constexpr (std::is_same_v<R, constant>) {
    return make_mul(r, std::move(l));
  } else if constexpr (std::is_same_v<L, constant> && is_scaled<R>) {
    return make_mul(constant(l.value * r.lhs.value), r.rhs);
  } else if constexpr (is_scaled<L>) {
    return make_mul(l.lhs, make_mul(l.rhs, std::move(r)));
  } else if constexpr (is_scaled<R>) {
    return make_mul(r.lhs, make_mul(std::move(l), r.rhs));
  } else {
    return binary<ops::mul, L, R>(std::move(l), std::move(r));
  }
}

template <class L, class R>
constexpr auto make_div(L l, R r) {
  if constexpr (std::is_same_v<L, zero>) {
    return zero{};
  } else if constexpr (std::is_same_v<R, one>) {
    return l;
  } else {
    return binary<ops::div, L, R>(std::move(l), std::move(r));
  }
}

template <class Op, class E>
constexpr auto make_reduction(E e) {
  if constexpr (std::is_same_v<E, zero> && std::is_same_v<Op, ops::sum>) {
    return zero{};
  } else {
    return reduction<Op, E>(std::move(e));
  }
}

// An operand of an operator: an expression as it is, an arithmetic value as a constant.
template <class E>
constexpr auto as_node(E&& e) {
  if constexpr (Expression<E>) {
    return std::remove_cvref_t<E>(std::forward<E>(e));
  } else {
    return constant(static_cast<double>(e));
  }
}

// binary<Op, ...> of two operands, each an expression or an arithmetic value.
template <class Op, class L, class R>
constexpr auto binary_of(L&& l, R&& r) {
  return binary<Op, decltype(as_node(std::forward<L>(l))), decltype(as_node(std::forward<R>(r)))>(
      as_node(std::forward<L>(l)), as_node(std::forward<R>(r)));
}

}  // namespace detail

// Operands of binary operators and functions: two expressions, or an expression and a scalar.
template <class L, class R>
concept Operands = (Expression<L> && (Expression<R> || Scalar<R>)) || (Scalar<L> && Expression<R>);

// An operand that is neither an expression nor an arithmetic value (a string, a pointer, an
// xtensor array, ...) next to an expression: one readable error instead of a list of overloads.
template <class T>
inline constexpr bool always_false = false;
template <class L, class R>
concept MisusedOperands = (Expression<L> && !Expression<R> && !Scalar<R>) ||
                          (Expression<R> && !Expression<L> && !Scalar<L>);
template <class L, class R>
requires MisusedOperands<L, R>
void operator+(L&&, R&&) {
  static_assert(always_false<L>, "tenferro::expr: an operand must be an expression or an arithmetic scalar");
}
template <class L, class R>
requires MisusedOperands<L, R>
void operator-(L&&, R&&) {
  static_assert(always_false<L>, "tenferro::expr: an operand must be an expression or an arithmetic scalar");
}
template <class L, class R>
requires MisusedOperands<L, R>
void operator*(L&&, R&&) {
  static_assert(always_false<L>, "tenferro::expr: an operand must be an expression or an arithmetic scalar");
}
template <class L, class R>
requires MisusedOperands<L, R>
void operator/(L&&, R&&) {
  static_assert(always_false<L>, "tenferro::expr: an operand must be an expression or an arithmetic scalar");
}

template <Expression E>
constexpr auto operator-(E&& e) {
  return unary<ops::neg, std::remove_cvref_t<E>>(std::forward<E>(e));
}
template <class L, class R>
requires Operands<L, R>
constexpr auto operator+(L&& l, R&& r) {
  return detail::binary_of<ops::add>(std::forward<L>(l), std::forward<R>(r));
}
template <class L, class R>
requires Operands<L, R>
constexpr auto operator-(L&& l, R&& r) {
  return detail::binary_of<ops::sub>(std::forward<L>(l), std::forward<R>(r));
}
template <class L, class R>
requires Operands<L, R>
constexpr auto operator*(L&& l, R&& r) {
  return detail::binary_of<ops::mul>(std::forward<L>(l), std::forward<R>(r));
}
template <class L, class R>
requires Operands<L, R>
constexpr auto operator/(L&& l, R&& r) {
  return detail::binary_of<ops::div>(std::forward<L>(l), std::forward<R>(r));
}

// Elementwise functions (the math and the derivative of each is documented on its op in ops/).
template <Expression E>
constexpr auto exp(E e) {
  return unary<ops::exp, E>(std::move(e));
}
template <Expression E>
constexpr auto log(E e) {
  return unary<ops::log, E>(std::move(e));
}
template <Expression E>
constexpr auto sqrt(E e) {
  return unary<ops::sqrt, E>(std::move(e));
}
template <Expression E>
constexpr auto rsqrt(E e) {
  return unary<ops::rsqrt, E>(std::move(e));
}
template <Expression E>
constexpr auto sin(E e) {
  return unary<ops::sin, E>(std::move(e));
}
template <Expression E>
constexpr auto cos(E e) {
  return unary<ops::cos, E>(std::move(e));
}
template <Expression E>
constexpr auto tan(E e) {
  return unary<ops::tan, E>(std::move(e));
}
template <Expression E>
constexpr auto tanh(E e) {
  return unary<ops::tanh, E>(std::move(e));
}
template <Expression E>
constexpr auto sinh(E e) {
  return unary<ops::sinh, E>(std::move(e));
}
template <Expression E>
constexpr auto cosh(E e) {
  return unary<ops::cosh, E>(std::move(e));
}
template <Expression E>
constexpr auto abs(E e) {
  return unary<ops::abs, E>(std::move(e));
}
template <Expression E>
constexpr auto sign(E e) {
  return unary<ops::sign, E>(std::move(e));
}
template <Expression E>
constexpr auto square(E e) {
  return unary<ops::square, E>(std::move(e));
}
template <Expression E>
constexpr auto log1p(E e) {
  return unary<ops::log1p, E>(std::move(e));
}
template <Expression E>
constexpr auto expm1(E e) {
  return unary<ops::expm1, E>(std::move(e));
}
template <Expression E>
constexpr auto sigmoid(E e) {
  return unary<ops::sigmoid, E>(std::move(e));
}
template <Expression E>
constexpr auto stop_gradient(E e) {
  return unary<ops::stop_gradient, E>(std::move(e));
}

template <class L, class R>
requires Operands<L, R>
constexpr auto pow(L&& base, R&& exponent) {
  return detail::binary_of<ops::pow>(std::forward<L>(base), std::forward<R>(exponent));
}
// The remainder of truncating division (fmod; % for integers), with the dividend's sign.
template <class L, class R>
requires Operands<L, R>
constexpr auto rem(L&& a, R&& b) {
  return detail::binary_of<ops::rem>(std::forward<L>(a), std::forward<R>(b));
}
template <class L, class R>
requires Operands<L, R>
constexpr auto maximum(L&& a, R&& b) {
  return detail::binary_of<ops::maximum>(std::forward<L>(a), std::forward<R>(b));
}
template <class L, class R>
requires Operands<L, R>
constexpr auto minimum(L&& a, R&& b) {
  return detail::binary_of<ops::minimum>(std::forward<L>(a), std::forward<R>(b));
}

// Reductions to a scalar, usable anywhere as scalar subexpressions (log(sum(exp(x))) is one
// expression). Each reduces over every element of the evaluation's broadcast shape.

// sum(e) = Σ e_i (0 when empty)
template <Expression E>
constexpr auto sum(E e) {
  return reduction<ops::sum, E>(std::move(e));
}
// max(e) = max e_i: NaN when some e_i is NaN, -inf when empty (the identity). Gradient: the
// cotangent split evenly over the maximal elements (over the NaN elements when it is NaN).
template <Expression E>
constexpr auto max(E e) {
  return reduction<ops::max, E>(std::move(e));
}
// min(e) = -max(-e): NaN when some e_i is NaN, +inf when empty.
template <Expression E>
constexpr auto min(E e) {
  return -max(-std::move(e));
}
// mean(e) = sum(e) / n, n the element count (NaN when empty)
template <Expression E>
constexpr auto mean(E e) {
  return sum(std::move(e)) / numel{};
}
// dot(a, b) = Σ a_i b_i
template <class L, class R>
requires Operands<L, R>
constexpr auto dot(L&& a, R&& b) { return sum(std::forward<L>(a) * std::forward<R>(b)); }
// log_sum_exp(e) = log Σ exp(e_i), computed as m + log Σ exp(e_i - m) with m = max e_i, so it
// neither overflows nor underflows. The shift m is a stop_gradient: its exact derivative
// contribution is 0. Gradient: softmax(e). -inf when empty.
template <Expression E>
constexpr auto log_sum_exp(E e) {
  auto m = stop_gradient(reduction<ops::max, E>(e));
  return log(sum(exp(e - m))) + m;
}

}  // namespace tenferro::expr
