// Tensor: a dense, column-major tensor whose element type (DType) is chosen at run time, stored in
// an xtensor container.
//
// Ownership: copies share one buffer and are cheap (a reference count). The buffer is
// copy-on-write: mutable_array<T>() first detaches a shared buffer, so writing through one copy
// never changes another. clone() makes an independent deep copy explicitly.
#pragma once

#include <tenferro/core/detail/array.hpp>
#include <tenferro/core/detail/block_pool.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>

#include <algorithm>
#include <array>
#include <complex>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tenferro {

template <Element T>
class TypedTensor;

namespace detail {
// Alternatives in DType order, so variant::index() is the DType.
using tensor_storage =
    std::variant<column_major_array<float>, column_major_array<double>, column_major_array<std::int32_t>,
                 column_major_array<std::int64_t>, column_major_array<bool>,
                 column_major_array<std::complex<float>>, column_major_array<std::complex<double>>>;

// A tensor's storage (the container and its reference count in one block of the pool).
template <class... A>
std::shared_ptr<tensor_storage> make_storage(A&&... args) {
  return std::allocate_shared<tensor_storage>(pool_allocator<tensor_storage>{}, std::forward<A>(args)...);
}

template <Element T>
column_major_array<T> make_array(std::string_view op, const Shape& shape, T value) {
  column_major_array<T> a = new_array<T>(op, shape);
  std::fill(a.storage().begin(), a.storage().end(), value);
  return a;
}

template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32:
      return f(float{});
    case DType::F64:
      return f(double{});
    case DType::I32:
      return f(std::int32_t{});
    case DType::I64:
      return f(std::int64_t{});
    case DType::Bool:
      return f(bool{});
    case DType::C32:
      return f(std::complex<float>{});
    case DType::C64:
      return f(std::complex<double>{});
  }
  throw Error(ErrorKind::InvalidArgument, "visit_dtype", "unknown dtype");
}
}  // namespace detail

class Tensor {
 public:
  // An empty f64 tensor of shape [0].
  Tensor()
      : storage_(detail::make_storage(detail::new_array<double>("Tensor", std::array<std::size_t, 1>{0}))) {}

  // Takes ownership of an xtensor container (moved, not copied).
  template <Element T>
  explicit Tensor(column_major_array<T> array) : storage_(detail::make_storage(std::move(array))) {}

  // `data` lists the elements in column-major order (the first index varies fastest).
  // Shape {} is a rank-0 scalar holding one value. Throws ShapeMismatch when the product of the
  // shape differs from data.size(), InvalidArgument when the shape breaks the size rule
  // (checked_shape_size).
  template <Element T>
  static Tensor from_vec_col_major(Shape shape, std::vector<T> data) {
    constexpr std::string_view op = "Tensor::from_vec_col_major";
    const auto n = checked_shape_size(shape);
    if (!n) detail::throw_shape_too_large(op, shape);
    if (*n != data.size()) {
      throw Error(ErrorKind::ShapeMismatch, std::string(op),
                  "argument 'data' has " + std::to_string(data.size()) + " elements, shape " +
                      format_shape(shape) + " needs " + std::to_string(*n));
    }
    auto array = detail::new_array<T>(op, shape);
    std::copy(data.begin(), data.end(), array.storage().begin());
    return Tensor(std::move(array));
  }
  template <Element T>
  static Tensor from_vec_col_major(Shape shape, std::initializer_list<T> data) {
    return from_vec_col_major(std::move(shape), std::vector<T>(data));
  }

  // A tensor of dtype T and shape `extents` (any range of sizes) whose elements are left
  // uninitialized, for a kernel that writes every one of them. Throws InvalidArgument when the
  // shape breaks the size rule (checked_shape_size), ResourceExhausted when its memory cannot be
  // allocated; both name `op`.
  template <Element T, class Extents>
  static Tensor for_overwrite(const Extents& extents, std::string_view op = "Tensor::for_overwrite") {
    const auto shape = detail::container_shape<T>(extents);  // built in place: no container move
    return detail::allocating<T>(op, {shape.data(), shape.size()}, [&] {
      return Tensor(detail::make_storage(std::in_place_type<column_major_array<T>>, shape));
    });
  }

  // A tensor of `shape` filled with `value` converted to `dtype` (for Bool: value != 0).
  // Throws as for_overwrite.
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F64) {
    return detail::visit_dtype(dtype, [&]<class T>(T) {
      if constexpr (std::is_same_v<T, bool>) {
        return Tensor(detail::make_array<T>("Tensor::full", shape, value != 0.0));
      } else {
        return Tensor(detail::make_array<T>("Tensor::full", shape, static_cast<T>(value)));
      }
    });
  }
  static Tensor zeros(const Shape& shape, DType dtype = DType::F64) { return full(shape, 0.0, dtype); }
  static Tensor ones(const Shape& shape, DType dtype = DType::F64) { return full(shape, 1.0, dtype); }

  DType dtype() const noexcept { return static_cast<DType>(storage_->index()); }
  Shape shape() const {
    return std::visit([](const auto& a) { return Shape(a.shape().begin(), a.shape().end()); }, *storage_);
  }
  // The shape as a view of the container's own extents (no copy); valid while this Tensor lives
  // and is not written to (a write may detach the buffer).
  std::span<const std::size_t> extents() const noexcept {
    return std::visit(
        [](const auto& a) { return std::span<const std::size_t>(a.shape().data(), a.shape().size()); },
        *storage_);
  }
  std::size_t rank() const noexcept {
    return std::visit([](const auto& a) { return a.dimension(); }, *storage_);
  }
  std::size_t size() const noexcept {
    return std::visit([](const auto& a) { return a.size(); }, *storage_);
  }

  // The elements in column-major (storage) order. Throws DtypeMismatch unless T is dtype().
  template <Element T>
  std::span<const T> as_slice() const {
    const auto& a = array<T>();
    return {a.data(), a.size()};
  }

  // The typed xtensor container, without a copy: the view the compile-time layer evaluates.
  // Throws DtypeMismatch unless T is dtype().
  template <Element T>
  const column_major_array<T>& array() const {
    check_dtype<T>("Tensor::array");
    return std::get<column_major_array<T>>(*storage_);
  }

  // Writable container; detaches the buffer first when another Tensor shares it.
  template <Element T>
  column_major_array<T>& mutable_array() {
    check_dtype<T>("Tensor::mutable_array");
    if (storage_.use_count() > 1) storage_ = detail::make_storage(*storage_);
    return std::get<column_major_array<T>>(*storage_);
  }

  // A typed handle on the same buffer (no copy). Throws DtypeMismatch unless T is dtype().
  template <Element T>
  TypedTensor<T> typed() const;

  // An independent deep copy.
  Tensor clone() const {
    Tensor out = *this;
    out.storage_ = detail::make_storage(*storage_);
    return out;
  }

  bool shares_storage_with(const Tensor& other) const noexcept { return storage_ == other.storage_; }

 private:
  template <Element T>
  void check_dtype(std::string_view op) const {
    if (dtype() != dtype_of<T>) {
      throw Error(ErrorKind::DtypeMismatch, std::string(op),
                  "requested element type " + std::string(dtype_name(dtype_of<T>)) +
                      " but the tensor of shape " + format_shape(shape()) + " holds " +
                      std::string(dtype_name(dtype())));
    }
  }

  explicit Tensor(std::shared_ptr<detail::tensor_storage> storage) : storage_(std::move(storage)) {}

  std::shared_ptr<detail::tensor_storage> storage_;
};

}  // namespace tenferro
