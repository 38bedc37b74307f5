// What every CPU kernel on dynamic Tensors shares: the dtype an op computes in, dtype
// conversion, NumPy broadcasting of shapes, and wrapping results back into Tensors.
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/expr/element.hpp>
#include <tenferro/tensor/tensor.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tenferro::cpu {

using Axes = tenferro::Axes;

// Calls f(float{}) or f(double{}) for F32 / F64.
template <class F>
decltype(auto) visit_real(DType dtype, F&& f) {
  if (dtype == DType::F32) return f(float{});
  return f(double{});
}

// Which dtypes an op has kernels for, besides f32 and f64.
struct kernel_dtypes {
  bool integers = false;  // i32 and i64 (bool operands compute as i32)
  bool complex = false;   // c32 and c64
};
inline constexpr kernel_dtypes floating_kernels{};
inline constexpr kernel_dtypes integer_kernels{.integers = true};
inline constexpr kernel_dtypes complex_kernels{.complex = true};
inline constexpr kernel_dtypes every_kernel{.integers = true, .complex = true};

// Calls f with a value of the compute type of `dtype`: float, double, std::int32_t, std::int64_t,
// std::complex<float>, std::complex<double>; dtypes K has no kernels for are never passed (f32
// and f64 always are).
template <kernel_dtypes K = every_kernel, class F>
decltype(auto) visit_compute(DType dtype, F&& f) {
  if constexpr (K.integers) {
    if (dtype == DType::I32) return f(std::int32_t{});
    if (dtype == DType::I64) return f(std::int64_t{});
  }
  if constexpr (K.complex) {
    if (dtype == DType::C32) return f(std::complex<float>{});
    if (dtype == DType::C64) return f(std::complex<double>{});
  }
  return visit_real(dtype, std::forward<F>(f));
}

// The dtype an op on these inputs computes in: promote_types over them (docs/eager.md), where a
// result of Bool (every input Bool) computes in I32. `k`: the dtypes the op has kernels for (bool
// operands count as integers). Throws Unsupported naming the op, the argument and its dtype for
// a dtype it has no kernels for.
inline DType promote(std::string_view op, std::span<const Tensor> in, kernel_dtypes k = floating_kernels) {
  auto refuse = [&](std::size_t a) {
    const DType d = in[a].dtype();
    throw Error(ErrorKind::Unsupported, std::string(op),
                "argument " + std::to_string(a) + " of shape " + format_shape(in[a].shape()) + " has dtype " +
                    std::string(dtype_name(d)) + "; this op takes f32, f64" +
                    (k.integers ? ", i32, i64, bool" : "") + (k.complex ? ", c32, c64" : ""));
  };
  DType out = in.empty() ? DType::F32 : in[0].dtype();
  for (std::size_t a = 0; a < in.size(); ++a) {
    const DType d = in[a].dtype();
    if ((is_complex(d) && !k.complex) || ((is_integer(d) || d == DType::Bool) && !k.integers)) refuse(a);
    out = promote_types(out, d);
  }
  return out == DType::Bool ? DType::I32 : out;
}

// The floating (or complex, with `complex`) dtype a derivative kernel over `in` computes in:
// promote() over them, integer and bool inputs taking part as numbers (the n of d(w * n)/dw).
// Throws Unsupported naming the op when they promote to an integer or bool dtype.
inline DType promote_floating(std::string_view op, std::span<const Tensor> in, bool complex = false) {
  const DType out = promote(op, in, {.integers = true, .complex = complex});
  if (!is_floating(out) && !is_complex(out)) {
    throw Error(ErrorKind::Unsupported, std::string(op),
                "the inputs promote to " + std::string(dtype_name(out)) +
                    ": derivatives are computed in f32, f64, c32 and c64");
  }
  return out;
}

namespace detail {

// v as a To: a number converts as C++ does, except that a floating value going to an integer
// truncates toward zero and saturates at the integer's range (NaN gives 0) instead of being
// undefined; anything going to bool is v != 0 (NaN gives true); a complex value going to a real
// dtype gives its real part (as the gradient of a real input of a complex computation does).
template <class To, class From>
To convert_element(From v) {
  if constexpr (expr::Complex<From> && expr::Complex<To>) {
    using R = typename To::value_type;
    return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
  } else if constexpr (expr::Complex<From>) {
    return convert_element<To>(v.real());
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (!(v == v)) return 0;
    if (v <= From(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= From(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else if constexpr (expr::Complex<To>) {
    return To(static_cast<typename To::value_type>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace detail

// `t` converted to dtype `to` (detail::convert_element); t itself (no copy) when it already has
// that dtype.
inline Tensor cast(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  return tenferro::detail::visit_dtype(to, [&]<class T>(T) {
    return tenferro::detail::visit_dtype(t.dtype(), [&]<class S>(S) {
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

// Throws Validation naming the op, the axis and the shape: axis is not an axis of `shape`.
inline void check_axis(std::string_view op, const Shape& shape, std::size_t axis) {
  if (axis >= shape.size()) {
    throw Error(ErrorKind::Validation, std::string(op),
                "axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
                    std::to_string(shape.size()) + " (shape " + format_shape(shape) + ")");
  }
}

// A signed axis of a tensor with `count` axes (negative: from the end) as an index, 0 to count - 1.
// Throws Validation naming the op, the axis and the range.
inline std::size_t normalized_axis(std::int64_t axis, std::size_t count, std::string_view op,
                                   const Shape& shape) {
  const auto n = static_cast<std::int64_t>(count);
  if (count == 0) {
    throw_error(ErrorKind::Validation, op,
                {"axis ", std::to_string(axis), " of a tensor without axes (shape ", shape, ")"});
  }
  if (axis < -n || axis >= n) {
    throw_error(ErrorKind::Validation, op,
                {"axis ", std::to_string(axis), " is out of range for ", count, " axes (-", count, " to ",
                 std::to_string(n - 1), "; shape ", shape, ")"});
  }
  return static_cast<std::size_t>(axis < 0 ? axis + n : axis);
}

// Throws InvalidArgument naming the op for an empty list of inputs.
inline void check_not_empty(std::string_view op, std::size_t count) {
  if (count == 0) throw_error(ErrorKind::InvalidArgument, op, {"the list of inputs is empty"});
}

namespace detail {

// A compact shape around `axis`: element (i, j, k) of [pre, n, post] lies at i + pre (j + n k).
struct axis_split {
  std::size_t pre = 1, n = 1, post = 1;
};
inline axis_split split_at(const Shape& s, std::size_t axis) {
  axis_split a;
  for (std::size_t d = 0; d < s.size(); ++d) (d < axis ? a.pre : d == axis ? a.n : a.post) *= s[d];
  return a;
}

}  // namespace detail

}  // namespace tenferro::cpu
