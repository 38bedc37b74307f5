// Kernels along one axis: running sums (cumsum, either way) and the position of each slot's
// extremum (argmax, argmin).
#pragma once

#include <tenferro/cpu/common.hpp>

#include <cmath>
#include <type_traits>

namespace tenferro::cpu {

namespace detail {

template <class T>
T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

}  // namespace detail

// The running sums of x along `axis`, from the first element (or, `reverse`, from the last): the
// same shape. Integers wrap; bool counts in i64; every other dtype keeps its own.
inline Tensor cumsum(const Tensor& x, std::size_t axis, bool reverse, std::string_view op) {
  check_axis(op, x.shape(), axis);
  const Tensor in = x.dtype() == DType::Bool ? cast(x, DType::I64) : x;
  return visit_compute(in.dtype(), [&]<class T>(T) {
    const T* src = in.as_slice<T>().data();
    auto out = tenferro::detail::new_array<T>(op, in.shape());
    T* dst = out.data();
    const auto [pre, n, post] = detail::split_at(in.shape(), axis);
    for (std::size_t k = 0; k < post; ++k) {
      for (std::size_t step = 0; step < n; ++step) {
        const std::size_t j = reverse ? n - 1 - step : step;
        const std::size_t at = pre * (j + n * k);
        if (step == 0) {
          std::copy(src + at, src + at + pre, dst + at);
          continue;
        }
        const std::size_t prev = pre * ((reverse ? j + 1 : j - 1) + n * k);
        for (std::size_t i = 0; i < pre; ++i) dst[at + i] = detail::wrapping_add(dst[prev + i], src[at + i]);
      }
    }
    return Tensor(std::move(out));
  });
}

// For each slot along `axis`, the index of its largest (`max`) or smallest element, as i64 of the
// shape without that axis: the first one on ties; a NaN counts as the extremum (the first NaN).
// Real, integer and bool inputs; complex ones are Unsupported; an axis of extent 0 has no
// extremum (InvalidArgument).
inline Tensor arg_extremum(const Tensor& x, std::size_t axis, bool max, std::string_view op) {
  check_axis(op, x.shape(), axis);
  promote(op, std::span(&x, 1), integer_kernels);
  if (x.shape()[axis] == 0) {
    throw Error(ErrorKind::InvalidArgument, std::string(op),
                "axis " + std::to_string(axis) + " of shape " + format_shape(x.shape()) +
                    " is empty: an empty slot has no extremum");
  }
  const Tensor in = x.dtype() == DType::Bool ? cast(x, DType::I32) : x;
  Shape out_shape = in.shape();
  out_shape.erase(out_shape.begin() + static_cast<std::ptrdiff_t>(axis));
  auto out = tenferro::detail::new_array<std::int64_t>(op, out_shape);
  visit_compute<integer_kernels>(in.dtype(), [&]<class T>(T) {
    const T* src = in.as_slice<T>().data();
    const auto [pre, n, post] = detail::split_at(in.shape(), axis);
    std::vector<T> best(pre);
    for (std::size_t k = 0; k < post; ++k) {
      std::int64_t* index = out.data() + pre * k;
      std::copy(src + pre * n * k, src + pre * n * k + pre, best.begin());
      std::fill(index, index + pre, 0);
      for (std::size_t j = 1; j < n; ++j) {
        const T* row = src + pre * (j + n * k);
        for (std::size_t i = 0; i < pre; ++i) {
          const T v = row[i];
          bool better = max ? v > best[i] : v < best[i];
          if constexpr (std::is_floating_point_v<T>)
            better = !std::isnan(best[i]) && (better || std::isnan(v));
          if (better) best[i] = v, index[i] = static_cast<std::int64_t>(j);
        }
      }
    }
  });
  return Tensor(std::move(out));
}

// m where it is finite, else 0 (the shift of a stable log-sum-exp), floating dtypes.
inline Tensor finite_or_zero(const Tensor& m) {
  return visit_real(m.dtype(), [&]<class T>(T) {
    const auto src = m.as_slice<T>();
    auto out = tenferro::detail::new_array<T>("reduce_logsumexp", m.shape());
    for (std::size_t i = 0; i < src.size(); ++i) out.data()[i] = std::isfinite(src[i]) ? src[i] : T(0);
    return Tensor(std::move(out));
  });
}

}  // namespace tenferro::cpu
