// Which element types an expression can be evaluated in, from the flags of its ops: an op struct
// saying `static constexpr bool integral = true` has an integer form (ops/integer.hpp), one saying
// `static constexpr bool complex = true` a complex form (its scalar() and batch() take
// std::complex values and xsimd complex batches). Leaves have every form.
#pragma once

#include <tenferro/expr/element.hpp>
#include <tenferro/expr/fwd.hpp>

#include <type_traits>

namespace tenferro::expr {

namespace detail {

struct integer_form {
  template <class Op>
  static constexpr bool of() {
    if constexpr (requires { Op::integral; }) {
      return Op::integral;
    } else {
      return false;
    }
  }
};
struct complex_form {
  template <class Op>
  static constexpr bool of() {
    if constexpr (requires { Op::complex; }) {
      return Op::complex;
    } else {
      return false;
    }
  }
};

template <class Form, class E>
struct every_op : std::true_type {};  // leaves
template <class Form, class Op, class A>
struct every_op<Form, unary<Op, A>>
    : std::bool_constant<Form::template of<Op>() && every_op<Form, A>::value> {};
template <class Form, class Op, class L, class R>
struct every_op<Form, binary<Op, L, R>>
    : std::bool_constant<Form::template of<Op>() && every_op<Form, L>::value && every_op<Form, R>::value> {};
template <class Form, class Op, class A>
struct every_op<Form, reduction<Op, A>>
    : std::bool_constant<Form::template of<Op>() && every_op<Form, A>::value> {};

}  // namespace detail

// True when every op of E has an integer form: E can be evaluated over i32 and i64 inputs.
template <class E>
inline constexpr bool has_integer_form =
    detail::every_op<detail::integer_form, std::remove_cvref_t<E>>::value;

// True when every op of E has a complex form: E can be evaluated over c32 and c64 inputs.
template <class E>
inline constexpr bool has_complex_form =
    detail::every_op<detail::complex_form, std::remove_cvref_t<E>>::value;

// True when E can be evaluated in compute type T.
template <class T, class E>
inline constexpr bool evaluable_in = Real<T> || (Integer<T> && has_integer_form<E>) ||
                                     (Complex<T> && has_complex_form<E>);

}  // namespace tenferro::expr
