// Shape: the extents of a column-major tensor, helpers to print and count them, and Strides: where
// the elements of a shape lie in a buffer.
#pragma once

#include <tenferro/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tenferro {

using Shape = std::vector<std::size_t>;
// A list of axes (reductions) or a permutation of them (transpose).
using Axes = std::vector<std::size_t>;

// "[2, 3]"; a rank-0 shape prints as "[]".
inline std::string format_shape(std::span<const std::size_t> shape) {
  std::string out;
  detail::append_shape(out, shape);
  return out;
}

// The largest product of the non-zero extents of a shape: every element offset and stride of an
// array of that shape, in any layout, fits in std::ptrdiff_t.
inline constexpr std::size_t max_shape_size = static_cast<std::size_t>(PTRDIFF_MAX);

// Number of elements (1 for rank 0, 0 with an extent of 0), or nullopt when the product of the
// non-zero extents exceeds max_shape_size. One rule whatever the order of the extents: [0, 2^40,
// 2^40] is as invalid as [2^40, 2^40, 0] (its strides would overflow, and reducing its first axis
// would make a shape of 2^80 elements).
inline std::optional<std::size_t> checked_shape_size(std::span<const std::size_t> shape) noexcept {
  std::size_t nonzero = 1;
  bool empty = false;
  for (std::size_t extent : shape) {
    if (extent == 0) {
      empty = true;
    } else if (nonzero > max_shape_size / extent) {
      return std::nullopt;
    } else {
      nonzero *= extent;
    }
  }
  return empty ? 0 : nonzero;
}

namespace detail {
// Throws InvalidArgument: `shape`, given to `op`, breaks the size rule.
[[noreturn, gnu::cold]] TENFERRO_NOINLINE inline void throw_shape_too_large(
    std::string_view op, std::span<const std::size_t> shape) {
  throw_error(ErrorKind::InvalidArgument, op,
              {"shape ", shape,
               " has too many elements (the product of its non-zero extents must not exceed 2^63 - 1)"});
}
}  // namespace detail

// The NumPy broadcast of two shapes, the one rule of every layer: right-aligned, each pair of
// extents equal or one of them 1 (the result takes the other), missing leading axes count as 1.
// nullopt when some pair differs with neither 1; then *conflict (when given) is that axis of the
// result. S: the result's type (a Shape, or a vector with inline storage).
template <class S = Shape>
std::optional<S> broadcast_shapes(std::span<const std::size_t> a, std::span<const std::size_t> b,
                                  std::size_t* conflict = nullptr) {
  S out(std::max(a.size(), b.size()), 1);
  const std::size_t lead_a = out.size() - a.size(), lead_b = out.size() - b.size();
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::size_t da = i < lead_a ? 1 : a[i - lead_a];
    const std::size_t db = i < lead_b ? 1 : b[i - lead_b];
    if (da != db && da != 1 && db != 1) {
      if (conflict != nullptr) *conflict = i;
      return std::nullopt;
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Per axis, how many elements apart two neighbours along that axis lie in a buffer (0 on an axis
// that repeats one element: a broadcast).
using Strides = std::vector<std::ptrdiff_t>;

// The strides of a dense column-major array of `shape` (the first index varies fastest).
inline Strides column_major_strides(std::span<const std::size_t> shape) {
  Strides s(shape.size());
  std::ptrdiff_t stride = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    s[d] = stride;
    stride *= static_cast<std::ptrdiff_t>(shape[d]);
  }
  return s;
}

namespace detail {

// Visits every element of `shape` in column-major order as f(k, offset): k counts the elements,
// offset is the element's place in an array with the given strides. The first axis is the inner
// loop, so a stride-1 first axis reads consecutive elements.
template <class F>
void for_each_column_major(std::span<const std::size_t> shape, std::span<const std::ptrdiff_t> strides,
                           F&& f) {
  const std::size_t n = checked_shape_size(shape).value_or(0);
  if (n == 0) return;
  if (shape.empty()) {
    f(std::size_t{0}, std::ptrdiff_t{0});
    return;
  }
  const std::size_t inner = shape[0];
  const std::ptrdiff_t step = strides[0];
  std::vector<std::size_t> index(shape.size(), 0);
  std::ptrdiff_t offset = 0;
  for (std::size_t k = 0; k < n; k += inner) {
    for (std::size_t i = 0; i < inner; ++i) f(k + i, offset + static_cast<std::ptrdiff_t>(i) * step);
    for (std::size_t d = 1; d < shape.size(); ++d) {
      if (++index[d] < shape[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * static_cast<std::ptrdiff_t>(index[d] - 1);
      index[d] = 0;
    }
  }
}

}  // namespace detail

}  // namespace tenferro
