// What every CPU kernel on dynamic Tensors shares: the dtype an op computes in, dtype
// conversion, NumPy broadcasting of shapes, and wrapping results back into Tensors.
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/tensor/tensor.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
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

// Calls f with a value of the compute type of `dtype`: float, double, std::int32_t, std::int64_t
// (F32, F64, I32, I64); with `Integers` false, the integer dtypes are never passed (visit_real).
template <bool Integers = true, class F>
decltype(auto) visit_number(DType dtype, F&& f) {
  if constexpr (Integers) {
    if (dtype == DType::I32) return f(std::int32_t{});
    if (dtype == DType::I64) return f(std::int64_t{});
  }
  return visit_real(dtype, std::forward<F>(f));
}

// The dtype an op on these inputs computes in: promote_types over them (docs/eager.md), where a
// result of Bool (every input Bool) computes in I32. `integers`: the op has integer kernels (i32,
// i64; bool operands count as integers). Throws Unsupported naming the op, the argument and its
// dtype for a dtype it has no kernels for.
inline DType promote(std::string_view op, std::span<const Tensor> in, bool integers = false) {
  auto refuse = [&](std::size_t k) {
    const DType d = in[k].dtype();
    throw Error(
        ErrorKind::Unsupported, std::string(op),
        "argument " + std::to_string(k) + " of shape " + format_shape(in[k].shape()) + " has dtype " +
            std::string(dtype_name(d)) +
            (integers ? "; this op takes f32, f64, i32, i64 and bool" : "; this op takes f32 and f64"));
  };
  DType out = in.empty() ? DType::F32 : in[0].dtype();
  for (std::size_t k = 0; k < in.size(); ++k) {
    const DType d = in[k].dtype();
    if (is_complex(d) || (!integers && !is_floating(d))) refuse(k);
    out = promote_types(out, d);
  }
  return out == DType::Bool ? DType::I32 : out;
}

// The floating dtype a derivative kernel over `in` computes in: promote() over them, integer and
// bool inputs taking part as numbers (the n of d(w * n)/dw). Throws Unsupported naming the op
// when the inputs promote to an integer or bool dtype (derivatives are floating).
inline DType promote_floating(std::string_view op, std::span<const Tensor> in) {
  const DType out = promote(op, in, true);
  if (!is_floating(out)) {
    throw Error(ErrorKind::Unsupported, std::string(op),
                "the inputs promote to " + std::string(dtype_name(out)) +
                    ": derivatives are computed in f32 and f64");
  }
  return out;
}

namespace detail {

// v as a To: a number converts as C++ does, except that a floating value going to an integer
// truncates toward zero and saturates at the integer's range (NaN gives 0) instead of being
// undefined; anything going to bool is v != 0 (NaN gives true).
template <class To, class From>
To convert_element(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (!(v == v)) return 0;
    if (v <= From(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= From(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// Calls f with a value of the element type of a real dtype (every dtype but C32 and C64).
// Throws Unsupported naming op for a complex dtype.
template <class F>
decltype(auto) visit_real_element(DType dtype, std::string_view op, F&& f) {
  if (dtype == DType::Bool) return f(bool{});
  if (is_complex(dtype)) {
    throw Error(ErrorKind::Unsupported, std::string(op),
                "dtype " + std::string(dtype_name(dtype)) + " has no kernels yet");
  }
  return visit_number(dtype, std::forward<F>(f));
}

}  // namespace detail

// `t` converted to dtype `to` (detail::convert_element); t itself (no copy) when it already has
// that dtype. Both dtypes real (not complex).
inline Tensor cast(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  return detail::visit_real_element(to, "cast", [&]<class T>(T) {
    return detail::visit_real_element(t.dtype(), "cast", [&]<class S>(S) {
      const auto& src = t.array<S>();
      auto out = tenferro::detail::new_array<T>("cast", src.shape());
      std::transform(src.data(), src.data() + src.size(), out.data(),
                     [](S v) { return detail::convert_element<T>(v); });
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
