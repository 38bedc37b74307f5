// Sharing subexpressions inside one fused loop.
//
// The value and the gradient expressions of one pass repeat subtrees: in
// sum(sin(x) * y + exp(x * y)) the value and both gradients contain exp(x * y), and sin(x)
// appears twice. The compiler does not merge them, so a pass finds, at compile time, every
// subtree type that is worth computing once (its op costs at least `shared_cost`) and occurs more
// than once among the trees it evaluates; each batch computes those first, smallest first, and
// every occurrence reads the result.
//
// Two subtrees of the same type differ only in their constants (exp(2 * x) and exp(3 * x)), so
// at the start of a pass every occurrence is compared with the first one; when any differs, the
// pass shares only the subtrees that hold no constants (their occurrences cannot differ).
//
// The two halves of a pair (an op's `paired_with` trait: sin(a) and cos(a) of the same argument)
// are both shared, even when each occurs once, and come out of one math::sincos (math.hpp), which
// costs the same as either of them.
//
// The type-level work uses plain parameter packs and constexpr arrays: measured against a
// Boost.Hana version (tuple of types, filter, count, to_set, sort), it instantiates in a fifth
// of the time, which matters in every translation unit that takes a gradient.
#pragma once

#include <tenferro/expr/nodes.hpp>
#include <tenferro/expr/ops/unary.hpp>

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tenferro::expr::detail {

inline constexpr int shared_cost = 4;

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

template <class... Lists>
struct concat_lists;
template <>
struct concat_lists<> {
  using type = type_list<>;
};
template <class... A>
struct concat_lists<type_list<A...>> {
  using type = type_list<A...>;
};
template <class... A, class... B, class... Rest>
struct concat_lists<type_list<A...>, type_list<B...>, Rest...> {
  using type = typename concat_lists<type_list<A..., B...>, Rest...>::type;
};

template <class E>
constexpr bool worth_sharing() {
  if constexpr (
      requires(const E& e) { e.operand; } || requires(const E& e) { e.lhs; }) {
    return E::op_type::cost >= shared_cost;
  } else {
    return false;
  }
}

// The subtrees one step evaluates that are worth sharing, pre-order (a reduction inside is read,
// not entered). Only these are compared with each other, so the quadratic search of shared_of
// runs over the costly nodes alone, not every leaf and addition.
template <class E>
using candidate = std::conditional_t<worth_sharing<E>(), type_list<E>, type_list<>>;
template <class E>
struct subtrees {
  using type = type_list<>;
};
template <class Op, class A>
struct subtrees<unary<Op, A>> {
  using type = typename concat_lists<candidate<unary<Op, A>>, typename subtrees<A>::type>::type;
};
template <class Op, class L, class R>
struct subtrees<binary<Op, L, R>> {
  using type = typename concat_lists<candidate<binary<Op, L, R>>, typename subtrees<L>::type,
                                     typename subtrees<R>::type>::type;
};

// The other half of a pair computed together (an op's `paired_with`: cos(a) for sin(a) and the
// reverse); void for anything else.
template <class E>
struct pair_partner {
  using type = void;
};
template <class Op, class A>
requires requires { typename Op::paired_with; }
struct pair_partner<unary<Op, A>> {
  using type = unary<typename Op::paired_with, A>;
};

// Which half of its pair a node is (its op's pair_slot: 0 computes both, with pair_batch), or -1.
template <class E>
inline constexpr int pair_slot_of = -1;
template <class Op, class A>
requires requires { typename Op::paired_with; }
inline constexpr int pair_slot_of<unary<Op, A>> = Op::pair_slot;

template <class List>
struct shared_of;
template <class... Ts>
struct shared_of<type_list<Ts...>> {
  static constexpr std::size_t n = sizeof...(Ts);
  // keep[i]: Ts[i] is worth sharing, occurs at least twice, and this is its first occurrence.
  static constexpr auto keep = [] {
    std::array<bool, n> k{};
    [[maybe_unused]] std::size_t i = 0;  // unused when Ts is empty
    (
        [&]<class S>(std::type_identity<S>) {
          const std::size_t count = (std::size_t(std::is_same_v<S, Ts>) + ... + 0);
          std::size_t first = 0, j = 0;
          bool found = false;
          ((found = found || (std::is_same_v<S, Ts> ? (first = j, true) : (++j, false))), ...);
          using P = typename pair_partner<S>::type;
          const bool paired = !std::is_void_v<P> && (std::is_same_v<P, Ts> || ...);
          k[i] = (count >= 2 || paired) && first == i;
          ++i;
        }(std::type_identity<Ts>{}),
        ...);
    return k;
  }();
  static constexpr std::size_t m = [] {
    std::size_t c = 0;
    for (bool b : keep) c += b;
    return c;
  }();
  // The kept positions ordered by node count (a shared subtree inside another comes first).
  static constexpr auto order = [] {
    constexpr std::array<std::size_t, n> sizes{node_count<Ts>...};
    std::array<std::size_t, m> o{};
    std::size_t c = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (keep[i]) o[c++] = i;
    }
    for (std::size_t a = 1; a < m; ++a) {  // insertion sort: stable, m is small
      for (std::size_t b = a; b > 0 && sizes[o[b]] < sizes[o[b - 1]]; --b) std::swap(o[b], o[b - 1]);
    }
    return o;
  }();
  using type = decltype([]<std::size_t... K>(std::index_sequence<K...>) {
    return type_list<std::tuple_element_t<order[K], std::tuple<Ts...>>...>{};
  }(std::make_index_sequence<m>{}));
};

// The shared subtree types of a step over Trees, smallest first.
template <class... Trees>
using shared_subtrees_t =
    typename shared_of<typename concat_lists<typename subtrees<Trees>::type...>::type>::type;

inline constexpr std::size_t not_shared = static_cast<std::size_t>(-1);

// Position of E among the shared types, or not_shared.
template <class Shared, class E>
inline constexpr std::size_t shared_index = not_shared;
template <class... S, class E>
inline constexpr std::size_t shared_index<type_list<S...>, E> = [] {
  std::size_t k = 0, found = not_shared;
  ((found = (found == not_shared && std::is_same_v<S, E>) ? k : found, ++k), ...);
  return found;
}();

// True when S occurs in E (not looking inside reductions).
template <class S, class E>
inline constexpr bool contains = std::is_same_v<S, E>;
template <class S, class Op, class A>
inline constexpr bool contains<S, unary<Op, A>> = std::is_same_v<S, unary<Op, A>> || contains<S, A>;
template <class S, class Op, class L, class R>
inline constexpr bool contains<S, binary<Op, L, R>> =
    std::is_same_v<S, binary<Op, L, R>> || contains<S, L> || contains<S, R>;

// One occurrence of S, with the number of its first reduction.
template <std::size_t Base, class S>
struct occurrence {
  static constexpr std::size_t base = Base;
  const S* node;
};

// The first occurrence of S in e (pre-order), which must contain it.
template <class S, std::size_t Base, class E>
auto first_occurrence(const E& e) {
  if constexpr (std::is_same_v<S, E>) {
    return occurrence<Base, S>{&e};
  } else if constexpr (requires { e.operand; }) {
    return first_occurrence<S, Base>(e.operand);
  } else {
    using L = std::remove_cvref_t<decltype(e.lhs)>;
    if constexpr (contains<S, L>) {
      return first_occurrence<S, Base>(e.lhs);
    } else {
      return first_occurrence<S, Base + reduction_count<L>>(e.rhs);
    }
  }
}

// Calls f(node) for every node of e that one step evaluates.
template <class E, class F>
void for_each_subtree(const E& e, F&& f) {
  f(e);
  if constexpr (requires { e.operand; }) {
    for_each_subtree(e.operand, f);
  } else if constexpr (requires { e.lhs; }) {
    for_each_subtree(e.lhs, f);
    for_each_subtree(e.rhs, f);
  }
}

}  // namespace tenferro::expr::detail
