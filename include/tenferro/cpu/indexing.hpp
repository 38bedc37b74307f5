// Indexing kernels along one axis: gather (NumPy's take_along_axis) and its adjoint scatter_add.
// The index tensor may be any strided view (index_select passes a vector broadcast to the result's
// shape: stride 0 off the axis, nothing copied).
#pragma once

#include <tenferro/cpu/common.hpp>
#include <tenferro/cpu/scan.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tenferro::cpu {

namespace detail {

// Throws Validation naming the op unless `indices` holds i64.
inline void check_index_dtype(std::string_view op, const Tensor& indices) {
  if (indices.dtype() != DType::I64) {
    throw_error(ErrorKind::Validation, op,
                {"argument 'indices' (shape ", indices.extents(), ") has dtype ", dtype_name(indices.dtype()),
                 ": indices are i64"});
  }
}

// Index i (at `position` of the indices) of axis `axis` of `shape`, made non-negative. Throws
// Validation naming the op, the index, its position and the bound when it is out of range.
inline std::int64_t checked_index(std::string_view op, std::int64_t i, std::string_view position,
                                  std::size_t axis, const Shape& shape) {
  const auto bound = static_cast<std::int64_t>(shape[axis]);
  if (i < -bound || i >= bound) {
    throw_error(ErrorKind::Validation, op,
                {"index ", std::to_string(i), " at position ", position,
                 " of 'indices' is out of range for axis ", axis, " of extent ", shape[axis], " (-",
                 shape[axis], " to ", std::to_string(bound - 1), "; shape ", shape, ")"});
  }
  return i < 0 ? i + bound : i;
}

// Checks gather / scatter_add's shapes: indices of x's rank with x's extents off the axis. Throws
// Validation naming the op for an axis out of range, an index dtype other than I64 or a rank that
// differs; ShapeMismatch naming the shapes.
inline void check_indexing(std::string_view op, const Shape& x, std::size_t axis, const Tensor& indices) {
  const Shape s = indices.shape();
  check_axis(op, x, axis);
  check_index_dtype(op, indices);
  if (s.size() != x.size()) {
    throw_error(ErrorKind::Validation, op,
                {"rank mismatch: argument 'indices' has rank ", s.size(), " (shape ", s, "), expected rank ",
                 x.size(), " as the tensor (shape ", x, ")"});
  }
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (d != axis && s[d] != x[d]) {
      throw_error(ErrorKind::ShapeMismatch, op,
                  {"argument 'indices' (shape ", s, ") and the tensor (shape ", x, ") differ on axis ", d,
                   ", which is not the indexed axis ", axis});
    }
  }
}

// Calls f(k, at, i) for every element k (column-major) of the indices' shape: `at` is the place in
// a compact array of shape x of the element the index selects, i = indices[k] (negative: from the
// end). Throws Validation naming the op, the index, its position and the bound for an index out
// of range (before f sees it).
template <class F>
void for_each_index(std::string_view op, const Shape& x, std::size_t axis, const Tensor& indices, F&& f) {
  const Shape s = indices.shape();
  const std::size_t n = checked_shape_size(s).value_or(0);
  if (n == 0) return;
  const Strides xs = column_major_strides(x), is = indices.strides();
  const std::int64_t* idx = indices.data<std::int64_t>();  // at offset(), read through the strides
  const auto bound = static_cast<std::int64_t>(x[axis]);
  std::vector<std::size_t> at(s.size(), 0);
  std::ptrdiff_t base = 0, from = 0;  // x's place without the axis' term; the index's place
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t i = idx[from] >= 0 && idx[from] < bound
                               ? idx[from]
                               : checked_index(op, idx[from], format_shape(at), axis, x);
    f(k, base + static_cast<std::ptrdiff_t>(i) * xs[axis], i);
    for (std::size_t d = 0; d < s.size(); ++d) {  // next column-major position
      from += is[d];
      if (d != axis) base += xs[d];
      if (++at[d] < s[d]) break;
      from -= is[d] * static_cast<std::ptrdiff_t>(s[d]);
      if (d != axis) base -= xs[d] * static_cast<std::ptrdiff_t>(s[d]);
      at[d] = 0;
    }
  }
}

}  // namespace detail

// out[k] = x[the element of position k with its `axis` coordinate replaced by indices[k]]: the
// result has the indices' shape. Any dtype.
inline Tensor gather(const Tensor& x, std::size_t axis, const Tensor& indices, std::string_view op) {
  const Shape shape = x.shape();
  detail::check_indexing(op, shape, axis, indices);
  const Tensor c = x.materialized();
  return tenferro::detail::visit_dtype(x.dtype(), [&]<class T>(T) {
    Tensor r = Tensor::for_overwrite<T>(indices.shape(), op);
    T* out = r.mutable_array<T>().data();
    const T* src = c.as_slice<T>().data();
    detail::for_each_index(op, shape, axis, indices,
                           [&](std::size_t k, std::ptrdiff_t at, std::int64_t) { out[k] = src[at]; });
    return r;
  });
}

// x with updates[k] added at the element gather would read for position k (repeated indices
// add up; integers wrap). updates has the indices' shape and x's dtype. Bool is refused
// (Unsupported): a sum of flags has no bool value.
inline Tensor scatter_add(const Tensor& x, std::size_t axis, const Tensor& indices, const Tensor& updates,
                          std::string_view op) {
  const Shape shape = x.shape();
  detail::check_indexing(op, shape, axis, indices);
  if (updates.shape() != indices.shape() || updates.dtype() != x.dtype()) {
    throw_error(ErrorKind::ShapeMismatch, op,
                {"argument 'updates' (shape ", updates.extents(), ", dtype ", dtype_name(updates.dtype()),
                 ") must have the shape of 'indices' (", indices.extents(), ") and the tensor's dtype (",
                 dtype_name(x.dtype()), ")"});
  }
  if (x.dtype() == DType::Bool) {
    throw_error(ErrorKind::Unsupported, op,
                {"the tensor (shape ", shape, ") has dtype bool: scatter_add adds numbers"});
  }
  Tensor r = x.clone();
  const Tensor u = updates.materialized();
  visit_compute(x.dtype(), [&]<class T>(T) {
    T* out = r.mutable_array<T>().data();
    const T* src = u.as_slice<T>().data();
    detail::for_each_index(op, shape, axis, indices, [&](std::size_t k, std::ptrdiff_t at, std::int64_t) {
      out[at] = detail::wrapping_add(out[at], src[k]);
    });
  });
  return r;
}

}  // namespace tenferro::cpu
