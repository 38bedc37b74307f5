// Tensor: a column-major tensor whose element type (DType) is chosen at run time, stored in an
// xtensor container (its buffer), or a strided view of another tensor's buffer.
//
// Ownership: copies share one buffer and are cheap (a reference count). The buffer is
// copy-on-write: mutable_array<T>() first detaches a shared buffer, so writing through one copy
// never changes another. clone() makes an independent deep copy explicitly.
//
// Views: as_strided() (and the transpose, reshape and broadcast_to built on it) makes a tensor that
// reads the same buffer through its own shape, strides and offset, copying nothing. A view is
// read-only in the sense of copy-on-write: mutable_array<T>() gives it a compact buffer of its own
// first. What needs the elements as a column-major container (array<T>(), and as_slice<T>() of a
// view that is not contiguous) compacts the view once, on first use, and keeps that copy with the
// view (thread-safe); materialized() does so explicitly.
#pragma once

#include <tenferro/core/detail/array.hpp>
#include <tenferro/core/detail/block_pool.hpp>
#include <tenferro/core/detail/strided_copy.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <complex>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
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
decltype(auto) visit_dtype(DType dtype, F&& f);

// Where a view's elements lie in its buffer, and the compact copy of them made on first need.
struct view_layout {
  Shape shape;
  Strides strides;
  std::ptrdiff_t offset = 0;
  mutable std::mutex compacting;
  mutable std::atomic<bool> compacted{false};
  mutable std::shared_ptr<tensor_storage> compact;
};

// The elements of a view, column-major, in a buffer of their own.
std::shared_ptr<tensor_storage> compact_copy(const tensor_storage& buffer, const view_layout& view);

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
  Tensor();

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
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F64);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F64) { return full(shape, 0.0, dtype); }
  static Tensor ones(const Shape& shape, DType dtype = DType::F64) { return full(shape, 1.0, dtype); }

  DType dtype() const noexcept { return static_cast<DType>(storage_->index()); }
  Shape shape() const {
    const auto e = extents();
    return Shape(e.begin(), e.end());
  }
  // The shape as a view of the tensor's own extents (no copy); valid while this Tensor lives
  // and is not written to (a write may detach the buffer).
  std::span<const std::size_t> extents() const noexcept;
  std::size_t rank() const noexcept { return extents().size(); }
  std::size_t size() const noexcept;

  // Per axis, the distance in elements between neighbours in the buffer: column_major_strides of
  // the shape unless this is a view (0 on a broadcast axis).
  Strides strides() const { return view_ ? view_->strides : column_major_strides(extents()); }
  // The strides as stored, without a copy: a view's own, else the container's (which has 0 on an
  // axis of extent 1, where a stride never matters). Valid while this Tensor lives unchanged.
  std::span<const std::ptrdiff_t> stored_strides() const noexcept;
  // Where element [0, ..., 0] lies in the buffer (0 unless this is a view).
  std::ptrdiff_t offset() const noexcept { return view_ ? view_->offset : 0; }
  // True when this tensor reads a buffer through its own shape, strides and offset.
  bool is_view() const noexcept { return view_ != nullptr; }
  // True when the elements lie densely in column-major order from offset() (axes of extent 1 may
  // have any stride); as_slice<T>() of such a tensor is a span of the buffer itself.
  bool is_contiguous() const noexcept;

  // A view of this tensor's buffer (no copy): element [i_0, ..., i_r] of the result is element
  // offset + sum_d i_d * strides[d] of the buffer (offsets count elements of the whole buffer,
  // whatever view this tensor is). Throws InvalidArgument naming the shape, strides and offset
  // when strides and shape differ in rank, the shape breaks the size rule, or an element would lie
  // outside the buffer.
  Tensor as_strided(Shape shape, Strides strides, std::ptrdiff_t offset) const;

  // The elements in column-major order, in a buffer of this tensor's shape: the tensor itself
  // unless it is a view, else the view's compact copy (made once).
  Tensor materialized() const { return view_ ? Tensor(compact_storage()) : *this; }

  // The elements in column-major order: a span of the buffer when is_contiguous(), else of the
  // compact copy. Throws DtypeMismatch unless T is dtype().
  template <Element T>
  std::span<const T> as_slice() const {
    check_dtype<T>("Tensor::as_slice");
    if (view_ && is_contiguous()) return {data<T>(), size()};
    const auto& a = array<T>();
    return {a.data(), a.size()};
  }

  // The buffer's element at offset(): element i of the tensor is at data<T>()[sum_d i_d *
  // strides()[d]]. Throws DtypeMismatch unless T is dtype().
  template <Element T>
  const T* data() const {
    check_dtype<T>("Tensor::data");
    return std::get<column_major_array<T>>(*storage_).data() + offset();
  }

  // The typed xtensor container, without a copy unless this is a view (then its compact copy):
  // the array the compile-time layer evaluates. Throws DtypeMismatch unless T is dtype().
  template <Element T>
  const column_major_array<T>& array() const {
    check_dtype<T>("Tensor::array");
    return std::get<column_major_array<T>>(view_ ? *compact_storage() : *storage_);
  }

  // Writable container; detaches the buffer first when another Tensor shares it, and gives a view
  // a compact buffer of its own.
  template <Element T>
  column_major_array<T>& mutable_array() {
    check_dtype<T>("Tensor::mutable_array");
    if (view_) {  // the view's compact copy, taken over when no other copy of the view shares it
      std::shared_ptr<detail::tensor_storage> compact = compact_storage();
      view_.reset();
      storage_ = std::move(compact);
    }
    if (storage_.use_count() > 1) storage_ = detail::make_storage(*storage_);
    return std::get<column_major_array<T>>(*storage_);
  }

  // A typed handle on the same buffer (no copy). Throws DtypeMismatch unless T is dtype().
  template <Element T>
  TypedTensor<T> typed() const;

  // An independent deep copy (compact).
  Tensor clone() const;

  // True when both read one buffer (a view and the tensor it views, or two copies).
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

  std::size_t buffer_size() const noexcept;

  const std::shared_ptr<detail::tensor_storage>& compact_storage() const;

  explicit Tensor(std::shared_ptr<detail::tensor_storage> storage) : storage_(std::move(storage)) {}

  std::shared_ptr<detail::tensor_storage> storage_;
  std::shared_ptr<const detail::view_layout> view_;  // null: the whole buffer, column-major
};

#if !TENFERRO_HEADER_ONLY  // instantiated once by <tenferro/separate_compilation.hpp>
#define TENFERRO_TENSOR_FACTORY(T) \
  extern template Tensor Tensor::from_vec_col_major<T>(Shape, std::vector<T>);
TENFERRO_FOR_EACH_ELEMENT(TENFERRO_TENSOR_FACTORY)
#undef TENFERRO_TENSOR_FACTORY
#else  // else compiled once by <tenferro/separate_compilation.hpp>

namespace detail {
TENFERRO_INLINE std::shared_ptr<tensor_storage> compact_copy(const tensor_storage& buffer,
                                                             const view_layout& view) {
  return std::visit(
      [&]<class T>(const column_major_array<T>& a) {
        auto out = new_array<T>("Tensor::materialized", view.shape);
        copy_to_compact(a.data() + view.offset, view.shape, view.strides, out.data());
        return make_storage(std::move(out));
      },
      buffer);
}

// True when `strides` step through `shape` densely in column-major order (an axis of extent 1 may
// have any stride; an empty shape is dense).
TENFERRO_INLINE bool dense_column_major(std::span<const std::size_t> shape,
                                        std::span<const std::ptrdiff_t> strides) noexcept {
  std::ptrdiff_t expected = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return true;
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= static_cast<std::ptrdiff_t>(shape[d]);
  }
  return true;
}
}  // namespace detail

TENFERRO_INLINE Tensor::Tensor()
    : storage_(detail::make_storage(detail::new_array<double>("Tensor", std::array<std::size_t, 1>{0}))) {}

TENFERRO_INLINE Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  return detail::visit_dtype(dtype, [&]<class T>(T) {
    if constexpr (std::is_same_v<T, bool>) {
      return Tensor(detail::make_array<T>("Tensor::full", shape, value != 0.0));
    } else {
      return Tensor(detail::make_array<T>("Tensor::full", shape, static_cast<T>(value)));
    }
  });
}

TENFERRO_INLINE std::span<const std::size_t> Tensor::extents() const noexcept {
  if (view_) return view_->shape;
  return std::visit(
      [](const auto& a) { return std::span<const std::size_t>(a.shape().data(), a.shape().size()); },
      *storage_);
}

TENFERRO_INLINE std::size_t Tensor::size() const noexcept {
  if (view_) return checked_shape_size(view_->shape).value_or(0);
  return std::visit([](const auto& a) { return a.size(); }, *storage_);
}

TENFERRO_INLINE std::span<const std::ptrdiff_t> Tensor::stored_strides() const noexcept {
  if (view_) return view_->strides;
  return std::visit(
      [](const auto& a) { return std::span<const std::ptrdiff_t>(a.strides().data(), a.strides().size()); },
      *storage_);
}

TENFERRO_INLINE bool Tensor::is_contiguous() const noexcept {
  return !view_ || detail::dense_column_major(view_->shape, view_->strides);
}

TENFERRO_INLINE Tensor Tensor::as_strided(Shape shape, Strides strides, std::ptrdiff_t offset) const {
  constexpr std::string_view op = "Tensor::as_strided";
  const auto n = checked_shape_size(shape);
  if (!n) detail::throw_shape_too_large(op, shape);
  const auto buffer = static_cast<std::ptrdiff_t>(buffer_size());
  auto refuse = [&](std::string_view why) {
    std::string list;
    for (std::ptrdiff_t s : strides) list += (list.empty() ? "" : ", ") + std::to_string(s);
    throw_error(ErrorKind::InvalidArgument, op,
                {"shape ", shape, " with strides [", list, "] and offset ", std::to_string(offset), " ", why,
                 " (the buffer holds ", std::to_string(buffer), " elements)"});
  };
  if (strides.size() != shape.size()) refuse("differ in rank");
  // The first element inside the buffer (an empty view may start at its end); from there each
  // axis moves by at most `buffer`, so nothing below overflows.
  if (offset < 0 || offset > buffer || (*n != 0 && offset == buffer)) refuse("reach outside the buffer");
  if (*n != 0) {
    std::ptrdiff_t low = offset, high = offset;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const auto steps = static_cast<std::ptrdiff_t>(shape[d] - 1);  // fits: the size rule holds
      const std::ptrdiff_t stride = strides[d];
      if (steps != 0 && (stride > buffer / steps || stride < -(buffer / steps))) {
        refuse("reach outside the buffer");
      }
      (stride < 0 ? low : high) += stride * steps;
      if (low < 0 || high >= buffer) refuse("reach outside the buffer");
    }
  }
  // The whole buffer in its own column-major layout is the buffer itself, not a view (a transpose
  // by the identity, a reshape to the buffer's shape): materialized() then copies nothing.
  const bool whole =
      offset == 0 && detail::dense_column_major(shape, strides) &&
      std::visit([&](const auto& a) { return std::ranges::equal(a.shape(), shape); }, *storage_);
  if (whole) return Tensor(storage_);
  Tensor out(storage_);
  auto view = std::make_shared<detail::view_layout>();
  view->shape = std::move(shape);
  view->strides = std::move(strides);
  view->offset = offset;
  out.view_ = std::move(view);
  return out;
}

TENFERRO_INLINE Tensor Tensor::clone() const {
  return Tensor(view_ ? detail::compact_copy(*storage_, *view_) : detail::make_storage(*storage_));
}

TENFERRO_INLINE std::size_t Tensor::buffer_size() const noexcept {
  return std::visit([](const auto& a) { return a.size(); }, *storage_);
}

TENFERRO_INLINE const std::shared_ptr<detail::tensor_storage>& Tensor::compact_storage() const {
  // Double-checked: made once, under a lock that nothing else is taken or awaited under (the
  // copy is a plain loop); an allocation failure leaves it to be tried again.
  if (!view_->compacted.load(std::memory_order_acquire)) {
    const std::lock_guard lock(view_->compacting);
    if (!view_->compacted.load(std::memory_order_relaxed)) {
      view_->compact = detail::compact_copy(*storage_, *view_);
      view_->compacted.store(true, std::memory_order_release);
    }
  }
  return view_->compact;
}

#endif  // TENFERRO_HEADER_ONLY

}  // namespace tenferro
