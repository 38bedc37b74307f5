// new_array: the one way tenferro makes an array (a Tensor's storage, a kernel's output, a result
// of the compile-time layer). The shape is checked by the one size rule (checked_shape_size), and
// an allocation failure becomes a tenferro::Error naming the op, the shape and the bytes asked for.
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>

#include <cstddef>
#include <iterator>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace tenferro::detail {

// Throws ResourceExhausted with the allocation failure being handled (call from its catch block)
// nested as the cause.
[[noreturn, gnu::cold]] TENFERRO_NOINLINE inline void throw_allocation_failed(
    std::string_view op, std::span<const std::size_t> shape, std::size_t elements,
    std::size_t element_bytes) {
  std::string detail = "allocating ";
  if (elements > static_cast<std::size_t>(-1) / element_bytes) {
    append_number(detail, elements);
    detail += " elements of ";
    append_number(detail, element_bytes);
    detail += " bytes (more than size_t holds)";
  } else {
    append_number(detail, elements * element_bytes);
    detail += " bytes";
  }
  detail += " for shape ";
  append_shape(detail, shape);
  detail += " failed";
  Error::throw_with_cause(Error(ErrorKind::ResourceExhausted, std::string(op), std::move(detail)));
}

// make() (which allocates the elements of an array of `shape`, of T) checked by the size rule,
// its allocation failure turned into ResourceExhausted.
template <class T, class Make>
auto allocating(std::string_view op, std::span<const std::size_t> shape, Make&& make) -> decltype(make()) {
  const auto n = checked_shape_size(shape);
  if (!n) throw_shape_too_large(op, shape);
  try {
    return make();
  } catch (const std::bad_alloc&) {
    throw_allocation_failed(op, shape, *n, sizeof(T));
  }
}

// The container shape of `extents` (any range of sizes).
template <class T, class Extents>
typename column_major_array<T>::shape_type container_shape(const Extents& extents) {
  return typename column_major_array<T>::shape_type(std::begin(extents), std::end(extents));
}

// An array of `extents` whose elements are left uninitialized.
template <class T, class Extents>
column_major_array<T> new_array(std::string_view op, const Extents& extents) {
  const auto shape = container_shape<T>(extents);
  return allocating<T>(op, {shape.data(), shape.size()}, [&] { return column_major_array<T>(shape); });
}

}  // namespace tenferro::detail
