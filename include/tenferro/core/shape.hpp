// Shape: the extents of a column-major tensor, and helpers to print and count them.
#pragma once

#include <tenferro/core/error.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tenferro {

using Shape = std::vector<std::size_t>;

// "[2, 3]"; a rank-0 shape prints as "[]".
inline std::string format_shape(std::span<const std::size_t> shape) {
  std::string out;
  detail::append_shape(out, shape);
  return out;
}

// Number of elements (1 for rank 0), or nullopt when the product overflows std::size_t.
inline std::optional<std::size_t> checked_shape_size(std::span<const std::size_t> shape) noexcept {
  std::size_t n = 1;
  for (std::size_t extent : shape) {
    if (extent != 0 && n > static_cast<std::size_t>(-1) / extent) return std::nullopt;
    n *= extent;
  }
  return n;
}

}  // namespace tenferro
