// Cutting and padding as eager ops: slice and pad (each the other's adjoint), reverse (its own),
// and squeeze / unsqueeze (reshapes that keep a view's strides). slice, reverse, squeeze and
// unsqueeze are views of their input's buffer; the kernels are cpu/slicing.hpp's.
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/ad/rules.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/cpu/slicing.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

namespace tenferro {

namespace detail::ad {

using offsets = std::vector<std::int64_t>;

// Three lists of one entry per axis of the input, as attribute integers, and back.
inline OpAttributes per_axis_attributes(std::initializer_list<const std::vector<std::int64_t>*> lists) {
  OpAttributes a;
  for (const auto* l : lists) a.ints.insert(a.ints.end(), l->begin(), l->end());
  return a;
}
inline offsets per_axis(const node& n, std::size_t which) {
  const std::size_t r = input_shape(n).size();
  const auto& ints = n.attributes().ints;
  return offsets(ints.begin() + static_cast<std::ptrdiff_t>(which * r),
                 ints.begin() + static_cast<std::ptrdiff_t>((which + 1) * r));
}
inline Shape as_shape(const offsets& v) { return Shape(v.begin(), v.end()); }
inline offsets as_offsets(const Shape& v) { return offsets(v.begin(), v.end()); }

// The zero cotangent of an input of shape s, when no element of it reaches the output.
template <class A>
value_of<A> zeros_like(const A& a, const Shape& s, const value_of<A>& like) {
  return a.constant(Tensor::zeros(s, A::tensor(like).dtype()));
}

// y = slice(x): the cotangent is G padded back into place (interior stride - 1).
struct slice_rule {
  offsets starts, limits, steps;
  Shape in_shape;
  OpAttributes attributes() const { return per_axis_attributes({&starts, &limits, &steps}); }
  static slice_rule from(const node& n) {
    return {per_axis(n, 0), per_axis(n, 1), per_axis(n, 2), input_shape(n)};
  }
  static bool reads_input() { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    const Shape out = A::tensor(cot).shape();
    if (checked_shape_size(out) == 0) return {zeros_like(a, in_shape, cot)};
    offsets high(in_shape.size()), interior(in_shape.size());
    for (std::size_t d = 0; d < in_shape.size(); ++d) {
      interior[d] = steps[d] - 1;
      high[d] = static_cast<std::int64_t>(in_shape[d]) -
                (starts[d] + static_cast<std::int64_t>(out[d] - 1) * steps[d] + 1);
    }
    return {a.pad(cot, starts, high, interior)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.slice(*t[0], as_shape(starts), as_shape(limits), as_shape(steps));
  }
};

// y = pad(x): the cotangent is G at the input's places (cropped places padded back with zeros).
struct pad_rule {
  offsets low, high, interior;
  Shape in_shape;
  OpAttributes attributes() const { return per_axis_attributes({&low, &high, &interior}); }
  static pad_rule from(const node& n) {
    return {per_axis(n, 0), per_axis(n, 1), per_axis(n, 2), input_shape(n)};
  }
  static bool reads_input() { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    if (checked_shape_size(in_shape) == 0) return {zeros_like(a, in_shape, cot)};
    const std::size_t r = in_shape.size();
    offsets grow_low(r), grow_high(r);
    Shape starts(r), limits(r), steps(r);
    for (std::size_t d = 0; d < r; ++d) {
      // (-INT64_MIN does not exist: INT64_MAX asks for as impossible a shape, which pad refuses.)
      grow_low[d] = low[d] >= 0 ? 0 : low[d] == INT64_MIN ? INT64_MAX : -low[d];
      grow_high[d] = high[d] >= 0 ? 0 : high[d] == INT64_MIN ? INT64_MAX : -high[d];
      steps[d] = static_cast<std::size_t>(cpu::pad_step(in_shape[d], interior[d]));
      starts[d] = static_cast<std::size_t>(std::max<std::int64_t>(low[d], 0));
      limits[d] = starts[d] + (in_shape[d] - 1) * steps[d] + 1;
    }
    const bool cropped = std::ranges::any_of(grow_low, [](auto v) { return v > 0; }) ||
                         std::ranges::any_of(grow_high, [](auto v) { return v > 0; });
    const value_of<A> g = cropped ? a.pad(cot, grow_low, grow_high, offsets(r, 0)) : cot;
    return {a.slice(g, starts, limits, steps)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.pad(*t[0], low, high, interior);
  }
};

// y = reverse(x, axes): its own adjoint.
struct reverse_rule {
  Axes axes;
  OpAttributes attributes() const { return shape_attributes(axes); }
  static reverse_rule from(const node& n) { return {attribute_shape(n, 0)}; }
  static bool reads_input() { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {a.reverse(cot, axes)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.reverse(*t[0], axes);
  }
};

}  // namespace detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

TENFERRO_INLINE EagerTensor EagerTensor::slice(const Shape& starts, const Shape& limits,
                                               const Shape& strides) const {
  Tensor value = cpu::slice(materialized(), starts, limits, strides, "slice");
  // A step matters only between two kept elements (and is then below the extent): recorded as 1
  // otherwise, so any step, however large, fits the node's integers.
  Shape steps = strides;
  for (std::size_t d = 0; d < steps.size(); ++d) {
    if (value.shape()[d] <= 1) steps[d] = 1;
  }
  using detail::ad::as_offsets;
  return detail::ad::record_rule<"slice">(
      std::span(this, 1), std::move(value),
      detail::ad::slice_rule{as_offsets(starts), as_offsets(limits), as_offsets(steps), shape()});
}

// XLA's clamping: a start below 0 reads from 0, one past extent - size from extent - size.
TENFERRO_INLINE EagerTensor EagerTensor::dynamic_slice(const std::vector<std::int64_t>& starts,
                                                       const Shape& sizes) const {
  constexpr std::string_view op = "dynamic_slice";
  const Shape in = shape();
  cpu::detail::check_per_axis(op, "starts", starts, in);
  cpu::detail::check_per_axis(op, "sizes", sizes, in);
  Shape from(in.size()), to(in.size());
  for (std::size_t d = 0; d < in.size(); ++d) {
    if (sizes[d] > in[d]) {
      throw_error(ErrorKind::Validation, op,
                  {"axis ", d, ": size ", sizes[d], " exceeds the extent ", in[d], " (shape ", in, ")"});
    }
    const auto last = static_cast<std::int64_t>(in[d] - sizes[d]);
    from[d] = static_cast<std::size_t>(std::clamp<std::int64_t>(starts[d], 0, last));
    to[d] = from[d] + sizes[d];
  }
  return slice(from, to, Shape(in.size(), 1));
}

TENFERRO_INLINE EagerTensor EagerTensor::pad(const std::vector<std::int64_t>& low,
                                             const std::vector<std::int64_t>& high,
                                             const std::vector<std::int64_t>& interior) const {
  Tensor value = cpu::pad(materialized(), low, high, interior, "pad");
  return detail::ad::record_rule<"pad">(std::span(this, 1), std::move(value),
                                        detail::ad::pad_rule{low, high, interior, shape()});
}

TENFERRO_INLINE EagerTensor EagerTensor::reverse(const Axes& axes) const {
  Tensor value = cpu::reverse(materialized(), axes, "reverse");
  return detail::ad::record_rule<"reverse">(std::span(this, 1), std::move(value),
                                            detail::ad::reverse_rule{axes});
}

// A reshape that drops or inserts axes of extent 1 keeps the other axes' strides: a view of any
// view. Recorded as reshape.
TENFERRO_INLINE EagerTensor EagerTensor::squeeze(const Axes& axes) const {
  const Shape in = shape();
  const std::vector<bool> mask = cpu::reduce_mask("squeeze", in, axes);
  const Tensor x = materialized();
  const Strides s = x.strides();
  Shape out;
  Strides strides;
  for (std::size_t d = 0; d < in.size(); ++d) {
    if (mask[d] && in[d] != 1) {
      throw_error(ErrorKind::ShapeMismatch, "squeeze",
                  {"axis ", d, " of shape ", in, " has extent ", in[d], ": squeeze drops axes of extent 1"});
    }
    if (!mask[d]) out.push_back(in[d]), strides.push_back(s[d]);
  }
  return detail::ad::record_rule<"reshape">(std::span(this, 1), x.as_strided(out, strides, x.offset()),
                                            detail::ad::reshape_rule{in, out});
}

TENFERRO_INLINE EagerTensor EagerTensor::unsqueeze(std::size_t axis) const {
  const Shape in = shape();
  if (axis > in.size()) {
    throw_error(ErrorKind::Validation, "unsqueeze",
                {"axis ", axis, " is out of range for a new axis of a tensor of rank ", in.size(), " (shape ",
                 in, "; 0 to ", in.size(), ")"});
  }
  const Tensor x = materialized();
  Shape out = in;
  Strides strides = x.strides();
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(axis), 1);
  return detail::ad::record_rule<"reshape">(std::span(this, 1), x.as_strided(out, strides, x.offset()),
                                            detail::ad::reshape_rule{in, out});
}

#endif  // TENFERRO_HEADER_ONLY

}  // namespace tenferro
