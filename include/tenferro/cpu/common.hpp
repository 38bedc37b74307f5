// What every CPU kernel on dynamic Tensors shares: the floating dtype an op computes in, dtype
// conversion, NumPy broadcasting of shapes, and wrapping results back into Tensors.
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/tensor/tensor.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tenferro::cpu {

// A list of axes (reductions) or a permutation of them (transpose).
using Axes = std::vector<std::size_t>;

// Calls f(float{}) or f(double{}) for F32 / F64.
template <class F>
decltype(auto) visit_real(DType dtype, F&& f) {
  if (dtype == DType::F32) return f(float{});
  return f(double{});
}

// The dtype an op on these inputs computes in (promote_types over them: f64 when any input is
// f64, else f32). Throws Unsupported naming the op, the argument and its dtype for a dtype the
// kernels do not compute in yet (anything but f32 and f64).
inline DType promote(std::string_view op, std::span<const Tensor> in) {
  DType out = DType::F32;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const DType d = in[k].dtype();
    if (!is_floating(d)) {
      throw Error(ErrorKind::Unsupported, std::string(op),
                  "argument " + std::to_string(k) + " of shape " + format_shape(in[k].shape()) +
                      " has dtype " + std::string(dtype_name(d)) + "; this op takes f32 and f64");
    }
    out = promote_types(out, d);
  }
  return out;
}

// `t` converted to dtype `to` (f32 <-> f64); t itself (no copy) when it already has that dtype.
inline Tensor cast(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  return visit_real(to, [&]<class T>(T) {
    return visit_real(t.dtype(), [&]<class S>(S) {
      const auto& src = t.array<S>();
      auto out = tenferro::detail::new_array<T>("cast", src.shape());
      std::transform(src.data(), src.data() + src.size(), out.data(), [](S v) { return static_cast<T>(v); });
      return Tensor(std::move(out));
    });
  });
}

// A typed view of `t` in compute type T (a converted copy when its dtype differs).
template <class T>
TypedTensor<T> typed_as(const Tensor& t) {
  return cast(t, dtype_of<T>).template typed<T>();
}

// A rank-0 tensor holding v.
template <class T>
Tensor scalar_tensor(T v) {
  auto a = tenferro::detail::new_array<T>("scalar", Shape{});
  a.data()[0] = v;
  return Tensor(std::move(a));
}

// The broadcast of two shapes (tenferro::broadcast_shapes). Throws ShapeMismatch naming the op,
// both shapes and the axis where they conflict.
inline Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  std::size_t axis = 0;
  if (auto out = tenferro::broadcast_shapes(a, b, &axis)) return std::move(*out);
  const std::size_t rank = std::max(a.size(), b.size());
  auto extent = [&](const Shape& s) {
    return axis + s.size() < rank ? std::size_t(1) : s[axis + s.size() - rank];
  };
  throw Error(ErrorKind::ShapeMismatch, std::string(op),
              "shapes " + format_shape(a) + " and " + format_shape(b) + " do not broadcast (axis " +
                  std::to_string(axis) + " of the result: " + std::to_string(extent(a)) + " vs " +
                  std::to_string(extent(b)) + ")");
}

inline Shape broadcast_shapes(std::string_view op, std::span<const Tensor> in) {
  if (in.empty()) return {};
  Shape out = in[0].shape();
  for (std::size_t k = 1; k < in.size(); ++k) out = broadcast_shapes(op, out, in[k].shape());
  return out;
}

}  // namespace tenferro::cpu
