// The node types of the compile-time layer and their structural traits. Nodes hold operands and
// an op type, nothing else: evaluation lives in eval/ (STYLE: "what" apart from "how").
#pragma once

#include <tenferro/expr/fwd.hpp>

#include <algorithm>
#include <cstddef>

namespace tenferro::expr {

template <std::size_t I>
struct arg {
  static constexpr std::size_t index = I;
};

struct constant {
  double value = 0.0;
  constexpr constant() = default;
  constexpr explicit constant(double v) : value(v) {}
};

struct zero {};
struct one {};
struct numel {};

template <class Op, class E>
struct unary {
  using op_type = Op;
  [[no_unique_address]] E operand;
  constexpr explicit unary(E e) : operand(std::move(e)) {}
};

template <class Op, class L, class R>
struct binary {
  using op_type = Op;
  [[no_unique_address]] L lhs;
  [[no_unique_address]] R rhs;
  constexpr binary(L l, R r) : lhs(std::move(l)), rhs(std::move(r)) {}
};

template <class Op, class E>
struct reduction {
  using op_type = Op;
  [[no_unique_address]] E body;
  constexpr explicit reduction(E e) : body(std::move(e)) {}
};

// A value computed once before a loop in place of a subtree with K reductions (eval/hoist.hpp).
// Internal to evaluation: never built by users.
template <std::size_t K>
struct hoisted {
  double value = 0.0;
};

// ---- structural traits -----------------------------------------------------------------------

// Number of reduction nodes in the tree (pre-order numbering gives each an id).
template <class E>
inline constexpr std::size_t reduction_count = 0;
template <class Op, class E>
inline constexpr std::size_t reduction_count<unary<Op, E>> = reduction_count<E>;
template <class Op, class L, class R>
inline constexpr std::size_t reduction_count<binary<Op, L, R>> = reduction_count<L> + reduction_count<R>;
template <class Op, class E>
inline constexpr std::size_t reduction_count<reduction<Op, E>> = 1 + reduction_count<E>;
template <std::size_t K>
inline constexpr std::size_t reduction_count<hoisted<K>> = K;

// Reduction depth: 0 for a tree without reductions; a reduction is one more than its body. The
// evaluator runs one pass over the data per level.
template <class E>
inline constexpr std::size_t level = 0;
template <class Op, class E>
inline constexpr std::size_t level<unary<Op, E>> = level<E>;
template <class Op, class L, class R>
inline constexpr std::size_t level<binary<Op, L, R>> = std::max(level<L>, level<R>);
template <class Op, class E>
inline constexpr std::size_t level<reduction<Op, E>> = 1 + level<E>;

// True when the value is one number: no placeholder outside a reduction.
template <class E>
inline constexpr bool is_scalar = true;
template <std::size_t I>
inline constexpr bool is_scalar<arg<I>> = false;
template <class Op, class E>
inline constexpr bool is_scalar<unary<Op, E>> = is_scalar<E>;
template <class Op, class L, class R>
inline constexpr bool is_scalar<binary<Op, L, R>> = is_scalar<L>&& is_scalar<R>;
template <class Op, class E>
inline constexpr bool is_scalar<reduction<Op, E>> = true;

// One more than the largest placeholder index used (0 when none is).
template <class E>
inline constexpr std::size_t arity = 0;
template <std::size_t I>
inline constexpr std::size_t arity<arg<I>> = I + 1;
template <class Op, class E>
inline constexpr std::size_t arity<unary<Op, E>> = arity<E>;
template <class Op, class L, class R>
inline constexpr std::size_t arity<binary<Op, L, R>> = std::max(arity<L>, arity<R>);
template <class Op, class E>
inline constexpr std::size_t arity<reduction<Op, E>> = arity<E>;

// Number of nodes, for reports and compile-time budgets.
template <class E>
inline constexpr std::size_t node_count = 1;
template <class Op, class E>
inline constexpr std::size_t node_count<unary<Op, E>> = 1 + node_count<E>;
template <class Op, class L, class R>
inline constexpr std::size_t node_count<binary<Op, L, R>> = 1 + node_count<L> + node_count<R>;
template <class Op, class E>
inline constexpr std::size_t node_count<reduction<Op, E>> = 1 + node_count<E>;

// Structural equality of two nodes of the same type: their constants are equal. (Placeholders,
// ops and compile-time constants are part of the type.) Used to share one reduction between the
// value and the gradient expressions that both contain it.
template <class E>
constexpr bool same_values(const E&, const E&) noexcept {
  return true;
}
constexpr bool same_values(const constant& a, const constant& b) noexcept { return a.value == b.value; }
template <std::size_t K>
constexpr bool same_values(const hoisted<K>& a, const hoisted<K>& b) noexcept {
  return a.value == b.value;
}
template <class Op, class E>
constexpr bool same_values(const unary<Op, E>& a, const unary<Op, E>& b) noexcept {
  return same_values(a.operand, b.operand);
}
template <class Op, class L, class R>
constexpr bool same_values(const binary<Op, L, R>& a, const binary<Op, L, R>& b) noexcept {
  return same_values(a.lhs, b.lhs) && same_values(a.rhs, b.rhs);
}
template <class Op, class E>
constexpr bool same_values(const reduction<Op, E>& a, const reduction<Op, E>& b) noexcept {
  return same_values(a.body, b.body);
}

// Whether two nodes of type E can differ in value (E holds a constant or a hoisted value): only
// then does same_values need a run-time look.
template <class E>
inline constexpr bool holds_values = false;
template <>
inline constexpr bool holds_values<constant> = true;
template <std::size_t K>
inline constexpr bool holds_values<hoisted<K>> = true;
template <class Op, class E>
inline constexpr bool holds_values<unary<Op, E>> = holds_values<E>;
template <class Op, class L, class R>
inline constexpr bool holds_values<binary<Op, L, R>> = holds_values<L> || holds_values<R>;
template <class Op, class E>
inline constexpr bool holds_values<reduction<Op, E>> = holds_values<E>;

}  // namespace tenferro::expr
