// The run-time numbers of an expression (its `constant` leaves, in pre-order) and the expression
// rebuilt from them: its type fixes everything else. The eager runtime keeps an expression as
// (type, numbers), so the numbers are the attributes of its tape node (ad/op.hpp).
#pragma once

#include <tenferro/expr/nodes.hpp>

#include <array>
#include <cstddef>
#include <span>

namespace tenferro::expr {

// How many `constant` leaves E has.
template <class E>
inline constexpr std::size_t constant_count = 0;
template <>
inline constexpr std::size_t constant_count<constant> = 1;
template <class Op, class E>
inline constexpr std::size_t constant_count<unary<Op, E>> = constant_count<E>;
template <class Op, class L, class R>
inline constexpr std::size_t constant_count<binary<Op, L, R>> = constant_count<L> + constant_count<R>;
template <class Op, class E>
inline constexpr std::size_t constant_count<reduction<Op, E>> = constant_count<E>;

namespace detail {

template <class E>
constexpr void collect_constants(const E& e, double*& out) {
  if constexpr (std::is_same_v<E, constant>) {
    *out++ = e.value;
  } else if constexpr (requires { e.operand; }) {
    collect_constants(e.operand, out);
  } else if constexpr (requires { e.lhs; }) {
    collect_constants(e.lhs, out);
    collect_constants(e.rhs, out);
  } else if constexpr (requires { e.body; }) {
    collect_constants(e.body, out);
  }
}

template <class E>
constexpr E rebuild(const double*& in) {
  if constexpr (std::is_same_v<E, constant>) {
    return constant(*in++);
  } else if constexpr (requires(E e) { e.operand; }) {
    return E(rebuild<std::remove_cvref_t<decltype(E::operand)>>(in));
  } else if constexpr (requires(E e) { e.lhs; }) {
    auto lhs = rebuild<std::remove_cvref_t<decltype(E::lhs)>>(in);  // in order: left, then right
    auto rhs = rebuild<std::remove_cvref_t<decltype(E::rhs)>>(in);
    return E(std::move(lhs), std::move(rhs));
  } else if constexpr (requires(E e) { e.body; }) {
    return E(rebuild<std::remove_cvref_t<decltype(E::body)>>(in));
  } else {
    return E{};  // placeholders, zero, one, numel
  }
}

}  // namespace detail

// The numbers of e's constants, in pre-order.
template <class E>
constexpr std::array<double, constant_count<E>> constants_of(const E& e) {
  std::array<double, constant_count<E>> out{};
  double* p = out.data();
  detail::collect_constants(e, p);
  return out;
}

// The expression of type E whose constants are `numbers` (constants_of's order); numbers.size()
// must be constant_count<E>.
template <class E>
constexpr E with_constants(std::span<const double> numbers) {
  const double* p = numbers.data();
  return detail::rebuild<E>(p);
}

}  // namespace tenferro::expr
