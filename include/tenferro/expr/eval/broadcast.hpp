// The general path for inputs the fused loop cannot read as they are (another shape that
// broadcasts, another storage order, another element type): copy them once into column-major
// arrays of the broadcast shape, and sum gradient fields back over the broadcast axes.
#pragma once

#include <tenferro/core/detail/array.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/expr/ops/binary.hpp>

#include <vector>

namespace tenferro::expr::detail {

using tenferro::column_major_strides;
using tenferro::detail::for_each_column_major;

// Strides of an array of `shape` (right-aligned inside `target`, NumPy style) seen from `target`:
// 0 on axes it lacks or where its extent is 1.
inline std::vector<std::ptrdiff_t> broadcast_strides(const Shape& shape,
                                                     const std::vector<std::ptrdiff_t>& own,
                                                     const Shape& target) {
  std::vector<std::ptrdiff_t> s(target.size(), 0);
  const std::size_t lead = target.size() - shape.size();
  for (std::size_t d = 0; d < shape.size(); ++d) s[lead + d] = shape[d] == 1 ? 0 : own[d];
  return s;
}

// Container `c` broadcast to `target`, converted to T, written column-major to dst (as many
// elements as `target` has).
template <class T, class C>
void materialize_into(T* dst, const C& c, const Shape& target) {
  const Shape shape(c.shape().begin(), c.shape().end());
  std::vector<std::ptrdiff_t> own(c.strides().begin(), c.strides().end());
  const auto* src = c.data();
  for_each_column_major(target, broadcast_strides(shape, own, target),
                        [&](std::size_t k, std::ptrdiff_t offset) { dst[k] = static_cast<T>(src[offset]); });
}

// A column-major copy of container `c` broadcast to `target`, converted to T.
template <class T, class C>
column_major_array<T> materialize(const C& c, const Shape& target) {
  auto out = tenferro::detail::new_array<T>("broadcast", target);
  materialize_into(out.data(), c, target);
  return out;
}

// The adjoint of broadcasting: sums a field of the broadcast shape back to `shape`.
template <class T>
column_major_array<T> reduce_to_shape(const column_major_array<T>& field, const Shape& shape) {
  const Shape target(field.shape().begin(), field.shape().end());
  auto out = tenferro::detail::new_array<T>("sum over broadcast axes", shape);
  std::fill(out.storage().begin(), out.storage().end(), T(0));
  const T* src = field.data();
  T* dst = out.data();
  for_each_column_major(
      target, broadcast_strides(shape, column_major_strides(shape), target),
      [&](std::size_t k, std::ptrdiff_t offset) { dst[offset] = ops::add::scalar(dst[offset], src[k]); });
  return out;
}

}  // namespace tenferro::expr::detail
