// Sharing subexpressions inside one fused loop.
//
// The value and the gradient expressions of one pass repeat subtrees: in
// sum(sin(x) * y + exp(x * y)) the value and both gradients contain exp(x * y), and sin(x)
// appears twice. The compiler does not merge them (it cannot see through the stores to the
// outputs), so a pass finds, at compile time, every subtree type that is worth computing once
// (its op costs at least `shared_cost`) and occurs more than once among the trees it evaluates;
// each batch then computes those first, smallest first, and every occurrence reads the result.
//
// Two subtrees of the same type differ only in their constants (exp(2 * x) and exp(3 * x)), so
// at the start of a pass every occurrence is compared with the first one; when any differs, the
// pass runs without sharing.
#pragma once

#include <tenferro/expr/nodes.hpp>

#include <boost/hana/bool.hpp>
#include <boost/hana/concat.hpp>
#include <boost/hana/count.hpp>
#include <boost/hana/equal.hpp>
#include <boost/hana/filter.hpp>
#include <boost/hana/flatten.hpp>
#include <boost/hana/index_if.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/optional.hpp>
#include <boost/hana/prepend.hpp>
#include <boost/hana/set.hpp>
#include <boost/hana/sort.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <cstddef>
#include <tuple>

namespace tenferro::expr::detail {

namespace hana = boost::hana;

inline constexpr int shared_cost = 4;

// Every subtree one step evaluates, pre-order (a reduction inside is read, not entered).
template <class E>
constexpr auto subtree_types() {
  if constexpr (requires(const E& e) { e.operand; }) {
    return hana::prepend(subtree_types<std::remove_cvref_t<decltype(std::declval<E>().operand)>>(),
                         hana::type_c<E>);
  } else if constexpr (requires(const E& e) { e.lhs; }) {
    return hana::prepend(hana::concat(subtree_types<std::remove_cvref_t<decltype(std::declval<E>().lhs)>>(),
                                      subtree_types<std::remove_cvref_t<decltype(std::declval<E>().rhs)>>()),
                         hana::type_c<E>);
  } else {
    return hana::make_tuple(hana::type_c<E>);
  }
}

template <class E>
constexpr bool worth_sharing() {
  if constexpr (
      requires(const E& e) { e.operand; } || requires(const E& e) { e.lhs; }) {
    return E::op_type::cost >= shared_cost;
  } else {
    return false;
  }
}

// The shared subtree types of a step over Trees, as a hana tuple of types, smallest first (so a
// shared subtree inside another is ready before it).
template <class... Trees>
constexpr auto shared_subtrees() {
  constexpr auto all = hana::flatten(hana::make_tuple(subtree_types<Trees>()...));
  constexpr auto repeated = hana::filter(all, [](auto t) {
    using S = typename decltype(t)::type;
    return hana::bool_c < worth_sharing<S>() && (decltype(hana::count(all, t))::value >= 2) > ;
  });
  return hana::sort(hana::to_tuple(hana::to_set(repeated)), [](auto a, auto b) {
    return hana::bool_c<(node_count<typename decltype(a)::type> < node_count<typename decltype(b)::type>)>;
  });
}

inline constexpr std::size_t not_shared = static_cast<std::size_t>(-1);

// Position of E among the shared types, or not_shared.
template <class Shared, class E>
constexpr std::size_t shared_index() {
  constexpr auto found = hana::index_if(Shared{}, hana::equal.to(hana::type_c<E>));
  if constexpr (decltype(hana::is_just(found))::value) {
    return std::remove_cvref_t<decltype(found.value())>::value;
  } else {
    return not_shared;
  }
}

// One occurrence of S, with the number of its first reduction.
template <std::size_t Base, class S>
struct occurrence {
  static constexpr std::size_t base = Base;
  const S* node;
};

// Every occurrence of S in e (whose first reduction is number Base), pre-order.
template <class S, std::size_t Base, class E>
auto occurrences(const E& e) {
  auto self = [&] {
    if constexpr (std::is_same_v<S, E>) {
      return std::tuple<occurrence<Base, S>>{{&e}};
    } else {
      return std::tuple<>{};
    }
  }();
  if constexpr (requires { e.operand; }) {
    return std::tuple_cat(self, occurrences<S, Base>(e.operand));
  } else if constexpr (requires { e.lhs; }) {
    using L = std::remove_cvref_t<decltype(e.lhs)>;
    return std::tuple_cat(self, occurrences<S, Base>(e.lhs),
                          occurrences<S, Base + reduction_count<L>>(e.rhs));
  } else {
    return self;
  }
}

}  // namespace tenferro::expr::detail
