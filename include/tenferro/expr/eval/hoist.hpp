// Hoisting loop-invariant subtrees out of the fused loop.
//
// A subtree that reads no array input (only scalar inputs, constants and reductions already
// computed) has one value for the whole pass: log(sigma) in the normal log-pdf, 1 / sum(...) in
// the gradient of log_sum_exp. Before a pass runs, every maximal such subtree is evaluated once
// and replaced by a `hoisted` leaf holding its value; a division by such a value becomes a
// multiplication by its reciprocal. The replacement keeps the subtree's reduction count, so the
// pre-order numbering of the reductions around it is unchanged.
#pragma once

#include <tenferro/expr/eval/kernel.hpp>
#include <tenferro/expr/nodes.hpp>
#include <tenferro/expr/ops/binary.hpp>

namespace tenferro::expr::detail {

// True when E reads no array leaf of Leaves.
template <class Leaves, class E>
constexpr bool uniform() {
  if constexpr (requires { E::index; }) {
    return !std::is_same_v<std::tuple_element_t<E::index, Leaves>,
                           array_leaf<typename std::tuple_element_t<E::index, Leaves>::value_type>>;
  } else if constexpr (requires(const E& e) { e.operand; }) {
    return uniform<Leaves, std::remove_cvref_t<decltype(std::declval<E>().operand)>>();
  } else if constexpr (requires(const E& e) { e.lhs; }) {
    return uniform<Leaves, std::remove_cvref_t<decltype(std::declval<E>().lhs)>>() &&
           uniform<Leaves, std::remove_cvref_t<decltype(std::declval<E>().rhs)>>();
  } else {
    return true;  // constants, numel, reductions (computed by earlier passes), hoisted values
  }
}

template <class E>
inline constexpr bool is_interior = requires(const E& e) {
  e.operand;
}
|| requires(const E& e) { e.lhs; }
|| requires(const E& e) { e.body; };

template <std::size_t Base, class T, class Leaves, class E>
auto hoist(const E& e, const element_context<T, Leaves>& ctx) {
  if constexpr (is_interior<E> && uniform<Leaves, E>()) {
    return hoisted<reduction_count<E>>{static_cast<double>(eval_element<Base, T>(e, ctx))};
  } else if constexpr (requires { e.operand; }) {
    auto operand = hoist<Base>(e.operand, ctx);
    return unary<typename E::op_type, decltype(operand)>(operand);
  } else if constexpr (requires { e.lhs; }) {
    using L = std::remove_cvref_t<decltype(e.lhs)>;
    using R = std::remove_cvref_t<decltype(e.rhs)>;
    auto lhs = hoist<Base>(e.lhs, ctx);
    if constexpr (std::is_same_v<typename E::op_type, ops::div> && is_interior<R> && uniform<Leaves, R>()) {
      const T divisor = eval_element<Base + reduction_count<L>, T>(e.rhs, ctx);
      return binary<ops::mul, decltype(lhs), hoisted<reduction_count<R>>>(
          lhs, hoisted<reduction_count<R>>{static_cast<double>(T(1) / divisor)});
    } else {
      auto rhs = hoist<Base + reduction_count<L>>(e.rhs, ctx);
      return binary<typename E::op_type, decltype(lhs), decltype(rhs)>(lhs, rhs);
    }
  } else {
    return e;
  }
}

}  // namespace tenferro::expr::detail
