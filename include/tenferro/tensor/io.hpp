// Printing: `std::cout << tensor` shows the dtype, the shape and the values, nested by the first
// index like NumPy (element (i, j) is row i, column j), whatever the storage order. Tensors with
// more than 1000 elements show the first and last three entries of each axis.
#pragma once

#include <tenferro/tensor/tensor.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include <ostream>

namespace tenferro {
namespace detail {

template <class T>
void print_element(std::ostream& os, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>) {
    os << v;
  } else if constexpr (is_complex(dtype_of<T>)) {
    print_element(os, v.real());
    os << (v.imag() < 0 ? "-" : "+");
    print_element(os, v.imag() < 0 ? -v.imag() : v.imag());
    os << "i";
  } else {
    os << v;
  }
}

template <class T>
void print_axis(std::ostream& os, const column_major_array<T>& a, std::size_t axis, std::size_t offset,
                std::size_t stride_of_axis, bool summarize) {
  // In column-major order the stride of axis d is the product of the extents before it.
  const auto& shape = a.shape();
  const std::size_t n = shape[axis];
  constexpr std::size_t edge = 3;
  os << "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * edge && i == edge) {
      os << ", ...";
      i = n - edge - 1;
      continue;
    }
    if (i != 0) os << ", ";
    if (axis + 1 == shape.size()) {
      print_element(os, a.data()[offset + i * stride_of_axis]);
    } else {
      print_axis(os, a, axis + 1, offset + i * stride_of_axis, stride_of_axis * n, summarize);
    }
  }
  os << "]";
}

}  // namespace detail

inline std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  os << "Tensor(dtype=" << t.dtype() << ", shape=" << format_shape(t.shape()) << ", values=";
  detail::visit_dtype(t.dtype(), [&]<class T>(T) {
    const auto& a = t.array<T>();
    if (a.dimension() == 0) {
      detail::print_element(os, a.data()[0]);
    } else {
      detail::print_axis(os, a, 0, 0, 1, a.size() > 1000);
    }
  });
  return os << ")";
}

template <Element T>
std::ostream& operator<<(std::ostream& os, const TypedTensor<T>& t) {
  return os << t.tensor();
}

}  // namespace tenferro
