// Binding inputs to placeholders: what eval() accepts, the element type it computes in, the
// broadcast shape, and the leaves the kernels read.
//
// Accepted inputs: xtensor containers (xarray, xtensor, fixed, adaptors; any layout) of float,
// double, int32_t, int64_t, std::complex<float> or std::complex<double>, tenferro::TypedTensor
// of those, and arithmetic scalars. The compute type (compute_type_t) is double when any floating
// input is double (or a scalar is an integer), float when every floating input is float, complex
// of that when an input is complex, and i32 or i64 when every array is an integer array and no
// scalar is floating (ops/integer.hpp: integers wrap). Only ops with a form for the compute type
// (ops/forms.hpp) may appear.
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/expr/element.hpp>
#include <tenferro/expr/eval/kernel.hpp>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

namespace tenferro {
class Tensor;
template <Element T>
class TypedTensor;
}  // namespace tenferro

namespace tenferro::expr {

template <class In>
concept XtensorInput = requires(const In& a) {
  typename In::value_type;
  a.data();
  a.shape();
  a.strides();
  a.layout();
}
&&std::is_base_of_v<xt::xcontainer<In>, In>&& Number<typename In::value_type>;

template <class In>
concept TypedTensorInput = requires {
  typename In::value_type;
}
&&std::is_same_v<In, TypedTensor<typename In::value_type>>&& Number<typename In::value_type>;

template <class In>
concept ArrayInput = XtensorInput<std::remove_cvref_t<In>> || TypedTensorInput<std::remove_cvref_t<In>>;

template <class In>
concept ScalarInput =
    std::is_arithmetic_v<std::remove_cvref_t<In>> && !std::is_same_v<std::remove_cvref_t<In>, bool>;

template <class In>
concept Input = ArrayInput<In> || ScalarInput<In>;

namespace detail {

template <class In>
struct input_element {
  using type = std::remove_cvref_t<In>;
};
template <ArrayInput In>
struct input_element<In> {
  using type = typename std::remove_cvref_t<In>::value_type;
};
template <class In>
using input_element_t = typename input_element<In>::type;

// The compute type. With a floating or complex input (array or scalar): double if any of them is
// double or complex<double>, or a scalar is an integer, else float; complex of that when any input
// is complex; integer arrays do not widen it. Else, with integer arrays: i64 if any is i64, else
// i32 (integer scalars do not widen it). Scalars alone: double.
template <class... In>
struct compute_type {
  template <class In1>
  static constexpr bool floating = Real<real_t<input_element_t<In1>>>;
  template <class In1>
  static constexpr bool integer_array = ArrayInput<In1>&& Integer<input_element_t<In1>>;
  static constexpr bool any_floating = (floating<In> || ...);
  static constexpr bool any_complex = (Complex<input_element_t<In>> || ...);
  static constexpr bool narrow_floating =
      ((!floating<In> || std::is_same_v<real_t<input_element_t<In>>, float>)&&...) &&
      !((ScalarInput<In> && std::is_integral_v<input_element_t<In>>) || ...);
  static constexpr bool any_integer_array = (integer_array<In> || ...);
  static constexpr bool wide_integer = ((integer_array<In> && sizeof(input_element_t<In>) == 8) || ...);
  using real = std::conditional_t<narrow_floating, float, double>;
  using type = std::conditional_t<
      any_floating, std::conditional_t<any_complex, std::complex<real>, real>,
      std::conditional_t<any_integer_array, std::conditional_t<wide_integer, std::int64_t, std::int32_t>,
                         double>>;
};
template <class... In>
using compute_type_t = typename compute_type<In...>::type;

// The xtensor container behind an array input; for a TypedTensor (a view too), its elements where
// they lie, in the same terms (data, shape, strides).
template <class In>
decltype(auto) container_of(const In& in) {
  if constexpr (TypedTensorInput<In>) {
    return in.elements();
  } else {
    return (in);
  }
}

template <class C>
Shape shape_of(const C& c) {
  return Shape(c.shape().begin(), c.shape().end());
}

// The shape of an evaluation: up to rank 4 on the stack (the shape type of the arrays it returns).
using eval_shape = typename column_major_array<double>::shape_type;

// A container's shape, as a view.
template <class C>
std::span<const std::size_t> shape_view(const C& c) {
  return {c.shape().data(), c.shape().size()};
}

template <class C>
bool has_shape(const C& c, const Shape& shape) {
  return std::equal(c.shape().begin(), c.shape().end(), shape.begin(), shape.end());
}

// True when linear storage order equals column-major order for this container (extent-1 axes,
// whose xtensor stride is 0, do not matter).
template <class C>
bool column_major_storage(const C& c) {
  std::size_t expected = 1;
  for (std::size_t d = 0; d < c.dimension(); ++d) {
    if (c.shape()[d] != 1 && static_cast<std::size_t>(c.strides()[d]) != expected) return false;
    expected *= c.shape()[d];
  }
  return true;
}

// NumPy broadcasting of `shape` into `result` (aligned at the last axis). Throws ShapeMismatch
// naming both shapes.
inline void broadcast_into(eval_shape& result, std::span<const std::size_t> shape, std::string_view op,
                           std::size_t index, std::size_t first_index) {
  const std::span<const std::size_t> before(result.data(), result.size());
  auto out = broadcast_shapes<eval_shape>(before, shape);
  if (!out) {
    throw_error(ErrorKind::ShapeMismatch, op,
                {"input ", index, " has shape ", shape, ", which does not broadcast with shape ", before,
                 " (of input ", first_index, " and those before it)"});
  }
  result = std::move(*out);
}

}  // namespace detail
}  // namespace tenferro::expr
