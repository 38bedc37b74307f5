// DType: the element types a dynamic Tensor can hold, their names and sizes, and the mapping
// between C++ element types and DType values.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

namespace tenferro {

// The order is part of the ABI of Tensor's storage: Tensor keeps one xtensor container per
// alternative in this order.
enum class DType : std::uint8_t { F32, F64, I32, I64, Bool, C32, C64 };

inline constexpr std::size_t dtype_count = 7;

// Short lower-case name: "f32", "f64", "i32", "i64", "bool", "c32" (complex<float>),
// "c64" (complex<double>).
constexpr std::string_view dtype_name(DType d) noexcept {
  switch (d) {
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::Bool:
      return "bool";
    case DType::C32:
      return "c32";
    case DType::C64:
      return "c64";
  }
  return "unknown";
}

// Size of one element in bytes.
constexpr std::size_t dtype_size(DType d) noexcept {
  switch (d) {
    case DType::F32:
      return sizeof(float);
    case DType::F64:
      return sizeof(double);
    case DType::I32:
      return sizeof(std::int32_t);
    case DType::I64:
      return sizeof(std::int64_t);
    case DType::Bool:
      return sizeof(bool);
    case DType::C32:
      return sizeof(std::complex<float>);
    case DType::C64:
      return sizeof(std::complex<double>);
  }
  return 0;
}

constexpr bool is_floating(DType d) noexcept { return d == DType::F32 || d == DType::F64; }
constexpr bool is_complex(DType d) noexcept { return d == DType::C32 || d == DType::C64; }
constexpr bool is_integer(DType d) noexcept { return d == DType::I32 || d == DType::I64; }

// The dtype of a binary op's result on operands of dtypes a and b (PyTorch's rule for tensors of
// any rank). Categories Bool < integers < floating < complex: the higher category wins; within a
// category the wider dtype wins; a complex result is wide enough for a floating operand
// (c32 with f64 gives c64), and an integer operand never widens a floating or complex one
// (i64 with f32 gives f32). docs/eager.md has the whole table.
constexpr DType promote_types(DType a, DType b) noexcept {
  auto category = [](DType d) { return d == DType::Bool ? 0 : is_integer(d) ? 1 : is_floating(d) ? 2 : 3; };
  auto wide = [](DType d) { return d == DType::F64 || d == DType::I64 || d == DType::C64; };
  const int ca = category(a), cb = category(b);
  if (ca == cb) return wide(b) ? b : a;
  const DType hi = ca > cb ? a : b, lo = ca > cb ? b : a;
  if (is_complex(hi) && lo == DType::F64) return DType::C64;
  return hi;
}

inline std::ostream& operator<<(std::ostream& os, DType d) { return os << dtype_name(d); }

// Element: the C++ types a Tensor can hold.
template <class T>
concept Element = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, bool> || std::is_same_v<T, std::complex<float>> ||
    std::is_same_v<T, std::complex<double>>;

// M(T) for each Element type, in DType order (for explicit instantiations).
#define TENFERRO_FOR_EACH_ELEMENT(M) \
  M(float) M(double) M(std::int32_t) M(std::int64_t) M(bool) M(std::complex<float>) M(std::complex<double>)

template <Element T>
inline constexpr DType dtype_of = std::is_same_v<T, float>                 ? DType::F32
                                  : std::is_same_v<T, double>              ? DType::F64
                                  : std::is_same_v<T, std::int32_t>        ? DType::I32
                                  : std::is_same_v<T, std::int64_t>        ? DType::I64
                                  : std::is_same_v<T, bool>                ? DType::Bool
                                  : std::is_same_v<T, std::complex<float>> ? DType::C32
                                                                           : DType::C64;

}  // namespace tenferro
