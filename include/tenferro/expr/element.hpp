// The element types the compile-time layer computes in: Real (float, double), Integer (i32, i64,
// ops/integer.hpp) and Complex (std::complex of a Real, ops/complex.hpp).
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

namespace tenferro::expr {

template <class T>
concept Real = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class T>
concept Integer = std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;
template <class T>
concept Complex = std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>;
template <class T>
concept Number = Real<T> || Integer<T> || Complex<T>;

// The real type of T: R for std::complex<R>, else T.
template <class T>
struct real_of {
  using type = T;
};
template <class R>
struct real_of<std::complex<R>> {
  using type = R;
};
template <class T>
using real_t = typename real_of<T>::type;

}  // namespace tenferro::expr
