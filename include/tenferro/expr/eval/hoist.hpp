// Hoisting loop-invariant subtrees out of the fused loop.
//
// A subtree that reads no array input (only scalar inputs, constants and reductions already
// computed) has one value for the whole pass: log(sigma) in the normal log-pdf, 1 / sum(...) in
// the gradient of log_sum_exp. Before a pass runs, every maximal such subtree is evaluated once
// and replaced by a `hoisted` leaf holding its value; a division by such a value becomes a
// multiplication by its reciprocal. The replacement keeps the subtree's reduction count, so the
// pre-order numbering of the reductions around it is unchanged. (Every reduction a pass reads is
// such a subtree, so after hoisting no tree of the pass reads a reduction by number.)
//
// Then constant factors leave the loop too: a product's hoisted and constant factors (through
// negations and squares) are multiplied into one number, so -1 * ((x - mu) * h1 * h2) is stored
// as (x - mu) * f and square((x - mu) * h) as h² * square(x - mu); and a sum reduction keeps only
// its varying part,
//   sum(c * a + u) = c * sum(a) + n * u   (c, u loop-invariant),
// applied after the loop. Sums whose varying parts agree share one accumulation, each with its own
// c and u: the normal log-density's value and its sigma derivative both sum square(x - mu). These
// change rounding in the last bits only, and cut the gradients of scalar parameters (the mean and
// deviation of a normal log-density) to a few operations each.
#pragma once

#include <tenferro/expr/build.hpp>
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
    // A division by a value computed before the loop (a scalar input, a finished reduction) becomes
    // a multiplication by its reciprocal; a division by a number written in the expression (x / 3)
    // stays one, so the quotient is the correctly rounded one the expression says.
    if constexpr (std::is_same_v<typename E::op_type, ops::div> && uniform<Leaves, R>() &&
                  !std::is_same_v<R, constant>) {
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

// ---- constant factors and addends ----------------------------------------------------------

template <class E>
inline constexpr bool is_number = std::is_same_v<E, constant>;
template <std::size_t K>
inline constexpr bool is_number<hoisted<K>> = true;

template <class T, class Op>
inline constexpr bool is_binary_of = false;
template <class Op, class L, class R>
inline constexpr bool is_binary_of<binary<Op, L, R>, Op> = true;

template <class Rest>
struct factored {
  double factor;
  Rest rest;
};

// True when E holds no number (constant or hoisted value): two subtrees of such a type are equal.
template <class E>
constexpr bool number_free() {
  if constexpr (is_number<E>) {
    return false;
  } else if constexpr (requires(const E& e) { e.operand; }) {
    return number_free<std::remove_cvref_t<decltype(std::declval<E>().operand)>>();
  } else if constexpr (requires(const E& e) { e.lhs; }) {
    return number_free<std::remove_cvref_t<decltype(std::declval<E>().lhs)>>() &&
           number_free<std::remove_cvref_t<decltype(std::declval<E>().rhs)>>();
  } else {
    return requires { E::index; };  // a placeholder; anything else (a reduction) is not known equal
  }
}

// e = factor * rest, with every number of a product (through negations and squares) in factor;
// a product of two equal number-free factors becomes a square. So the normal log-density's
// -0.5 * square((x - mu) * h) and its sigma derivative's ((x - mu) * h1) * ((x - mu) * h2) both
// keep square(x - mu), and their sums share one reduction.
template <class E>
auto split_factor(const E& e) {
  if constexpr (is_number<E>) {
    return factored<one>{e.value, one{}};
  } else if constexpr (is_unary_of<E, ops::neg>) {
    auto s = split_factor(e.operand);
    return factored<decltype(s.rest)>{-s.factor, s.rest};
  } else if constexpr (is_unary_of<E, ops::square>) {
    auto s = split_factor(e.operand);
    using A = decltype(s.rest);
    if constexpr (std::is_same_v<A, one>) {
      return factored<one>{s.factor * s.factor, one{}};
    } else {
      return factored<unary<ops::square, A>>{s.factor * s.factor, unary<ops::square, A>(s.rest)};
    }
  } else if constexpr (is_binary_of<E, ops::mul>) {
    auto a = split_factor(e.lhs);
    auto b = split_factor(e.rhs);
    using A = decltype(a.rest);
    using B = decltype(b.rest);
    if constexpr (std::is_same_v<A, one>) {
      return factored<B>{a.factor * b.factor, b.rest};
    } else if constexpr (std::is_same_v<B, one>) {
      return factored<A>{a.factor * b.factor, a.rest};
    } else if constexpr (std::is_same_v<A, B> && number_free<A>()) {
      return factored<unary<ops::square, A>>{a.factor * b.factor, unary<ops::square, A>(a.rest)};
    } else {
      return factored<binary<ops::mul, A, B>>{a.factor * b.factor, binary<ops::mul, A, B>(a.rest, b.rest)};
    }
  } else {
    return factored<E>{1.0, e};
  }
}

// An elementwise output with its numbers multiplied into one leading factor.
template <class E>
auto fold_factors(const E& e) {
  auto s = split_factor(e);
  using Rest = decltype(s.rest);
  if constexpr (std::is_same_v<Rest, E>) {
    return e;  // nothing to fold
  } else if constexpr (std::is_same_v<Rest, one>) {
    return hoisted<0>{s.factor};
  } else {
    return binary<ops::mul, hoisted<0>, Rest>(hoisted<0>{s.factor}, s.rest);
  }
}

template <class Rest>
struct affine_sum {
  double scale;  // sum(body) = scale * sum(rest) + n * offset
  double offset;
  Rest rest;
};

// A sum's body as scale * rest + offset, with the loop-invariant parts taken out.
template <class E>
auto split_sum(const E& e) {
  if constexpr (requires { e.lhs; }) {
    using Op = typename E::op_type;
    using L = std::remove_cvref_t<decltype(e.lhs)>;
    using R = std::remove_cvref_t<decltype(e.rhs)>;
    if constexpr ((std::is_same_v<Op, ops::add> || std::is_same_v<Op, ops::sub>)&&is_number<R>) {
      auto a = split_sum(e.lhs);
      const double u = std::is_same_v<Op, ops::add> ? e.rhs.value : -e.rhs.value;
      return affine_sum<decltype(a.rest)>{a.scale, a.offset + u, a.rest};
    } else if constexpr (std::is_same_v<Op, ops::add> && is_number<L>) {
      auto a = split_sum(e.rhs);
      return affine_sum<decltype(a.rest)>{a.scale, a.offset + e.lhs.value, a.rest};
    } else {
      auto f = split_factor(e);
      return affine_sum<decltype(f.rest)>{f.factor, 0.0, f.rest};
    }
  } else {
    auto f = split_factor(e);
    return affine_sum<decltype(f.rest)>{f.factor, 0.0, f.rest};
  }
}

}  // namespace tenferro::expr::detail
