// EagerTensor: a cheap handle (one shared pointer) on a value in an EagerRuntime, its gradient
// slot when it is a trainable leaf, and the recorded op that produced it.
//
// Ops run at once (ad/ops.hpp) and, while recording is on and an input tracks grad, record one
// tape node whose derivative rules are compile-time-layer kernels. Handles are immutable: an op
// never changes its inputs.
#pragma once

#include <tenferro/ad/runtime.hpp>
#include <tenferro/ad/state.hpp>
#include <tenferro/core/contraction.hpp>
#include <tenferro/tensor/io.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <type_traits>
#include <vector>

namespace tenferro {

// Options of backward(): with create_graph, the sweep records its own ops, so the gradients it
// leaves in the slots (grad_tensor()) can be differentiated again.
struct BackwardOptions {
  bool create_graph = false;
};

class EagerTensor {
 public:
  // An untracked tensor in runtime `ctx`.
  static EagerTensor from_tensor_in(Tensor value, std::shared_ptr<EagerRuntime> ctx) {
    return EagerTensor(make_state(std::move(value), std::move(ctx)));
  }
  // A trainable leaf: tracks grad and owns a gradient slot registered in `ctx`.
  static EagerTensor requires_grad_in(Tensor value, std::shared_ptr<EagerRuntime> ctx) {
    auto s = make_state(std::move(value), std::move(ctx));
    s->slot = s->runtime->make_slot();
    return EagerTensor(std::move(s));
  }
  // An untracked tensor from column-major data (Tensor::from_vec_col_major).
  template <Element T>
  static EagerTensor from_vec_col_major_in(Shape shape, std::vector<T> data,
                                           std::shared_ptr<EagerRuntime> ctx) {
    return from_tensor_in(Tensor::from_vec_col_major<T>(std::move(shape), std::move(data)), std::move(ctx));
  }

  // The same value, untracked, in the same runtime / in another runtime.
  EagerTensor detach() const { return from_tensor_in(state_->value(), state_->runtime); }
  EagerTensor detach_into(std::shared_ptr<EagerRuntime> ctx) const {
    return from_tensor_in(state_->value(), std::move(ctx));
  }

  bool same_context(const EagerTensor& other) const noexcept {
    return state_->runtime == other.state_->runtime;
  }
  const std::shared_ptr<EagerRuntime>& context() const noexcept { return state_->runtime; }

  DType dtype() const noexcept { return state_->dtype(); }
  Shape shape() const {
    const auto e = state_->extents();
    return Shape(e.begin(), e.end());
  }
  std::size_t rank() const noexcept { return state_->extents().size(); }
  std::size_t size() const noexcept { return state_->size(); }

  // The value as a compact host Tensor (shares the buffer; Tensor is copy-on-write).
  Tensor materialized() const { return state_->value(); }

  bool tracks_grad() const noexcept { return state_->tracks_grad(); }
  bool is_leaf() const noexcept { return !state_->grad_fn; }

  // The structural key of the recorded op that made this tensor (its op-table entry, attributes,
  // and inputs' dtypes and shapes); nullopt for a leaf or an untracked value.
  std::optional<NodeKey> node_key() const {
    if (!state_->grad_fn) return std::nullopt;
    return state_->grad_fn->key();
  }

  // What backward() accumulated in this leaf's slot (nullopt: nothing yet, or not a trainable leaf).
  std::optional<Tensor> grad() const {
    if (!state_->slot) return std::nullopt;
    std::lock_guard lock(state_->slot->mutex);
    return state_->slot->grad;
  }
  // The slot's gradient as a differentiable tensor, after backward({.create_graph = true}).
  std::optional<EagerTensor> grad_tensor() const {
    if (!state_->slot) return std::nullopt;
    std::lock_guard lock(state_->slot->mutex);
    if (!state_->slot->traced) return std::nullopt;
    return EagerTensor(state_->slot->traced);
  }
  void clear_grad() const {
    if (!state_->slot) return;
    std::lock_guard lock(state_->slot->mutex);
    state_->slot->grad.reset();
    state_->slot->traced.reset();
  }

  // One reverse sweep from this scalar loss (one element) into the slots of the trainable leaves
  // it depends on, adding to what they hold. backward_with takes the output's cotangent (any rank,
  // same shape and dtype). Defined in ad/transforms.hpp.
  void backward(BackwardOptions options = {}) const;
  void backward_with(const EagerTensor& seed, BackwardOptions options = {}) const;

  // ---- ops (ad/ops.hpp) ----------------------------------------------------------------------
  // Binary ops broadcast NumPy-style; the result's dtype is promote_types of the operands'
  // (docs/eager.md). add, sub, mul, div, rem, pow, maximum, minimum, neg, abs, sign and square
  // also take i32, i64 and bool: integers wrap on overflow, div truncates toward zero, rem has the
  // dividend's sign; an integer division by zero or an integer power with a negative exponent
  // throws InvalidArgument. Only floating results track grad.
  EagerTensor add(const EagerTensor& other) const;
  EagerTensor sub(const EagerTensor& other) const;
  EagerTensor mul(const EagerTensor& other) const;
  EagerTensor div(const EagerTensor& other) const;
  EagerTensor rem(const EagerTensor& other) const;
  EagerTensor pow(const EagerTensor& other) const;
  EagerTensor maximum(const EagerTensor& other) const;
  EagerTensor minimum(const EagerTensor& other) const;

  // Complex parts: conj (a real tensor: itself), real (a real tensor: itself) and imag (complex
  // tensors only), the last two in the real dtype of the same width.
  EagerTensor conj() const;
  EagerTensor real() const;
  EagerTensor imag() const;

  // Comparisons (IEEE: false where an operand is NaN, except ne) and logical ops (nonzero is
  // true), of any real dtype, broadcasting; the result is Bool and never tracks grad.
  EagerTensor eq(const EagerTensor& other) const;
  EagerTensor ne(const EagerTensor& other) const;
  EagerTensor lt(const EagerTensor& other) const;
  EagerTensor le(const EagerTensor& other) const;
  EagerTensor gt(const EagerTensor& other) const;
  EagerTensor ge(const EagerTensor& other) const;
  EagerTensor logical_and(const EagerTensor& other) const;
  EagerTensor logical_or(const EagerTensor& other) const;
  EagerTensor logical_xor(const EagerTensor& other) const;
  EagerTensor logical_not() const;

  EagerTensor neg() const;
  EagerTensor abs() const;  // of a complex tensor: its modulus, in the real dtype
  EagerTensor sign() const;
  EagerTensor exp() const;
  EagerTensor log() const;
  EagerTensor sin() const;
  EagerTensor cos() const;
  EagerTensor tanh() const;
  EagerTensor sqrt() const;
  EagerTensor rsqrt() const;
  EagerTensor expm1() const;
  EagerTensor log1p() const;
  EagerTensor square() const;
  EagerTensor sigmoid() const;

  // Elementwise with a number: x * s, x + s, s - x, x / s, s / x (also as operators).
  EagerTensor scale(double s) const;
  EagerTensor add_scalar(double s) const;
  EagerTensor rsub_scalar(double s) const;
  EagerTensor div_scalar(double s) const;
  EagerTensor rdiv_scalar(double s) const;

  // Reductions: no argument reduces every axis (rank-0 result); a list reduces those axes (an
  // empty list: none). Reduced axes are dropped.
  EagerTensor reduce_sum() const;
  EagerTensor reduce_sum(const Axes& axes) const;
  EagerTensor reduce_prod() const;
  EagerTensor reduce_prod(const Axes& axes) const;
  EagerTensor reduce_max() const;
  EagerTensor reduce_max(const Axes& axes) const;
  EagerTensor reduce_min() const;
  EagerTensor reduce_min(const Axes& axes) const;
  EagerTensor reduce_mean() const;
  EagerTensor reduce_mean(const Axes& axes) const;
  // The sum of squares (of |z|² for complex: real); a stable log-sum-exp (f32, f64); the index
  // of the first largest / smallest element along an axis (i64, no gradient, a NaN counts as the
  // extremum); running sums along an axis (integers wrap, bool counts in i64).
  EagerTensor reduce_sum_squares() const;
  EagerTensor reduce_sum_squares(const Axes& axes) const;
  EagerTensor reduce_logsumexp() const;
  EagerTensor reduce_logsumexp(const Axes& axes) const;
  EagerTensor argmax(std::size_t axis) const;
  EagerTensor argmin(std::size_t axis) const;
  EagerTensor cumsum(std::size_t axis) const;

  EagerTensor reshape(const Shape& shape) const;
  EagerTensor transpose(const Axes& perm) const;
  // Cutting and padding (views where they can be): slice (per axis: start, limit, stride >= 1;
  // XLA's), pad (per axis: low zeros before, high after, interior between elements; a negative
  // low or high crops), reverse(axes), squeeze(axes) (drops those axes of extent 1), unsqueeze(axis)
  // (a new axis of extent 1 at that position, 0 to rank).
  EagerTensor slice(const Shape& starts, const Shape& limits, const Shape& strides) const;
  EagerTensor pad(const std::vector<std::int64_t>& low, const std::vector<std::int64_t>& high,
                  const std::vector<std::int64_t>& interior) const;
  EagerTensor reverse(const Axes& axes) const;
  EagerTensor squeeze(const Axes& axes) const;
  EagerTensor unsqueeze(std::size_t axis) const;
  // XLA's dynamic_slice: `sizes` elements from `starts` along each axis, each start clamped into
  // [0, extent - size] (so the slice always fits; a size above the extent is refused). A view.
  EagerTensor dynamic_slice(const std::vector<std::int64_t>& starts, const Shape& sizes) const;
  // Assembling (ad/ops/assemble.hpp). concatenate joins along an axis (negative: from the end;
  // inputs of one rank, equal extents off the axis, dtypes promoted); stack joins along a new axis
  // (inputs of one shape; axis -rank - 1 to rank). broadcast_in_dim: XLA's, operand axis i becomes
  // result axis dims[i] (extent 1 or equal), a view. extract_diag: the diagonal of a matrix
  // [m, n] (min(m, n) elements, a view); embed_diag: the square matrix with this vector as its
  // diagonal. tril / triu: the lower / upper triangle of the last two axes (rows, columns), on and
  // below / above diagonal k (k > 0: above the main one), the rest zero.
  static EagerTensor concatenate(const std::vector<EagerTensor>& inputs, std::int64_t axis);
  static EagerTensor stack(const std::vector<EagerTensor>& inputs, std::int64_t axis);
  EagerTensor broadcast_in_dim(const Shape& shape, const Axes& dims) const;
  EagerTensor extract_diag() const;
  EagerTensor embed_diag() const;
  EagerTensor tril(std::int64_t k = 0) const;
  EagerTensor triu(std::int64_t k = 0) const;
  // Contractions (on BLAS for f32, f64, c32, c64; a wrapping loop for i32, i64). dot_general:
  // XLA's DotGeneral (core/contraction.hpp): the result's axes are the batch axes, then this
  // tensor's free axes, then other's. _with_conj conjugates either operand first. matmul: NumPy's
  // (rank 1 and 2; above, batches over the leading axes, broadcast). outer: every pair of
  // elements, shape this ++ other's. dot: the sum of products of two vectors (no conjugation).
  EagerTensor dot_general(const EagerTensor& other, const DotGeneralConfig& config) const;
  EagerTensor dot_general_with_conj(const EagerTensor& other, const DotGeneralConfig& config, bool conj_lhs,
                                    bool conj_rhs) const;
  EagerTensor matmul(const EagerTensor& other) const;
  EagerTensor outer(const EagerTensor& other) const;
  EagerTensor dot(const EagerTensor& other) const;
  // Indexing along an axis (ad/ops/indexing.hpp); indices are i64, negative ones count from the
  // end, one out of range throws Validation naming it, its position and the bound.
  // index_select: the elements at `indices` (a vector) along `axis`; take_rows / take_cols:
  // along axis 0 / 1; take_block: rows, then columns. gather: NumPy's take_along_axis (indices of
  // this tensor's rank and extents off the axis; the result has their shape). scatter_add: this
  // tensor plus `updates` (the shape of indices) added where gather would read (repeats add up);
  // the gradient of each is the other op. index_select reads its vector through a stride-0 view
  // (no index tensor of the result's size is made).
  EagerTensor index_select(std::size_t axis, const EagerTensor& indices) const;
  EagerTensor index_select(std::size_t axis, const std::vector<std::int64_t>& indices) const;
  EagerTensor take_rows(const std::vector<std::int64_t>& rows) const;
  EagerTensor take_cols(const std::vector<std::int64_t>& cols) const;
  EagerTensor take_block(const std::vector<std::int64_t>& rows, const std::vector<std::int64_t>& cols) const;
  EagerTensor gather(std::size_t axis, const EagerTensor& indices) const;
  EagerTensor scatter_add(std::size_t axis, const EagerTensor& indices, const EagerTensor& updates) const;
  // Selection (ad/ops/selection.hpp; tenferro::where below): clamp(lo, hi) is
  // minimum(maximum(x, lo), hi), NumPy-broadcast, with their conventions: at x == lo or x == hi
  // the gradient goes to x, lo > hi gives hi (its gradient to hi), NaN propagates. Number bounds
  // are in this tensor's dtype (an integer tensor's must be whole numbers it holds).
  EagerTensor clamp(const EagerTensor& lo, const EagerTensor& hi) const;
  EagerTensor clamp(double lo, double hi) const;
  // NumPy broadcast to a larger shape, and its adjoint (sum over the broadcast axes).
  EagerTensor broadcast_to(const Shape& shape) const;
  // The same values as another dtype. cast (and to, the same op) converts lossily: floating to
  // integer truncates toward zero and saturates (NaN gives 0), anything to bool is != 0, complex
  // to real keeps the real part. convert is checked: it converts only toward the dtype
  // promote_types(dtype(), d) names (bool to anything, i32 to i64, integers to floating, f32 to
  // f64, real to complex, c32 to c64) and throws Unsupported "unsupported dtype conversion"
  // otherwise. Between floating and complex dtypes the cotangent converts back (to a real input:
  // its real part); an integer or Bool result does not track grad.
  EagerTensor cast(DType dtype) const;
  EagerTensor convert(DType dtype) const;
  EagerTensor to(DType dtype) const;
  EagerTensor sum_to(const Shape& shape) const;

  friend std::ostream& operator<<(std::ostream& os, const EagerTensor& t) {
    return os << "EagerTensor(" << t.state_->value() << ", shape=" << format_shape(t.shape())
              << ", dtype=" << t.dtype() << ", tracks_grad=" << (t.tracks_grad() ? "true" : "false") << ")";
  }

  // The shared state (for the tape machinery).
  // (Exactly a state_ptr: a literal 0, as in x.index_select(0, {0}), must not read as a null one.)
  template <class P>
  requires std::same_as<std::remove_cvref_t<P>, detail::ad::state_ptr>
  explicit EagerTensor(P&& state) noexcept : state_(std::forward<P>(state)) {}
  const detail::ad::state_ptr& state() const noexcept { return state_; }

 private:
  static detail::ad::state_ptr make_state(Tensor value, std::shared_ptr<EagerRuntime> ctx) {
    auto s =
        std::allocate_shared<detail::ad::tensor_state>(detail::pool_allocator<detail::ad::tensor_state>{});
    s->value_ = std::move(value);
    s->runtime = std::move(ctx);
    return s;
  }

  detail::ad::state_ptr state_;
};

// a where cond (Bool) holds, else b: the three broadcast NumPy-style, the result in
// promote_types(a, b); a select, so NaN and the sign of zero come through. The gradient goes to a
// and b (where each was chosen, summed over what was broadcast), none to cond.
EagerTensor where(const EagerTensor& cond, const EagerTensor& a, const EagerTensor& b);

inline EagerTensor operator+(const EagerTensor& a, const EagerTensor& b) { return a.add(b); }
inline EagerTensor operator-(const EagerTensor& a, const EagerTensor& b) { return a.sub(b); }
inline EagerTensor operator*(const EagerTensor& a, const EagerTensor& b) { return a.mul(b); }
inline EagerTensor operator/(const EagerTensor& a, const EagerTensor& b) { return a.div(b); }
inline EagerTensor operator-(const EagerTensor& a) { return a.neg(); }
inline EagerTensor operator*(const EagerTensor& a, double s) { return a.scale(s); }
inline EagerTensor operator*(double s, const EagerTensor& a) { return a.scale(s); }
inline EagerTensor operator/(const EagerTensor& a, double s) { return a.div_scalar(s); }
inline EagerTensor operator/(double s, const EagerTensor& a) { return a.rdiv_scalar(s); }
inline EagerTensor operator+(const EagerTensor& a, double s) { return a.add_scalar(s); }
inline EagerTensor operator+(double s, const EagerTensor& a) { return a.add_scalar(s); }
inline EagerTensor operator-(const EagerTensor& a, double s) { return a.add_scalar(-s); }
inline EagerTensor operator-(double s, const EagerTensor& a) { return a.rsub_scalar(s); }

inline std::vector<std::optional<EagerTensor>> detail::ad::node::vjp_traced(
    const EagerTensor& output, const EagerTensor& cotangent, const std::vector<bool>& needed) const {
  return def_->vjp_traced(*this, output, cotangent, needed);
}
inline EagerTensor detail::ad::node::jvp_traced(const EagerTensor& output,
                                                std::span<const EagerTensor* const> tangents) const {
  return def_->jvp_traced(*this, output, tangents);
}

inline EagerTensor EagerRuntime::constant_from(Tensor tensor) {
  return EagerTensor::from_tensor_in(std::move(tensor), shared_from_this());
}
inline EagerTensor EagerRuntime::variable_from(Tensor tensor) {
  return EagerTensor::requires_grad_in(std::move(tensor), shared_from_this());
}

}  // namespace tenferro
