// Kernels of the complex parts: conj (complex to complex), real, imag and abs (complex to the real
// dtype of the same width), and the 1-or-0 indicator of zeros their derivative rules use.
#pragma once

#include <tenferro/cpu/common.hpp>

#include <tenferro/core/detail/xtensor.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string_view>

namespace tenferro::cpu {

enum class complex_part { conj, real, imag, abs };

// The real dtype of a complex one (c32: f32, c64: f64); any other dtype itself.
constexpr DType real_dtype(DType d) noexcept {
  return d == DType::C32 ? DType::F32 : d == DType::C64 ? DType::F64 : d;
}
// The complex dtype of a floating one (f32: c32, f64: c64); a complex dtype itself.
constexpr DType complex_dtype(DType d) noexcept {
  return d == DType::F32 ? DType::C32 : d == DType::F64 ? DType::C64 : d;
}

namespace detail {

// |z| of n complex elements: sqrt(re^2 + im^2) on xsimd batches; a batch holding a magnitude whose
// square would overflow or underflow (or an infinity, or a NaN) goes through std::abs (hypot,
// scaled), so every element is within an ulp or two of hypot and exact at the edges.
template <class R>
void complex_abs(const std::complex<R>* z, R* out, std::size_t n) {
  using B = xsimd::batch<R>;
  using C = xsimd::batch<std::complex<R>>;
  constexpr std::size_t W = C::size;
  constexpr int scale = std::numeric_limits<R>::max_exponent / 2 - 2;  // 2^scale squared is safe
  const B hi(std::ldexp(R(1), scale)), lo(std::ldexp(R(1), -scale));
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    const C v = C::load_unaligned(z + i);
    const B re = xsimd::abs(v.real()), im = xsimd::abs(v.imag());
    const B m = xsimd::max(re, im);
    if (xsimd::any(!(m <= hi) || (m < lo && m != B(R(0))))) {
      for (std::size_t k = i; k < i + W; ++k) out[k] = std::abs(z[k]);
    } else {
      xsimd::sqrt(xsimd::fma(re, re, im * im)).store_unaligned(out + i);
    }
  }
  for (; i < n; ++i) out[i] = std::abs(z[i]);
}

}  // namespace detail

// Part p of every element of the complex tensor z.
inline Tensor part_of(const Tensor& z, complex_part p, std::string_view op) {
  if (!is_complex(z.dtype())) {
    throw Error(ErrorKind::Unsupported, std::string(op),
                "argument 0 of shape " + format_shape(z.shape()) + " has dtype " +
                    std::string(dtype_name(z.dtype())) + "; this op takes c32, c64");
  }
  return visit_compute<complex_kernels>(z.dtype(), [&]<class C>(C) {
    if constexpr (expr::Complex<C>) {
      using R = typename C::value_type;
      const auto& src = z.array<C>();
      if (p == complex_part::conj) {
        auto out = tenferro::detail::new_array<C>(op, src.shape());
        std::transform(src.data(), src.data() + src.size(), out.data(), [](C v) { return std::conj(v); });
        return Tensor(std::move(out));
      }
      auto out = tenferro::detail::new_array<R>(op, src.shape());
      if (p == complex_part::abs) {
        detail::complex_abs(src.data(), out.data(), src.size());
      } else {
        std::transform(src.data(), src.data() + src.size(), out.data(),
                       [p](C v) { return p == complex_part::real ? v.real() : v.imag(); });
      }
      return Tensor(std::move(out));
    } else {
      return Tensor();  // never: z is complex
    }
  });
}

// 1 where v is 0, else 0, in v's (floating) dtype.
inline Tensor zero_indicator(const Tensor& v) {
  return visit_real(v.dtype(), [&]<class R>(R) {
    const auto& src = v.array<R>();
    auto out = tenferro::detail::new_array<R>("zero_indicator", src.shape());
    std::transform(src.data(), src.data() + src.size(), out.data(),
                   [](R x) { return x == R(0) ? R(1) : R(0); });
    return Tensor(std::move(out));
  });
}

}  // namespace tenferro::cpu
