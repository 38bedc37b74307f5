// The selection kernel: cond ? a : b elementwise, the three broadcast NumPy-style.
#pragma once

#include <tenferro/cpu/common.hpp>
#include <tenferro/cpu/layout.hpp>

#include <array>

namespace tenferro::cpu {

// a where cond is true, else b, over the broadcast shape of the three, in promote_types(a, b).
// A select, not arithmetic: NaN, infinities and the sign of zero come through unchanged. Throws
// Unsupported naming the op when cond is not Bool, ShapeMismatch naming both shapes when two of
// them do not broadcast.
inline Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b, std::string_view op) {
  if (cond.dtype() != DType::Bool) {
    throw_error(ErrorKind::Unsupported, op,
                {"argument 'cond' (shape ", cond.extents(), ") has dtype ", dtype_name(cond.dtype()),
                 ": a condition is bool (compare, e.g. x.gt(y), to make one)"});
  }
  const Shape shape = broadcast_shapes(op, std::array{cond, a, b});
  const DType dtype = promote_types(a.dtype(), b.dtype());
  // Each operand as a compact array of the result's shape, or a single element read everywhere.
  auto dense = [&](const Tensor& t, DType d) {
    const Tensor c = cast(t, d);
    return c.size() == 1 || c.shape() == shape ? c.materialized() : broadcast_to(c, shape, op).materialized();
  };
  const Tensor c = dense(cond, DType::Bool), x = dense(a, dtype), y = dense(b, dtype);
  return tenferro::detail::visit_dtype(dtype, [&]<class T>(T) {
    Tensor r = Tensor::for_overwrite<T>(shape, op);
    T* out = r.mutable_array<T>().data();
    const bool* pc = c.as_slice<bool>().data();
    const T* px = x.as_slice<T>().data();
    const T* py = y.as_slice<T>().data();
    const std::size_t sc = c.size() == 1 ? 0 : 1, sx = x.size() == 1 ? 0 : 1, sy = y.size() == 1 ? 0 : 1;
    const std::size_t n = r.size();
    for (std::size_t i = 0; i < n; ++i) out[i] = pc[i * sc] ? px[i * sx] : py[i * sy];
    return r;
  });
}

}  // namespace tenferro::cpu
