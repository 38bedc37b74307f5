// Symbolic differentiation at compile time.
//
//   vjp_expr<I>(e, c)   the cotangent reaching arg<I> when e receives cotangent c (reverse mode)
//   tangent_expr<N>(e)  the tangent of e when arg<I> moves along arg<N + I> (forward mode)
//   derivative(e, x)    vjp_expr<I>(e, one): the gradient of sum(e) w.r.t. x = arg<I>. For an
//                       elementwise e without reductions this is the elementwise derivative
//                       de_i/dx_i; for a scalar e (a reduction) it is ∂e/∂x_i.
//
// Every result is a type built with the simplifying builders, so it is as small as the rules
// allow: the derivative of an expression that does not use x is exactly `zero`.
//
// Scalars meet elements through broadcasting: when an elementwise cotangent c flows into a
// scalar subexpression s (a reduction, or an expression of reductions), the adjoint of the
// broadcast is a sum, so s receives sum(c).
#pragma once

#include <tenferro/expr/build.hpp>
#include <tenferro/expr/rules.hpp>

namespace tenferro::expr {

// True when arg<I> occurs in E.
template <std::size_t I, class E>
inline constexpr bool depends_on = false;
template <std::size_t I, std::size_t J>
inline constexpr bool depends_on<I, arg<J>> = I == J;
template <std::size_t I, class Op, class E>
inline constexpr bool depends_on<I, unary<Op, E>> = depends_on<I, E>;
template <std::size_t I, class Op, class L, class R>
inline constexpr bool depends_on<I, binary<Op, L, R>> = depends_on<I, L> || depends_on<I, R>;
template <std::size_t I, class Op, class E>
inline constexpr bool depends_on<I, reduction<Op, E>> = depends_on<I, E>;

namespace detail {

template <std::size_t I, class C>
constexpr auto vjp_rule(const arg<I>&, const C& c) {
  return c;
}

template <std::size_t I, class E, class C>
constexpr auto vjp_expr(const E& e, const C& c);

template <std::size_t I, class Op, class A, class C>
constexpr auto vjp_rule(const unary<Op, A>& u, const C& c) {
  return vjp_expr<I>(u.operand, make_mul(Op::derivative(u.operand), c));
}

template <std::size_t I, class Op, class L, class R, class C>
constexpr auto vjp_rule(const binary<Op, L, R>& b, const C& c) {
  auto from_lhs = [&] {
    if constexpr (depends_on<I, L>) {
      return vjp_expr<I>(b.lhs, make_mul(c, Op::d_lhs(b.lhs, b.rhs)));
    } else {
      return zero{};
    }
  };
  auto from_rhs = [&] {
    if constexpr (depends_on<I, R>) {
      return vjp_expr<I>(b.rhs, make_mul(c, Op::d_rhs(b.lhs, b.rhs)));
    } else {
      return zero{};
    }
  };
  return make_add(from_lhs(), from_rhs());
}

template <std::size_t I, class E, class C>
constexpr auto vjp_rule(const reduction<ops::sum, E>& r, const C& c) {
  return vjp_expr<I>(r.body, c);
}

// [e == max(e)] / Σ[e == max(e)]: the cotangent of a max is split evenly over the maxima.
template <class E>
constexpr auto max_share(const reduction<ops::max, E>& r) {
  auto at_max = binary<ops::indicator<ops::equal>, E, reduction<ops::max, E>>(r.body, r);
  return make_div(at_max, make_reduction<ops::sum>(at_max));
}

template <std::size_t I, class E, class C>
constexpr auto vjp_rule(const reduction<ops::max, E>& r, const C& c) {
  return vjp_expr<I>(r.body, make_mul(c, max_share(r)));
}

template <std::size_t I, class E, class C>
constexpr auto vjp_expr(const E& e, const C& c) {
  if constexpr (!depends_on<I, E> || std::is_same_v<C, zero>) {
    return zero{};
  } else if constexpr (is_scalar<E> && !is_scalar<C>) {
    return vjp_expr<I>(e, make_reduction<ops::sum>(c));
  } else {
    return vjp_rule<I>(e, c);
  }
}

template <std::size_t N, class E>
constexpr auto tangent_expr(const E& e) {
  if constexpr (arity<E> == 0) {
    return zero{};  // no placeholder: constant in every direction
  } else if constexpr (requires { E::index; }) {
    return arg<N + E::index>{};
  } else if constexpr (requires { e.operand; }) {
    using Op = typename E::op_type;
    return make_mul(Op::derivative(e.operand), tangent_expr<N>(e.operand));
  } else if constexpr (requires { e.lhs; }) {
    using Op = typename E::op_type;
    return make_add(make_mul(Op::d_lhs(e.lhs, e.rhs), tangent_expr<N>(e.lhs)),
                    make_mul(Op::d_rhs(e.lhs, e.rhs), tangent_expr<N>(e.rhs)));
  } else if constexpr (std::is_same_v<typename E::op_type, ops::sum>) {
    return make_reduction<ops::sum>(tangent_expr<N>(e.body));
  } else {
    static_assert(std::is_same_v<typename E::op_type, ops::max>);
    return make_reduction<ops::sum>(make_mul(max_share(e), tangent_expr<N>(e.body)));
  }
}

}  // namespace detail

template <class E, class X>
concept Placeholder = Expression<E> && requires { std::remove_cvref_t<X>::index; } &&
                      std::is_same_v<std::remove_cvref_t<X>, arg<std::remove_cvref_t<X>::index>>;

// d e / d x as an expression type (see the top of this header for the exact meaning).
template <Expression E, class X>
constexpr auto derivative(const E& e, const X&) {
  static_assert(Placeholder<E, X>,
                "derivative(e, x): x must be a placeholder (arg<I>, from placeholders<N>())");
  if constexpr (Placeholder<E, X>) {
    return detail::vjp_expr<std::remove_cvref_t<X>::index>(e, one{});
  }
}

}  // namespace tenferro::expr
