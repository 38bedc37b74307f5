// Kernels that move elements without arithmetic on them, or with a fixed pattern: the views reshape,
// transpose and broadcast_to (Tensor::as_strided: no element is copied), broadcast_to's adjoint
// sum_to.
#pragma once

#include <tenferro/cpu/common.hpp>
#include <tenferro/cpu/fused.hpp>
#include <tenferro/expr.hpp>

#include <numeric>
#include <vector>

namespace tenferro::cpu {

// The same elements (column-major order) in another shape: a view of x's buffer when x is
// contiguous, else of x's compact copy. Throws ShapeMismatch when the element counts differ.
inline Tensor reshape(const Tensor& x, const Shape& shape, std::string_view op) {
  const auto n = checked_shape_size(shape);
  if (!n) tenferro::detail::throw_shape_too_large(op, shape);
  if (*n != x.size()) {
    throw Error(ErrorKind::ShapeMismatch, std::string(op),
                "cannot reshape a tensor of shape " + format_shape(x.shape()) + " (" +
                    std::to_string(x.size()) + " elements) to shape " + format_shape(shape));
  }
  if (!x.is_view() && std::ranges::equal(x.extents(), shape)) return x;
  const Tensor base = x.is_contiguous() ? x : x.materialized();
  return base.as_strided(shape, column_major_strides(shape), base.offset());
}

// Throws Validation unless perm is a permutation of 0 .. rank-1.
inline void check_permutation(std::string_view op, const Shape& shape, const Axes& perm) {
  std::vector<bool> seen(shape.size(), false);
  bool ok = perm.size() == shape.size();
  for (std::size_t p : perm) {
    if (!ok || p >= shape.size() || seen[p]) {
      ok = false;
      break;
    }
    seen[p] = true;
  }
  if (!ok) {
    std::string list;
    for (std::size_t p : perm) list += (list.empty() ? "" : ", ") + std::to_string(p);
    throw Error(ErrorKind::Validation, std::string(op),
                "argument 'perm' [" + list + "] is not a permutation of the " + std::to_string(shape.size()) +
                    " axes of a tensor of shape " + format_shape(shape));
  }
}

// Axis d of the result is axis perm[d] of x: a view of x's buffer.
inline Tensor transpose(const Tensor& x, const Axes& perm, std::string_view op) {
  const Shape shape = x.shape();
  check_permutation(op, shape, perm);
  bool identity = true;  // the tensor itself: no view to make (contractions transpose by it often)
  for (std::size_t d = 0; d < perm.size(); ++d) identity = identity && perm[d] == d;
  if (identity) return x;
  const Strides own = x.strides();
  Shape out_shape(perm.size());
  Strides strides(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) {
    out_shape[d] = shape[perm[d]];
    strides[d] = own[perm[d]];
  }
  return x.as_strided(std::move(out_shape), std::move(strides), x.offset());
}

// The inverse permutation.
inline Axes inverse_permutation(const Axes& perm) {
  Axes inv(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) inv[perm[d]] = d;
  return inv;
}

// Throws ShapeMismatch unless shape `own` broadcasts (NumPy-style) to `shape` without widening it.
inline void check_broadcast_to(const Shape& own, const Shape& shape, std::string_view op) {
  if (broadcast_shapes(op, own, shape) != shape) {
    throw Error(
        ErrorKind::ShapeMismatch, std::string(op),
        "a tensor of shape " + format_shape(own) + " cannot be broadcast to shape " + format_shape(shape));
  }
}

// x broadcast to `shape`: a view of x's buffer with stride 0 on the repeated axes.
inline Tensor broadcast_to(const Tensor& x, const Shape& shape, std::string_view op) {
  const Shape own = x.shape();
  if (own == shape) return x;
  check_broadcast_to(own, shape, op);
  return x.as_strided(shape, expr::detail::broadcast_strides(own, x.strides(), shape), x.offset());
}

// acc += b, in place when acc's buffer is not shared (b of acc's shape and dtype; otherwise a new
// broadcasting, promoting sum).
inline void add_into(Tensor& acc, const Tensor& b) {
  if (acc.dtype() != b.dtype() || acc.shape() != b.shape()) {
    acc = elementwise<expr::ops::add>(acc, b, "add");
    return;
  }
  visit_compute(acc.dtype(), [&]<class T>(T) {
    auto& a = acc.mutable_array<T>();
    const T* src = b.array<T>().data();
    T* dst = a.data();
    for (std::size_t i = 0, n = a.size(); i < n; ++i) dst[i] = expr::ops::add::scalar(dst[i], src[i]);
  });
}

// The adjoint of broadcast_to: x (of a shape `shape` broadcasts to) summed back to `shape`.
inline Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  promote("sum_to", std::span(&x, 1), every_kernel);
  if (x.dtype() == DType::Bool) return sum_to(cast(x, DType::I64), shape);
  return visit_compute(
      x.dtype(), [&]<class T>(T) { return Tensor(expr::detail::reduce_to_shape<T>(x.array<T>(), shape)); });
}

}  // namespace tenferro::cpu
