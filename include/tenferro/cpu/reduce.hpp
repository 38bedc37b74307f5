// Reductions of a Tensor over a set of axes (sum, prod, max, min, mean), the axis validation every
// reducing op shares, and the kernels their derivative rules need.
//
// Axes: std::nullopt reduces every axis (rank-0 result); an empty list reduces none (a copy of
// the input); reduced axes are dropped from the result's shape.
#pragma once

#include <tenferro/cpu/common.hpp>
#include <tenferro/cpu/fused.hpp>
#include <tenferro/expr.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace tenferro::cpu {

enum class Reduce { sum, prod, max, min, mean };

// One flag per axis of `shape`: reduced or not. Throws Validation naming the op, the axis and the
// rank for an axis out of range or listed twice.
inline std::vector<bool> reduce_mask(std::string_view op, const Shape& shape,
                                     const std::optional<Axes>& axes) {
  std::vector<bool> mask(shape.size(), !axes.has_value());
  if (!axes) return mask;
  for (std::size_t axis : *axes) {
    if (axis >= shape.size()) {
      throw Error(ErrorKind::Validation, std::string(op),
                  "axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
                      std::to_string(shape.size()) + " (shape " + format_shape(shape) + ")");
    }
    if (mask[axis]) {
      throw Error(ErrorKind::Validation, std::string(op),
                  "axis " + std::to_string(axis) + " is listed twice (tensor of rank " +
                      std::to_string(shape.size()) + ", shape " + format_shape(shape) + ")");
    }
    mask[axis] = true;
  }
  return mask;
}

// The shape after reducing: reduced axes dropped (or kept with extent 1).
inline Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keep = false) {
  Shape out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  return out;
}

namespace detail {

// Offsets into the reduced (kept-dims) array, per axis of `shape`: 0 on reduced axes.
inline std::vector<std::ptrdiff_t> reduced_strides(const Shape& shape, const std::vector<bool>& mask) {
  const Shape kept = reduced_shape(shape, mask, true);
  auto strides = expr::detail::column_major_strides(kept);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (mask[d]) strides[d] = 0;
  }
  return strides;
}

// Visits every element of x with the offset of its slot in the reduced array.
template <class T, class F>
void for_each_slot(const column_major_array<T>& x, const std::vector<bool>& mask, F&& f) {
  const Shape shape(x.shape().begin(), x.shape().end());
  const T* src = x.data();
  tenferro::detail::for_each_column_major(shape, reduced_strides(shape, mask),
                                          [&](std::size_t k, std::ptrdiff_t slot) { f(src[k], slot, k); });
}

}  // namespace detail

// x reduced over the axes flagged in `mask`. A max or min over an axis of extent 0 has no value
// (no identity to return, as in NumPy and PyTorch): InvalidArgument naming the axis and the shape.
// An empty sum is 0, an empty product 1, an empty mean NaN.
// Dtypes: f32 and f64; i32 and i64 (sum and prod wrap; no mean); bool, whose sum and product count
// in i64 and whose max and min are Bool (any, all); c32 and c64 (sum, prod and mean).
inline Tensor reduce(Reduce r, const Tensor& x_in, const std::vector<bool>& mask, std::string_view op) {
  // Complex values have sums, products and means, no order.
  const bool complex_ok = r != Reduce::max && r != Reduce::min;
  promote(op, std::span(&x_in, 1), {.integers = r != Reduce::mean, .complex = complex_ok});
  if (x_in.dtype() == DType::Bool) {
    if (r == Reduce::sum || r == Reduce::prod) return reduce(r, cast(x_in, DType::I64), mask, op);
    return cast(reduce(r, cast(x_in, DType::I32), mask, op), DType::Bool);
  }
  const Tensor& x = x_in;
  const Shape shape = x.shape();
  if (r == Reduce::max || r == Reduce::min) {
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (mask[d] && shape[d] == 0) {
        throw_error(ErrorKind::InvalidArgument, op,
                    {"axis ", d, " of the input of shape ", shape,
                     " has extent 0: an empty maximum or minimum has no value"});
      }
    }
  }
  const bool all = std::all_of(mask.begin(), mask.end(), [](bool b) { return b; });
  return visit_compute(x.dtype(), [&]<class T>(T) {
    if (all && (r == Reduce::sum || r == Reduce::mean)) {  // the fused SIMD reduction (reads views)
      const Tensor total = fused_kernels<sum_expr>::forward(sum_expr(expr::arg<0>{}), std::span(&x, 1), op);
      if (r == Reduce::sum) return total;
      if constexpr (!std::is_integral_v<T>) {
        using R = expr::real_t<T>;
        if (x.size() == 0) return scalar_tensor<T>(T(std::numeric_limits<R>::quiet_NaN()));
        return scalar_tensor<T>(total.as_slice<T>()[0] / static_cast<R>(x.size()));
      }
    }
    if constexpr (!expr::Complex<T>) {
      if (all && r == Reduce::max) {
        return fused_kernels<max_expr>::forward(max_expr(expr::arg<0>{}), std::span(&x, 1), op);
      }
      if constexpr (std::is_floating_point_v<T>) {  // min = -max(-x) is not exact for integers
        if (all && r == Reduce::min) {
          return fused_kernels<min_expr>::forward(expr::min(expr::arg<0>{}), std::span(&x, 1), op);
        }
      }
    }
    const auto& a = x.array<T>();      // the other reductions walk a compact array
    if constexpr (expr::Complex<T>) {  // a sum, a product or a mean over some axes
      auto out = tenferro::detail::new_array<T>(op, reduced_shape(shape, mask));
      std::fill(out.data(), out.data() + out.size(), r == Reduce::prod ? T(1) : T(0));
      T* acc = out.data();
      if (r == Reduce::prod) {
        detail::for_each_slot(a, mask, [&](T v, std::ptrdiff_t s, std::size_t) { acc[s] *= v; });
        return Tensor(std::move(out));
      }
      detail::for_each_slot(a, mask, [&](T v, std::ptrdiff_t s, std::size_t) { acc[s] += v; });
      if (r == Reduce::mean && out.size() != 0) {
        const auto count = static_cast<expr::real_t<T>>(a.size() / out.size());
        for (std::size_t i = 0; i < out.size(); ++i) acc[i] /= count;
      }
      return Tensor(std::move(out));
    } else {
      using limits = std::numeric_limits<T>;
      const T init = r == Reduce::sum || r == Reduce::mean ? T(0)
                     : r == Reduce::prod                   ? T(1)
                     : r == Reduce::max ? (limits::has_infinity ? -limits::infinity() : limits::lowest())
                                        : (limits::has_infinity ? limits::infinity() : limits::max());
      auto out = tenferro::detail::new_array<T>(op, reduced_shape(shape, mask));
      std::fill(out.data(), out.data() + out.size(), init);
      T* acc = out.data();
      switch (r) {
        case Reduce::sum:
        case Reduce::mean:
          detail::for_each_slot(a, mask, [&](T v, std::ptrdiff_t s, std::size_t) {
            acc[s] = expr::ops::add::scalar(acc[s], v);
          });
          break;
        case Reduce::prod:
          detail::for_each_slot(a, mask, [&](T v, std::ptrdiff_t s, std::size_t) {
            acc[s] = expr::ops::mul::scalar(acc[s], v);
          });
          break;
        case Reduce::max:  // NaN propagates: once a slot holds NaN it keeps it
          detail::for_each_slot(a, mask, [&](T v, std::ptrdiff_t s, std::size_t) {
            if (!(v <= acc[s]) && acc[s] == acc[s]) acc[s] = v;
          });
          break;
        case Reduce::min:
          detail::for_each_slot(a, mask, [&](T v, std::ptrdiff_t s, std::size_t) {
            if (!(v >= acc[s]) && acc[s] == acc[s]) acc[s] = v;
          });
          break;
      }
      if (r == Reduce::mean) {
        const std::size_t kept = out.size();
        const T count = kept == 0 ? T(0) : static_cast<T>(a.size() / kept);
        for (std::size_t i = 0; i < out.size(); ++i) acc[i] /= count;
      }
      return Tensor(std::move(out));
    }
  });
}

// The share of a max/min reduction's cotangent each element of x receives: 1/t at the t elements
// equal to their slot's extremum, 0 elsewhere (ties split evenly, as in the compile-time layer;
// a NaN extremum is shared by the slot's NaN elements). `extremum` is the reduction's result.
inline Tensor extremum_share(const Tensor& x, const Tensor& extremum, const std::vector<bool>& mask) {
  return visit_real(x.dtype(), [&]<class T>(T) {
    const auto& a = x.array<T>();
    const T* m = extremum.array<T>().data();
    auto at = [](T v, T ext) { return v == ext || (v != v && ext != ext); };
    std::vector<T> ties(extremum.size(), T(0));
    detail::for_each_slot(a, mask,
                          [&](T v, std::ptrdiff_t s, std::size_t) { ties[s] += at(v, m[s]) ? T(1) : T(0); });
    auto out = tenferro::detail::new_array<T>("reduce_max/reduce_min vjp", a.shape());
    T* o = out.data();
    detail::for_each_slot(
        a, mask, [&](T v, std::ptrdiff_t s, std::size_t k) { o[k] = at(v, m[s]) ? T(1) / ties[s] : T(0); });
    return Tensor(std::move(out));
  });
}

// For a product reduction: the product of the other elements of each element's slot
// (∂ prod / ∂ x_k), exact where x holds zeros (one zero: the product of the rest at the zero and 0
// elsewhere; two or more: 0 everywhere in the slot).
inline Tensor product_of_others(const Tensor& x, const std::vector<bool>& mask) {
  return visit_compute<complex_kernels>(x.dtype(), [&]<class T>(T) {
    const auto& a = x.array<T>();
    const std::size_t slots = checked_shape_size(reduced_shape(x.shape(), mask)).value_or(0);
    std::vector<T> nonzero(slots, T(1));
    std::vector<std::size_t> zeros(slots, 0);
    detail::for_each_slot(a, mask, [&](T v, std::ptrdiff_t s, std::size_t) {
      if (v == T(0)) {
        ++zeros[s];
      } else {
        nonzero[s] *= v;
      }
    });
    auto out = tenferro::detail::new_array<T>("reduce_prod vjp", a.shape());
    T* o = out.data();
    detail::for_each_slot(a, mask, [&](T v, std::ptrdiff_t s, std::size_t k) {
      o[k] = zeros[s] == 0 ? nonzero[s] / v : zeros[s] == 1 && v == T(0) ? nonzero[s] : T(0);
    });
    return Tensor(std::move(out));
  });
}

// True when any element of x is exactly zero / is negative (never, for a complex x).
inline bool has_zero(const Tensor& x) {
  return tenferro::detail::visit_dtype(x.dtype(), [&]<class T>(T) {
    const auto s = x.as_slice<T>();
    return std::find(s.begin(), s.end(), T(0)) != s.end();
  });
}
inline bool has_negative(const Tensor& x) {
  return tenferro::detail::visit_dtype(x.dtype(), [&]<class T>(T) {
    if constexpr (expr::Complex<T> || std::is_same_v<T, bool>) {
      return false;
    } else {
      const auto s = x.as_slice<T>();
      return std::any_of(s.begin(), s.end(), [](T v) { return v < T(0); });
    }
  });
}

}  // namespace tenferro::cpu
