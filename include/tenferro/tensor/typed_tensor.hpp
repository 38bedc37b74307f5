// TypedTensor<T>: a Tensor whose element type is known at compile time, with element access by
// multi-index. It shares the Tensor's buffer (no copy) and the same copy-on-write rule.
#pragma once

#include <tenferro/tensor/tensor.hpp>

#include <array>
#include <concepts>
#include <string>

namespace tenferro {

namespace detail {
// The elements of a tensor where they lie (a view's too), in the terms of an xtensor container
// (data, shape, strides), which is how the compile-time layer reads a TypedTensor: a contiguous one
// in place, any other through one strided copy. Valid while the tensor lives.
template <Element T>
struct strided_elements {
  using value_type = T;
  const T* pointer;
  std::span<const std::size_t> extents;
  std::span<const std::ptrdiff_t> steps;

  const T* data() const noexcept { return pointer; }
  std::span<const std::size_t> shape() const noexcept { return extents; }
  std::span<const std::ptrdiff_t> strides() const noexcept { return steps; }
  std::size_t dimension() const noexcept { return extents.size(); }
  std::size_t size() const noexcept { return checked_shape_size(extents).value_or(0); }
};
}  // namespace detail

template <Element T>
class TypedTensor {
 public:
  using value_type = T;

  // Throws DtypeMismatch unless tensor.dtype() is dtype_of<T>.
  explicit TypedTensor(Tensor tensor) : tensor_(std::move(tensor)) { (void)tensor_.data<T>(); }

  static TypedTensor from_vec_col_major(Shape shape, std::vector<T> data) {
    return TypedTensor(Tensor::from_vec_col_major<T>(std::move(shape), std::move(data)));
  }

  const Tensor& tensor() const noexcept { return tensor_; }
  Shape shape() const { return tensor_.shape(); }
  std::size_t rank() const noexcept { return tensor_.rank(); }
  std::size_t size() const noexcept { return tensor_.size(); }
  static constexpr DType dtype() noexcept { return dtype_of<T>; }

  const column_major_array<T>& array() const { return tensor_.array<T>(); }
  column_major_array<T>& mutable_array() { return tensor_.mutable_array<T>(); }
  std::span<const T> as_slice() const { return tensor_.as_slice<T>(); }
  // The elements where they lie, without a copy (views included).
  detail::strided_elements<T> elements() const {
    return {tensor_.data<T>(), tensor_.extents(), tensor_.stored_strides()};
  }

  // Element at a multi-index, one index per dimension; throws Validation when the number of
  // indices differs from rank() or an index is out of range.
  template <std::convertible_to<std::size_t>... I>
  const T& operator()(I... index) const {
    return at(std::array<std::size_t, sizeof...(I)>{static_cast<std::size_t>(index)...});
  }
  const T& at(std::span<const std::size_t> index) const { return tensor_.data<T>()[offset(index)]; }
  void set(std::span<const std::size_t> index, T value) {
    (void)offset(index);               // validates before a view is compacted
    T* data = mutable_array().data();  // compact (not a view) from here on
    data[offset(index)] = value;
  }

 private:
  // The element's place, from data<T>().
  std::ptrdiff_t offset(std::span<const std::size_t> index) const {
    const auto shape = tensor_.extents();
    auto fail = [&](const std::string& what) {
      throw Error(ErrorKind::Validation, "TypedTensor::at",
                  what + " for a tensor of shape " + format_shape(Shape(shape.begin(), shape.end())));
    };
    if (index.size() != shape.size()) {
      fail("got " + std::to_string(index.size()) + " indices");
    }
    const std::span<const std::ptrdiff_t> strides =
        tensor_.is_view() ? tensor_.stored_strides() : std::span<const std::ptrdiff_t>{};
    std::ptrdiff_t k = 0;
    std::ptrdiff_t stride = 1;  // column-major, unless a view
    for (std::size_t d = 0; d < index.size(); ++d) {
      if (index[d] >= shape[d]) {
        fail("index " + std::to_string(index[d]) + " on axis " + std::to_string(d) + " is out of range");
      }
      k += static_cast<std::ptrdiff_t>(index[d]) * (strides.empty() ? stride : strides[d]);
      stride *= static_cast<std::ptrdiff_t>(shape[d]);
    }
    return k;
  }

  Tensor tensor_;
};

template <Element T>
TypedTensor<T> Tensor::typed() const {
  return TypedTensor<T>(*this);
}

}  // namespace tenferro
