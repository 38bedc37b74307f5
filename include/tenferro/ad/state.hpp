// The tape: what an EagerTensor handle points to (tensor_state), the recorded op that produced a
// value (node), gradient slots, and the thread's grad mode.
//
// A tensor_state owns its value and, when an op produced it while recording, that op's node; a
// node owns its input states. So a graph lives exactly as long as some tensor refers to it, and a
// node's saved values are its inputs' values (tensors are immutable). Destroying a long chain is
// iterative (no recursion depth limit).
#pragma once

#include <tenferro/ad/op.hpp>
#include <tenferro/tensor/tensor.hpp>

#include <boost/container/small_vector.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <ranges>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace tenferro {

class EagerRuntime;
class EagerTensor;

// The number of tape nodes alive in this process (for tests and leak hunting).
std::int64_t live_tape_nodes() noexcept;

// Disables recording on the current thread while it lives (nestable; affects every runtime).
class [[nodiscard]] NoGradGuard {
 public:
  NoGradGuard() noexcept { ++depth(); }
  ~NoGradGuard() { --depth(); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

  // True when ops on this thread record (no guard alive).
  static bool grad_enabled() noexcept { return depth() == 0; }

 private:
  static int& depth() noexcept {
    thread_local int d = 0;
    return d;
  }
};

namespace detail::ad {

struct tensor_state;
using state_ptr = std::shared_ptr<tensor_state>;
// A node's inputs: stored inline for up to two (every elementwise op), so recording an op does not
// allocate a list.
using input_states = boost::container::small_vector<state_ptr, 2>;

// The gradient slot of a leaf: what backward() accumulated, and, after a backward with
// create_graph, the same gradient as a differentiable tensor.
struct grad_slot {
  std::mutex mutex;
  std::optional<Tensor> grad;
  state_ptr traced;
};

// One recorded op: its entry in the op table (ad/op.hpp), the call's attributes, its inputs, and
// values its rules reuse (`saved`: the gradients a fused forward pass computed). The rules are
// the entry's, each in two forms: on plain Tensors with the fused compile-time kernels
// (backward(), and transforms under no_grad), and with the runtime's own ops on EagerTensors
// (functional transforms, whose results can be differentiated again).
class node {
 public:
  // `in`: the handles (EagerTensors) of the op's inputs; the node keeps their states.
  template <std::ranges::input_range Handles>
  node(const Handles& in, const op_def& def, OpAttributes attributes, std::vector<Tensor> saved = {})
      : def_(&def), attributes_(std::move(attributes)), saved_(std::move(saved)), sequence_(next_sequence()) {
    for (const auto& x : in) inputs_.push_back(x.state());
    live().fetch_add(1, std::memory_order_relaxed);
  }
  node(const node&) = delete;
  node& operator=(const node&) = delete;
  ~node();

  std::string_view name() const noexcept { return def_->label.empty() ? def_->name : def_->label; }
  const op_def& def() const noexcept { return *def_; }
  const OpAttributes& attributes() const noexcept { return attributes_; }
  const std::vector<Tensor>& saved() const noexcept { return saved_; }
  const input_states& inputs() const noexcept { return inputs_; }

  // The op, its attributes and its inputs' dtypes and shapes (defined below tensor_state).
  NodeKey key() const;

  // Creation order: a node's inputs were made by nodes with smaller numbers, so sorting by it is
  // a topological order.
  std::uint64_t sequence() const noexcept { return sequence_; }

  // Cotangents of the inputs flagged in `needed` (the others, and those whose derivative is
  // identically zero, stay empty), given the output's value and cotangent.
  std::vector<std::optional<Tensor>> vjp(const Tensor& output, const Tensor& cotangent,
                                         const std::vector<bool>& needed) const {
    return def_->vjp(*this, output, cotangent, needed);
  }
  std::vector<std::optional<EagerTensor>> vjp_traced(const EagerTensor& output, const EagerTensor& cotangent,
                                                     const std::vector<bool>& needed) const;  // ad/tensor.hpp

  // True when backward() should run vjp_traced (recording nothing) rather than vjp: large
  // elementwise ops, whose traced rules are deferred and fuse across the sweep (ad/deferred.hpp).
  bool defers_vjp(const tensor_state& output, const EagerTensor& cotangent) const {
    return def_->defers_vjp && def_->defers_vjp(*this, output, cotangent);
  }

  // The output's tangent; tangents[k] is nullptr for an input that does not move.
  Tensor jvp(const Tensor& output, std::span<const Tensor* const> tangents) const {
    return def_->jvp(*this, output, tangents);
  }
  EagerTensor jvp_traced(const EagerTensor& output,
                         std::span<const EagerTensor* const> tangents) const;  // ad/tensor.hpp

  static std::atomic<std::int64_t>& live() noexcept {
    static std::atomic<std::int64_t> count{0};
    return count;
  }

 private:
  static std::uint64_t next_sequence() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed);
  }

  const op_def* def_;
  OpAttributes attributes_;
  std::vector<Tensor> saved_;
  input_states inputs_;
  std::uint64_t sequence_;
};

// How a deferred elementwise value is computed (ad/deferred.hpp): the block kernel of its op's
// entry over its inputs' elements. The inputs are filled or themselves deferred, all of one dtype
// and of its size, except filled inputs of one element, which broadcast.
struct deferred_op {
  block_kernel run;
  double constant;  // the op's number (x * 0.5, a fill's value), 0 when it has none
  input_states inputs;
  fusion_kind kind = fusion_kind::other;
};

// Computes the deferred values among `states`, in one blockwise pass per dtype and size
// (ad/deferred.hpp). All belong to one runtime.
void fill_deferred(std::span<const tensor_state* const> states);

struct tensor_state : std::enable_shared_from_this<tensor_state> {
  tensor_state() = default;
  tensor_state(const tensor_state&) = delete;  // grad_fn may point into this very object
  tensor_state& operator=(const tensor_state&) = delete;

  // The value, computed first when it was deferred (ad/deferred.hpp).
  const Tensor& value() const {
    if (cone.load(std::memory_order_acquire) != 0) {
      const tensor_state* self = this;
      fill_deferred(std::span(&self, 1));
    }
    return value_;
  }
  // The value's dtype and shape, without computing a deferred value.
  DType dtype() const noexcept { return deferred() ? deferred_dtype : value_.dtype(); }
  std::span<const std::size_t> extents() const noexcept {
    return deferred() ? std::span<const std::size_t>(deferred_shape) : value_.extents();
  }
  std::size_t size() const noexcept {
    if (!deferred()) return value_.size();
    std::size_t n = 1;
    for (const std::size_t e : deferred_shape) n *= e;
    return n;
  }

  bool tracks_grad() const noexcept { return grad_fn != nullptr || slot != nullptr; }
  // True when a gradient flows into this value through ops: it tracks grad and has a floating
  // (or complex) dtype. An integer or Bool leaf has a slot (its own backward() fills it) but ops
  // on it record nothing.
  bool gradient_flows() const noexcept {
    return tracks_grad() && (is_floating(dtype()) || is_complex(dtype()));
  }
  bool deferred() const noexcept { return cone.load(std::memory_order_acquire) != 0; }

  Tensor value_;  // a deferred value's is allocated and filled when it is computed
  std::shared_ptr<EagerRuntime> runtime;
  node* grad_fn = nullptr;          // the op that made it (recorded ops only; see recorded_state)
  std::shared_ptr<grad_slot> slot;  // leaves that require grad

  // Deferred values only (ad/deferred.hpp). `cone`: 0 once the value is filled, else a bound on the
  // number of deferred values computing it needs (itself included). `pending`: how to compute it,
  // until it is filled; read, and reset when value_ is published, under the runtime's fusion mutex
  // (a pass holds its own references to the ops it runs, so it computes without the mutex).
  // `deferred_dtype` and `deferred_shape`: the value's, set before it is published, never changed.
  std::atomic<std::uint32_t> cone{0};
  std::shared_ptr<const deferred_op> pending;
  DType deferred_dtype = DType::F64;
  Shape deferred_shape;
};

// The state of a recorded op's result and the op's node in one allocation: a node lives exactly
// as long as the value it produced, and only that state refers to it.
struct recorded_state final : tensor_state {
  template <class Make>
  explicit recorded_state(Make&& make) : op(std::forward<Make>(make)()) {
    grad_fn = &op;
  }
  node op;
};

inline node::~node() {
  live().fetch_sub(1, std::memory_order_relaxed);
  // Unlink the graph iteratively: inputs made by ops are taken out, and the inputs of those only
  // this node held after them, before they die, so destruction never recurses down a long chain.
  // Leaves and states without inputs are released with inputs_.
  boost::container::small_vector<state_ptr, 8> pending;
  auto take_producers = [&](input_states& from) {
    for (auto& in : from) {
      if (in && in->grad_fn && !in->grad_fn->inputs_.empty()) pending.push_back(std::move(in));
    }
  };
  take_producers(inputs_);
  while (!pending.empty()) {
    state_ptr s = std::move(pending.back());
    pending.pop_back();
    if (s.use_count() == 1) take_producers(s->grad_fn->inputs_);
  }
}

inline NodeKey node::key() const {
  NodeKey k{def_->name, def_->label.empty() ? def_->name : def_->label, attributes_, {}, {}};
  for (const auto& in : inputs_) {
    k.dtypes.push_back(in->dtype());
    const auto e = in->extents();
    k.shapes.emplace_back(e.begin(), e.end());
  }
  return k;
}

}  // namespace detail::ad

inline std::int64_t live_tape_nodes() noexcept { return detail::ad::node::live().load(); }

}  // namespace tenferro
