// Kernels of the complex parts: conj (complex to complex), real, imag and abs (complex to the real
// dtype of the same width), and the 1-or-0 indicator of zeros their derivative rules use.
#pragma once

#include <tenferro/cpu/common.hpp>

#include <algorithm>
#include <complex>
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
      std::transform(src.data(), src.data() + src.size(), out.data(), [p](C v) {
        return p == complex_part::real ? v.real() : p == complex_part::imag ? v.imag() : std::abs(v);
      });
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
