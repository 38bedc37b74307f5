// Deferred fusion of elementwise eager ops.
//
// An elementwise op on large tensors (CpuBackend::fusion_elements or more, one dtype and shape,
// fusion on) does not compute its value when called: its result knows its dtype and shape (its
// storage is allocated only when it is computed), and keeps the op's block kernel (a compile-time-layer
// kernel, cpu::fused_kernels<E>::forward_block) and its inputs. When a value is needed (materialized(), a
// kernel reading it, ...), every deferred value it depends on is computed in ONE pass over the data, block by
// block:
//
//     for each block of 4096 elements:  (blocks split across the backend's threads)
//       for each deferred op, inputs first:
//         run its kernel on the block, from its inputs' blocks into its own block
//
// Intermediate blocks live in per-thread scratch (cache-resident); only the requested values are
// written to memory. A sum over all axes of a deferred value sums its blocks as they are made,
// and never writes it. Values a recorded node needs for its derivative are not written either:
// backward() defers the rules of large elementwise ops too (op_def::defers_vjp), so they are
// computed again inside the backward pass, from the leaves, which costs less than a round trip
// through memory. So sum(sin(x) * y + exp(x * y)) with its gradients reads x and y twice and
// writes the two gradients, where op by op it makes about twenty passes over memory.
//
// Results are bit-identical to op-by-op evaluation (the same kernels, elementwise; a sum's
// blocks are the chunks of the fused sum, combined in the same order), for any number of
// threads. A value computed only as scratch stays deferred and is computed again if needed
// later. The number of deferred values behind one value is bounded (max_cone): past it, the
// inputs are computed first.
//
// This file decides what is deferred, which values a pass computes, and publishes them; the pass
// itself (its plan and its loop over blocks and tiles) is in ad/deferred_pass.hpp. Under
// TENFERRO_SEPARATE_COMPILATION both are compiled once (core/detail/config.hpp).
#pragma once

#include <tenferro/ad/deferred_pass.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/cpu/fused.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <type_traits>
#include <vector>

namespace tenferro::detail::ad {

// At most this many deferred values behind one value (a bound: shared ones may count twice).
inline constexpr std::uint32_t max_cone = 32;
// The input whose shape an elementwise op over `in` has when it is deferred (nullptr: it is not):
// fusion on, one floating dtype, large enough, every input of that shape or one filled element
// of no higher rank (a rank-0 parameter against a data vector: read from a register), and none a
// strided view (the blocks of a pass are read in place; the fused kernel gathers a view chunk by
// chunk instead of compacting it).
inline const tensor_state* deferred_shape_of(std::span<const EagerTensor> in) {
  const tensor_state* full = nullptr;
  for (const auto& x : in) {
    const tensor_state& t = *x.state();
    if (!t.deferred() && !t.value().is_contiguous()) return nullptr;
    if (t.size() == 1 && !t.deferred()) continue;
    if (full == nullptr) {
      full = &t;
    } else if (!std::ranges::equal(t.extents(), full->extents())) {
      return nullptr;
    }
  }
  if (full == nullptr || !in[0].context()->backend().defers(full->size(), full->dtype())) return nullptr;
  for (const auto& x : in) {
    const tensor_state& t = *x.state();
    if (t.dtype() != full->dtype() || t.extents().size() > full->extents().size()) return nullptr;
  }
  return full;
}

inline bool can_defer(std::span<const EagerTensor> in) { return deferred_shape_of(in) != nullptr; }

// A deferred value of `dtype` and `shape`, computed by `run` (with `constant`) from `in` (each of
// that dtype and shape), recording the node make() returns when `record`.
template <class Make>
EagerTensor defer_op(block_kernel run, double constant, std::span<const EagerTensor> in, DType dtype,
                     std::span<const std::size_t> shape, const std::shared_ptr<EagerRuntime>& rt, bool record,
                     fusion_kind kind, Make&& make) {
  auto cone_of = [&] {
    std::uint32_t c = 1;
    for (const auto& x : in) c += x.state()->cone.load(std::memory_order_acquire);
    return c;
  };
  std::uint32_t cone = cone_of();
  if (cone > max_cone) {  // compute the inputs first
    std::vector<const tensor_state*> inputs;
    for (const auto& x : in) inputs.push_back(x.state().get());
    fill_deferred(inputs);
    cone = cone_of();
  }
  auto op = std::make_shared<deferred_op>();
  op->run = run;
  op->constant = constant;
  op->kind = kind;
  for (const auto& x : in) op->inputs.push_back(x.state());
  EagerTensor r = make_result(Tensor(), rt, record, std::forward<Make>(make));
  tensor_state& s = *r.state();
  s.pending = std::move(op);
  s.deferred_dtype = dtype;
  s.deferred_shape.assign(shape.begin(), shape.end());
  s.cone.store(cone, std::memory_order_release);
  return r;
}

// The deferred result of elementwise op `def` (with `attributes`) over `in` (can_defer(in)
// holds), recording its node when `record`.
inline EagerTensor defer(const op_def& def, const OpAttributes& attributes, std::span<const EagerTensor> in,
                         const std::shared_ptr<EagerRuntime>& rt, bool record) {
  const tensor_state& like = *deferred_shape_of(in);
  return defer_op(def.block(like.dtype()), attributes.numbers.empty() ? 0.0 : attributes.numbers[0], in,
                  like.dtype(), like.extents(), rt, record, def.fusion,
                  [&] { return node(in, def, attributes); });
}

// out[i] = c: the kernel of a deferred broadcast of one number.
template <class T>
void fill_kernel(void* out, const void* const*, std::size_t n, const double* c, std::uint32_t) {
  std::fill_n(static_cast<T*>(out), n, static_cast<T>(*c));
}

// True when a tensor of one element broadcast to `shape` is deferred.
inline bool can_defer_broadcast(const EagerTensor& x, std::span<const std::size_t> shape) {
  const auto n = checked_shape_size(shape);
  return x.size() == 1 && n && x.context()->backend().defers(*n, x.dtype());
}

// The sum over every element of deferred x, its blocks summed as the pass makes them (x itself is
// not written); nullopt when x is no longer deferred.
std::optional<Tensor> sum_deferred(const tensor_state& x);

}  // namespace tenferro::detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace tenferro::detail::ad {

// The deferred values `roots` need (those among them included), inputs before their users, with
// references to their ops. Under the fusion mutex.
inline std::vector<planned_value> deferred_cone(std::span<const tensor_state* const> roots) {
  auto is_deferred = [](const tensor_state* s) { return s->cone.load(std::memory_order_acquire) != 0; };
  std::vector<planned_value> order;
  std::vector<std::pair<const tensor_state*, std::size_t>> stack;
  std::vector<const tensor_state*> seen;
  auto visit = [&](const tensor_state* s) {
    if (!is_deferred(s) || std::ranges::find(seen, s) != seen.end()) return;
    seen.push_back(s);
    stack.push_back({s, 0});
  };
  for (const tensor_state* root : roots) {
    visit(root);
    while (!stack.empty()) {
      auto& [s, next] = stack.back();
      const auto& inputs = s->pending->inputs;
      if (next < inputs.size()) {
        visit(inputs[next++].get());  // may grow the stack: s and next are not used after
      } else {
        order.push_back({s, s->pending});
        stack.pop_back();
      }
    }
  }
  return order;
}

}  // namespace tenferro::detail::ad

namespace tenferro::detail::ad {

// Computing deferred values holds the runtime's fusion mutex only to read the plan (which values,
// with which ops) and to publish the results, never while a pass runs: a pass waits for oneTBB
// work, and a task that thread picks up meanwhile may need deferred values too. Two threads that
// need one value at once may both compute it (bit-identical); the first to publish wins.
TENFERRO_INLINE void fill_deferred(std::span<const tensor_state* const> states) {
  const auto first =
      std::find_if(states.begin(), states.end(), [](const tensor_state* s) { return s->deferred(); });
  if (first == states.end()) return;
  std::mutex& mutex = (*first)->runtime->fusion_mutex();
  std::vector<planned_value> order;
  {
    const std::lock_guard lock(mutex);
    order = deferred_cone(states);  // empty: filled meanwhile
  }

  // One pass per dtype and size (an op's inputs have its dtype and size, so a group is closed: its
  // other inputs were filled when the plan was read).
  std::vector<bool> done(order.size(), false);
  std::vector<std::shared_ptr<const deferred_op>> finished;  // released after the mutex
  for (std::size_t g = 0; g < order.size(); ++g) {
    if (done[g]) continue;
    const tensor_state& like = *order[g].state;
    std::vector<planned_value> group;
    std::vector<bool> written;
    for (std::size_t j = g; j < order.size(); ++j) {
      const tensor_state& t = *order[j].state;
      if (done[j] || t.dtype() != like.dtype() || t.size() != like.size()) continue;
      done[j] = true;
      group.push_back(order[j]);
      written.push_back(std::ranges::find(states, order[j].state) != states.end());
    }
    std::vector<Tensor> values(group.size());
    cpu::visit_real(like.dtype(), [&]<class T>(T) { run_deferred_pass<T>(group, written, values); });
    const std::lock_guard lock(mutex);
    for (std::size_t j = 0; j < group.size(); ++j) {
      auto* s = const_cast<tensor_state*>(group[j].state);
      if (!written[j] || !s->deferred()) continue;  // not requested, or another thread was first
      s->value_ = std::move(values[j]);
      finished.push_back(std::move(s->pending));
      s->cone.store(0, std::memory_order_release);
    }
  }
}

TENFERRO_INLINE std::optional<Tensor> sum_deferred(const tensor_state& x) {
  const tensor_state* root = &x;
  std::vector<planned_value> group;
  {
    const std::lock_guard lock(x.runtime->fusion_mutex());
    group = deferred_cone(std::span(&root, 1));
  }
  if (group.empty()) return std::nullopt;  // filled meanwhile
  const std::vector<bool> written(group.size(), false);
  std::vector<Tensor> values(group.size());
  return cpu::visit_real(x.dtype(), [&]<class T>(T) {
    T total = 0;
    run_deferred_pass<T>(group, written, values, group.size() - 1, &total);
    return cpu::scalar_tensor<T>(total);
  });
}

}  // namespace tenferro::detail::ad

#endif  // TENFERRO_HEADER_ONLY
