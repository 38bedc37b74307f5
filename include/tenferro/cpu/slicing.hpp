// Kernels that cut and pad: slice and reverse are views of their input's buffer (no element is
// copied: a slice scales the strides and moves the offset, a reverse negates the strides); pad,
// slice's adjoint, writes its input into a zero-filled result.
#pragma once

#include <tenferro/cpu/common.hpp>
#include <tenferro/cpu/reduce.hpp>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tenferro::cpu {

namespace detail {

// Throws Validation naming the op and the shape unless the list has one entry per axis.
template <class V>
void check_per_axis(std::string_view op, std::string_view what, const V& list, const Shape& shape) {
  if (list.size() != shape.size()) {
    throw_error(ErrorKind::Validation, op,
                {"argument '", what, "' has ", list.size(), " entries for a tensor of rank ", shape.size(),
                 " (shape ", shape, ")"});
  }
}

}  // namespace detail

// Elements starts[d], starts[d] + steps[d], ... below limits[d] of each axis d: a view of x's
// buffer (a fresh empty tensor when some axis keeps nothing). Throws Validation naming the axis,
// the values and the shape unless starts[d] <= limits[d] <= extent and steps[d] >= 1.
inline Tensor slice(const Tensor& x, const Shape& starts, const Shape& limits, const Shape& steps,
                    std::string_view op) {
  const Shape shape = x.shape();
  detail::check_per_axis(op, "starts", starts, shape);
  detail::check_per_axis(op, "limits", limits, shape);
  detail::check_per_axis(op, "strides", steps, shape);
  Shape out(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!(starts[d] <= limits[d] && limits[d] <= shape[d] && steps[d] >= 1)) {
      throw_error(ErrorKind::Validation, op,
                  {"axis ", d, ": start ", starts[d], ", limit ", limits[d], " and stride ", steps[d],
                   " do not select from an extent of ", shape[d],
                   " (start <= limit <= extent, stride >= 1; shape ", shape, ")"});
    }
    out[d] = limits[d] == starts[d] ? 0 : (limits[d] - starts[d] - 1) / steps[d] + 1;  // no overflow
  }
  if (checked_shape_size(out) == 0) return Tensor::zeros(out, x.dtype());
  Strides strides = x.strides();
  std::ptrdiff_t offset = x.offset();
  for (std::size_t d = 0; d < shape.size(); ++d) {
    offset += static_cast<std::ptrdiff_t>(starts[d]) * strides[d];
    // With two elements or more the step is below the extent, so the scaled stride fits.
    if (out[d] > 1) strides[d] *= static_cast<std::ptrdiff_t>(steps[d]);
  }
  return x.as_strided(std::move(out), std::move(strides), offset);
}

// x with the order of the elements along `axes` reversed: a view of x's buffer (negative strides).
// Throws Validation for an axis out of range or listed twice.
inline Tensor reverse(const Tensor& x, const Axes& axes, std::string_view op) {
  const Shape shape = x.shape();
  const std::vector<bool> mask = reduce_mask(op, shape, axes);
  if (x.size() == 0) return x;
  Strides strides = x.strides();
  std::ptrdiff_t offset = x.offset();
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) continue;
    offset += static_cast<std::ptrdiff_t>(shape[d] - 1) * strides[d];
    strides[d] = -strides[d];
  }
  return x.as_strided(shape, std::move(strides), offset);
}

// The extent pad gives an axis of extent n: low + high + n + (n - 1) interior (low + high when n
// is 0); nullopt when it does not fit in an int64 (the arithmetic is checked, never overflows).
inline std::optional<std::int64_t> padded_extent(std::size_t n, std::int64_t low, std::int64_t high,
                                                 std::int64_t interior) {
  std::int64_t e = 0, gaps = 0;
  if (n > static_cast<std::size_t>(INT64_MAX)) return std::nullopt;
  const auto count = static_cast<std::int64_t>(n);
  if (count > 1 && __builtin_mul_overflow(count - 1, interior, &gaps)) return std::nullopt;
  if (__builtin_add_overflow(count, gaps, &e) || __builtin_add_overflow(e, low, &e) ||
      __builtin_add_overflow(e, high, &e)) {
    return std::nullopt;
  }
  return e;
}

// The distance between neighbours of an axis of n elements after padding with `interior`: 1 when
// no two elements are padded apart (any interior, however large, is then harmless).
inline std::int64_t pad_step(std::size_t n, std::int64_t interior) { return n > 1 ? interior + 1 : 1; }

// x with low[d] zeros before, high[d] after and interior[d] between its elements along each axis d
// (a negative low or high crops instead). Throws Validation naming the axis, the values and the
// shape for a negative interior or a negative resulting extent.
inline Tensor pad(const Tensor& x, const std::vector<std::int64_t>& low,
                  const std::vector<std::int64_t>& high, const std::vector<std::int64_t>& interior,
                  std::string_view op) {
  const Shape shape = x.shape();
  detail::check_per_axis(op, "low", low, shape);
  detail::check_per_axis(op, "high", high, shape);
  detail::check_per_axis(op, "interior", interior, shape);
  Shape out(shape.size()), first(shape.size()), last(shape.size());  // the input's kept range
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto extent =
        interior[d] < 0 ? std::nullopt : padded_extent(shape[d], low[d], high[d], interior[d]);
    const std::int64_t e = extent.value_or(-1);
    if (e < 0) {
      throw_error(ErrorKind::Validation, op,
                  {"axis ", d, " (extent ", shape[d], "): low ", std::to_string(low[d]), ", high ",
                   std::to_string(high[d]), " and interior ", std::to_string(interior[d]),
                   " give no extent (interior must be >= 0; shape ", shape, ")"});
    }
    out[d] = static_cast<std::size_t>(e);
    // Input element i lands at low + i (interior + 1); keep those inside [0, out).
    // (In 128 bits: low may be near the int64 extremes with high making up for it.)
    __extension__ typedef __int128 wide;
    const wide step = pad_step(shape[d], interior[d]), n = static_cast<wide>(shape[d]), lo = low[d];
    const wide a = lo >= 0 ? 0 : (-lo + step - 1) / step;
    const wide b = std::min<wide>(n, e - lo <= 0 ? 0 : (wide(e) - lo + step - 1) / step);
    first[d] = static_cast<std::size_t>(std::min(a, n));
    last[d] = static_cast<std::size_t>(std::max<wide>(b, std::min(a, n)));
  }
  if (!checked_shape_size(out)) {
    throw_error(
        ErrorKind::InvalidArgument, op,
        {"padding a tensor of shape ", shape, " gives shape ", out,
         ", which has too many elements (the product of its non-zero extents must not exceed 2^63 - 1)"});
  }
  Tensor result = Tensor::zeros(out, x.dtype());
  Shape kept_shape(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) kept_shape[d] = last[d] - first[d];
  if (checked_shape_size(kept_shape) == 0) return result;
  const Tensor kept = slice(x, first, last, Shape(shape.size(), 1), op).materialized();
  const Strides out_strides = column_major_strides(out);
  Strides to(shape.size());
  std::ptrdiff_t base = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto step = static_cast<std::ptrdiff_t>(pad_step(shape[d], interior[d]));
    base +=
        (static_cast<std::ptrdiff_t>(low[d]) + static_cast<std::ptrdiff_t>(first[d]) * step) * out_strides[d];
    to[d] = out_strides[d] * step;
  }
  tenferro::detail::visit_dtype(x.dtype(), [&]<class T>(T) {
    T* dst = result.mutable_array<T>().data() + base;
    const T* src = kept.as_slice<T>().data();
    tenferro::detail::for_each_column_major(kept_shape, to,
                                            [&](std::size_t i, std::ptrdiff_t at) { dst[at] = src[i]; });
  });
  return result;
}

}  // namespace tenferro::cpu
