// The derivative rules of the ops in ops/, one line each, written as expressions with the
// simplifying builders (so a rule that is 0 or 1 vanishes from the derivative's type).
#pragma once

#include <tenferro/expr/build.hpp>

namespace tenferro::expr::ops {

using expr::detail::binary_of;
using expr::detail::make_add;
using expr::detail::make_div;
using expr::detail::make_mul;
using expr::detail::make_neg;
using expr::detail::make_sub;

// unary: f'(a)
template <class A> auto neg::derivative(const A&) { return make_neg(one{}); }
template <class A> auto exp::derivative(const A& a) { return expr::exp(a); }
template <class A> auto log::derivative(const A& a) { return make_div(one{}, a); }
template <class A> auto sqrt::derivative(const A& a) { return make_div(constant(0.5), expr::sqrt(a)); }
template <class A> auto rsqrt::derivative(const A& a) { return make_mul(constant(-0.5), make_div(expr::rsqrt(a), a)); }
template <class A> auto sin::derivative(const A& a) { return expr::cos(a); }
template <class A> auto cos::derivative(const A& a) { return make_neg(expr::sin(a)); }
template <class A> auto tan::derivative(const A& a) { return make_add(one{}, expr::square(expr::tan(a))); }
template <class A> auto tanh::derivative(const A& a) { return make_sub(one{}, expr::square(expr::tanh(a))); }
template <class A> auto sinh::derivative(const A& a) { return expr::cosh(a); }
template <class A> auto cosh::derivative(const A& a) { return expr::sinh(a); }
template <class A> auto abs::derivative(const A& a) { return expr::sign(a); }
template <class A> auto sign::derivative(const A&) { return zero{}; }
template <class A> auto square::derivative(const A& a) { return make_mul(constant(2.0), a); }
template <class A> auto log1p::derivative(const A& a) { return make_div(one{}, make_add(one{}, a)); }
template <class A> auto expm1::derivative(const A& a) { return expr::exp(a); }
template <class A> auto sigmoid::derivative(const A& a) { return make_mul(expr::sigmoid(a), make_sub(one{}, expr::sigmoid(a))); }
template <class A> auto stop_gradient::derivative(const A&) { return zero{}; }

// [a != 0] + [b < 0]: nonzero where pow's ∂/∂b = a^b ln a holds (not at a = 0 with b >= 0; for a
// complex b, with Re b >= 0, as PyTorch).
template <class A, class C> auto pow_log_mask(const A& a, const C& b) { return make_add(binary_of<indicator<not_equal>>(a, zero{}), binary_of<indicator<less>>(b, zero{})); }

// binary: ∂f/∂a and ∂f/∂b
template <class A, class C> auto add::d_lhs(const A&, const C&) { return one{}; }
template <class A, class C> auto add::d_rhs(const A&, const C&) { return one{}; }
template <class A, class C> auto sub::d_lhs(const A&, const C&) { return one{}; }
template <class A, class C> auto sub::d_rhs(const A&, const C&) { return make_neg(one{}); }
template <class A, class C> auto mul::d_lhs(const A&, const C& b) { return b; }
template <class A, class C> auto mul::d_rhs(const A& a, const C&) { return a; }
template <class A, class C> auto div::d_lhs(const A&, const C& b) { return make_div(one{}, b); }
template <class A, class C> auto div::d_rhs(const A& a, const C& b) { return make_neg(make_div(make_div(a, b), b)); }
template <class A, class C> auto pow::d_lhs(const A& a, const C& b) { return binary_of<where_nonzero>(b, make_mul(b, binary_of<pow>(a, make_sub(b, one{})))); }
template <class A, class C> auto pow::d_rhs(const A& a, const C& b) { return binary_of<where_nonzero>(pow_log_mask(a, b), make_mul(binary_of<pow>(a, b), expr::log(a))); }
template <class A, class C> auto rem::d_lhs(const A&, const C&) { return one{}; }
template <class A, class C> auto rem::d_rhs(const A& a, const C& b) { return make_div(make_sub(binary_of<rem>(a, b), a), b); }
template <class A, class C> auto maximum::d_lhs(const A& a, const C& b) { return binary<indicator<greater_equal>, A, C>(a, b); }
template <class A, class C> auto maximum::d_rhs(const A& a, const C& b) { return binary<indicator<less>, A, C>(a, b); }
template <class A, class C> auto minimum::d_lhs(const A& a, const C& b) { return binary<indicator<less_equal>, A, C>(a, b); }
template <class A, class C> auto minimum::d_rhs(const A& a, const C& b) { return binary<indicator<greater>, A, C>(a, b); }
template <class A, class C> auto where_nonzero::d_rhs(const A& c, const C&) { return binary_of<where_nonzero>(c, one{}); }

}  // namespace tenferro::expr::ops
