// Differentiating a recorded graph: backward() into gradient slots, and the functional transforms
// grad / vjp / jvp of EagerRuntime.
//
// Reverse mode is ONE sweep from the output over the nodes that reach it, in reverse creation
// order (a topological order), summing cotangents where a value is used twice. Forward mode walks
// the same nodes in creation order. Each sweep runs either on Tensors with the fused kernels
// (backward(), and transforms while recording is off) or on EagerTensors with recorded ops
// (transforms while recording is on, and backward with create_graph), so results can be
// differentiated again.
//
// Under TENFERRO_SEPARATE_COMPILATION the transforms are compiled once (core/detail/config.hpp).
#pragma once

#include <tenferro/ad/ops.hpp>
#include <tenferro/core/detail/config.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <memory_resource>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tenferro::detail::ad {

// Rules run by reverse sweeps in this process (tests use it to show one sweep visits each node
// once, whatever the number of leaves).
inline std::atomic<std::uint64_t>& vjp_rules_run() noexcept {
  static std::atomic<std::uint64_t> count{0};
  return count;
}

// Scratch memory for one sweep: small graphs run without touching the heap.
struct sweep_arena {
  std::array<std::byte, 16384> buffer;
  std::pmr::monotonic_buffer_resource resource{buffer.data(), buffer.size()};
};

// The recorded states `root` depends on (root included), outputs before inputs.
inline std::pmr::vector<const tensor_state*> graph_of(const tensor_state* root,
                                                      std::pmr::memory_resource* mem) {
  std::pmr::vector<const tensor_state*> order(mem);
  std::pmr::unordered_set<const tensor_state*> seen(mem);
  seen.insert(root);
  if (root->grad_fn) order.push_back(root);
  for (std::size_t i = 0; i < order.size(); ++i) {
    for (const auto& in : order[i]->grad_fn->inputs()) {
      if (in->grad_fn && seen.insert(in.get()).second) order.push_back(in.get());
    }
  }
  std::sort(order.begin(), order.end(), [](const tensor_state* a, const tensor_state* b) {
    return a->grad_fn->sequence() > b->grad_fn->sequence();
  });
  return order;
}

// A new handle on a state of the graph.
inline EagerTensor handle(const tensor_state& s) {
  return EagerTensor(std::const_pointer_cast<tensor_state>(s.shared_from_this()));
}

// The two ways a sweep runs. Both carry EagerTensors; the kernel sweep's are untracked.
//
// kernel_sweep: rules run as fused kernels on Tensors, recording nothing; large elementwise ops
// run their traced rules with recording off instead, which defers them (ad/deferred.hpp), so a
// backward sweep over large elementwise ops computes its cotangents in few fused passes.
struct kernel_sweep {
  using value = EagerTensor;
  static void accumulate(EagerTensor& acc, const EagerTensor& b) {
    const NoGradGuard no_grad;
    const bool sole = acc.state().use_count() == 1;
    // A sum only the sweep holds is updated in place (its buffer is copied first if shared).
    if (sole && !acc.state()->deferred() && !b.state()->deferred() &&
        !can_defer(std::array<EagerTensor, 2>{acc, b})) {
      cpu::add_into(acc.state()->value_, b.state()->value());
      return;
    }
    acc = acc.add(b);
  }
  static auto vjp(const node& n, const tensor_state& s, const EagerTensor& c,
                  const std::vector<bool>& needed) {
    if (n.defers_vjp(s, c)) {
      const NoGradGuard no_grad;
      return n.vjp_traced(handle(s), c, needed);
    }
    auto r = n.vjp(s.value(), c.materialized(), needed);
    std::vector<std::optional<EagerTensor>> out(r.size());
    for (std::size_t k = 0; k < r.size(); ++k) {
      if (r[k]) out[k] = EagerTensor::from_tensor_in(std::move(*r[k]), s.runtime);
    }
    return out;
  }
  static EagerTensor jvp(const node& n, const tensor_state& s, std::span<const EagerTensor* const> t) {
    // The tangents' own values (their states outlive the call), no copies.
    boost::container::small_vector<const Tensor*, 2> tangents(t.size(), nullptr);
    for (std::size_t k = 0; k < t.size(); ++k) {
      if (t[k]) tangents[k] = &t[k]->state()->value();
    }
    return EagerTensor::from_tensor_in(
        n.jvp(s.value(), std::span<const Tensor* const>(tangents.data(), tangents.size())), s.runtime);
  }
};

// traced_sweep: rules recorded with the runtime's ops (results differentiable again).
struct traced_sweep {
  using value = EagerTensor;
  static void accumulate(EagerTensor& acc, const EagerTensor& b) { acc = acc.add(b); }
  static auto vjp(const node& n, const tensor_state& s, const EagerTensor& c,
                  const std::vector<bool>& needed) {
    return n.vjp_traced(handle(s), c, needed);
  }
  static EagerTensor jvp(const node& n, const tensor_state& s, std::span<const EagerTensor* const> t) {
    return n.jvp_traced(handle(s), t);
  }
};

template <class V>
using value_map = std::pmr::unordered_map<const tensor_state*, V>;

// What a reverse sweep leaves: the summed cotangent of every tracked state reached (leaves and
// intermediates), and the tracked states reached through recorded ops whose cotangent is zero by
// the rules alone (sign, comparisons: a rule returned none). Those get zeros where a caller asks for
// them (zeros_for): a leaf reached through recorded ops has a gradient, whatever the rules.
template <class V>
struct sweep_result {
  value_map<V> cot;
  std::pmr::unordered_set<const tensor_state*> zero;

  // The cotangent of s: its sum, zeros when it was reached only with zero, nullopt when the
  // output does not depend on it.
  std::optional<V> of(const tensor_state* s) const {
    if (auto it = cot.find(s); it != cot.end()) return it->second;
    if (zero.contains(s)) return zeros_for(*s);
    return std::nullopt;
  }

  // Zeros of s's dtype and shape, untracked (a broadcast number: deferred on large shapes).
  static EagerTensor zeros_for(const tensor_state& s) {
    const NoGradGuard no_grad;
    const EagerTensor zero = EagerTensor::from_tensor_in(Tensor::zeros({}, s.dtype()), s.runtime);
    const auto e = s.extents();
    return zero.broadcast_to(Shape(e.begin(), e.end()));
  }
};

// Reverse sweep from `root` with cotangent `seed`. The cotangent of an intermediate state is
// released once its node's rule has consumed it (nothing reaches a state after its node), unless
// keep(state): the result holds the cotangents of the states kept and of the leaves reached.
template <class Sweep, class Keep>
sweep_result<typename Sweep::value> reverse_sweep(const tensor_state* root, typename Sweep::value seed,
                                                  std::pmr::memory_resource* mem, Keep&& keep) {
  sweep_result<typename Sweep::value> r{value_map<typename Sweep::value>(mem),
                                        std::pmr::unordered_set<const tensor_state*>(mem)};
  auto& cot = r.cot;
  cot.emplace(root, std::move(seed));
  std::vector<bool> needed;
  for (const tensor_state* s : graph_of(root, mem)) {
    const node& n = *s->grad_fn;
    auto it = cot.find(s);
    if (it == cot.end()) {  // reached with a zero cotangent: so are its tracked inputs
      if (r.zero.contains(s)) {
        for (const auto& in : n.inputs()) {
          if (in->gradient_flows()) r.zero.insert(in.get());
        }
      }
      continue;
    }
    needed.clear();
    for (const auto& in : n.inputs()) needed.push_back(in->gradient_flows());
    auto in_cot = Sweep::vjp(n, *s, it->second, needed);
    vjp_rules_run().fetch_add(1, std::memory_order_relaxed);
    for (std::size_t k = 0; k < in_cot.size(); ++k) {
      if (!in_cot[k]) {
        if (needed[k]) r.zero.insert(n.inputs()[k].get());
        continue;
      }
      auto [slot, fresh] = cot.try_emplace(n.inputs()[k].get(), std::move(*in_cot[k]));
      if (!fresh) Sweep::accumulate(slot->second, *in_cot[k]);
    }
    if (!keep(s)) cot.erase(s);
  }
  return r;
}

// Forward sweep: the tangent of `root` when `wrt` moves along `tangent` (nullopt: root does not
// depend on wrt).
template <class Sweep>
std::optional<typename Sweep::value> forward_sweep(const tensor_state* root, const tensor_state* wrt,
                                                   typename Sweep::value tangent,
                                                   std::pmr::memory_resource* mem) {
  if (root == wrt) return tangent;
  value_map<typename Sweep::value> tan(mem);
  tan.emplace(wrt, std::move(tangent));
  const auto order = graph_of(root, mem);
  // Readers left of each state's tangent: released when its last reader has run.
  std::pmr::unordered_map<const tensor_state*, std::size_t> readers(mem);
  for (const tensor_state* s : order) {
    if (s == wrt) continue;
    for (const auto& in : s->grad_fn->inputs()) ++readers[in.get()];
  }
  std::vector<const typename Sweep::value*> in_tan;
  for (auto s = order.rbegin(); s != order.rend(); ++s) {
    if (*s == wrt) continue;
    const node& n = *(*s)->grad_fn;
    in_tan.clear();
    bool any = false;
    for (const auto& in : n.inputs()) {
      auto it = tan.find(in.get());
      in_tan.push_back(it == tan.end() ? nullptr : &it->second);
      any = any || it != tan.end();
    }
    if (any) tan.emplace(*s, Sweep::jvp(n, **s, in_tan));
    for (const auto& in : n.inputs()) {
      if (--readers[in.get()] == 0) tan.erase(in.get());
    }
  }
  auto it = tan.find(root);
  if (it == tan.end()) return std::nullopt;
  return std::move(it->second);
}

inline void check_scalar(std::string_view op, const EagerTensor& output) {
  if (output.size() != 1) {
    throw Error(ErrorKind::NonScalarGrad, std::string(op),
                "the output has shape " + format_shape(output.shape()) + " (" +
                    std::to_string(output.size()) +
                    " elements); a gradient needs a scalar (one element): reduce it first, or use vjp");
  }
  if (is_complex(output.dtype())) {
    throw Error(ErrorKind::DtypeMismatch, std::string(op),
                "the output has dtype " + std::string(dtype_name(output.dtype())) +
                    "; a gradient needs a real loss: take real(), imag() or abs() first, or use vjp");
  }
}

inline void check_same_runtime(std::string_view op, const EagerRuntime* rt,
                               std::initializer_list<EagerTensor> in) {
  std::vector<EagerTensor> all(in);
  common_runtime(op, all);
  if (rt && all[0].context().get() != rt) {
    throw Error(ErrorKind::ContextMismatch, std::string(op),
                "the tensors belong to runtime " + to_string(all[0].context()->id()) +
                    " but the call was made on runtime " + to_string(rt->id()) +
                    ": tensors of different eager AD contexts cannot meet");
  }
}

// Throws DtypeMismatch / ShapeMismatch unless `given` matches `expected` (named `what`).
inline void check_like(std::string_view op, std::string_view arg, const EagerTensor& given,
                       std::string_view what, const EagerTensor& expected) {
  if (given.dtype() != expected.dtype()) {
    throw Error(ErrorKind::DtypeMismatch, std::string(op),
                "argument '" + std::string(arg) + "' has dtype " + std::string(dtype_name(given.dtype())) +
                    " but " + std::string(what) + " has dtype " + std::string(dtype_name(expected.dtype())));
  }
  if (given.shape() != expected.shape()) {
    throw Error(ErrorKind::ShapeMismatch, std::string(op),
                "argument '" + std::string(arg) + "' has shape " + format_shape(given.shape()) + " but " +
                    std::string(what) + " has shape " + format_shape(expected.shape()));
  }
}

inline EagerTensor required(std::optional<EagerTensor> r, std::string_view op, const EagerTensor& output,
                            const EagerTensor& wrt) {
  if (!r) {
    throw Error(ErrorKind::Inactive, std::string(op),
                "the output (shape " + format_shape(output.shape()) + ") does not depend on 'wrt' (shape " +
                    format_shape(wrt.shape()) + ") through recorded ops; use " + std::string(op) +
                    "_optional to get nullopt instead");
  }
  return std::move(*r);
}

inline EagerTensor ones_like(const EagerTensor& t) {
  return EagerTensor::from_tensor_in(Tensor::ones(t.shape(), t.dtype()), t.context());
}

}  // namespace tenferro::detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace tenferro::detail::ad {

// vjp of output w.r.t. wrt: traced while recording, else with kernels (an untracked result).
TENFERRO_INLINE std::optional<EagerTensor> vjp_impl(const EagerTensor& output, const EagerTensor& wrt,
                                                    const EagerTensor& cotangent) {
  if (!output.tracks_grad() || !wrt.tracks_grad()) return std::nullopt;
  sweep_arena arena;
  const tensor_state* target = wrt.state().get();
  auto keep = [&](const tensor_state* s) { return s == target; };
  if (NoGradGuard::grad_enabled()) {
    return reverse_sweep<traced_sweep>(output.state().get(), cotangent, &arena.resource, keep).of(target);
  }
  auto g = reverse_sweep<kernel_sweep>(output.state().get(), cotangent, &arena.resource, keep).of(target);
  if (!g) return std::nullopt;
  return g->tracks_grad() ? g->detach() : *g;  // the seed itself may track
}

}  // namespace tenferro::detail::ad

namespace tenferro {

TENFERRO_INLINE std::optional<EagerTensor> EagerRuntime::grad_optional(const EagerTensor& output,
                                                                       const EagerTensor& wrt) {
  detail::ad::check_scalar("grad", output);
  detail::ad::check_same_runtime("grad", this, {output, wrt});
  return detail::ad::vjp_impl(output, wrt, detail::ad::ones_like(output));
}
TENFERRO_INLINE EagerTensor EagerRuntime::grad(const EagerTensor& output, const EagerTensor& wrt) {
  return detail::ad::required(grad_optional(output, wrt), "grad", output, wrt);
}

TENFERRO_INLINE std::optional<EagerTensor> EagerRuntime::vjp_optional(const EagerTensor& output,
                                                                      const EagerTensor& wrt,
                                                                      const EagerTensor& cotangent) {
  detail::ad::check_same_runtime("vjp", this, {output, wrt, cotangent});
  detail::ad::check_like("vjp", "cotangent", cotangent, "the output", output);
  return detail::ad::vjp_impl(output, wrt, cotangent);
}
TENFERRO_INLINE EagerTensor EagerRuntime::vjp(const EagerTensor& output, const EagerTensor& wrt,
                                              const EagerTensor& cotangent) {
  return detail::ad::required(vjp_optional(output, wrt, cotangent), "vjp", output, wrt);
}

TENFERRO_INLINE std::optional<EagerTensor> EagerRuntime::jvp_optional(const EagerTensor& output,
                                                                      const EagerTensor& wrt,
                                                                      const EagerTensor& tangent) {
  detail::ad::check_same_runtime("jvp", this, {output, wrt, tangent});
  detail::ad::check_like("jvp", "tangent", tangent, "'wrt'", wrt);
  if (!output.tracks_grad() || !wrt.tracks_grad()) return std::nullopt;
  detail::ad::sweep_arena arena;
  if (NoGradGuard::grad_enabled()) {
    return detail::ad::forward_sweep<detail::ad::traced_sweep>(output.state().get(), wrt.state().get(),
                                                               tangent, &arena.resource);
  }
  auto t = detail::ad::forward_sweep<detail::ad::kernel_sweep>(output.state().get(), wrt.state().get(),
                                                               tangent, &arena.resource);
  if (!t) return std::nullopt;
  return t->tracks_grad() ? t->detach() : *t;  // the tangent itself may track
}
TENFERRO_INLINE EagerTensor EagerRuntime::jvp(const EagerTensor& output, const EagerTensor& wrt,
                                              const EagerTensor& tangent) {
  return detail::ad::required(jvp_optional(output, wrt, tangent), "jvp", output, wrt);
}

TENFERRO_INLINE void EagerTensor::backward(BackwardOptions options) const {
  detail::ad::check_scalar("backward", *this);
  backward_with(detail::ad::ones_like(*this), options);
}

TENFERRO_INLINE void EagerTensor::backward_with(const EagerTensor& seed, BackwardOptions options) const {
  detail::ad::check_same_runtime("backward", nullptr, {*this, seed});
  detail::ad::check_like("backward", "seed", seed, "the output", *this);
  if (!tracks_grad()) {
    throw Error(ErrorKind::Inactive, "backward",
                "the output (shape " + format_shape(shape()) +
                    ") does not track grad: no trainable leaf reaches it through recorded ops");
  }
  // Slots are written after the sweep, so a failing rule leaves every slot as it was. No slot lock
  // is held while anything is computed (a computation may wait for oneTBB work, and a task run
  // meanwhile may deposit into the same slot): values are materialized first, and a traced sum
  // is made outside the lock and stored only if the slot did not change meanwhile.
  auto add_to = [](std::optional<Tensor>& slot, const Tensor& g) {  // same shape and dtype: a plain loop
    if (slot) {
      cpu::add_into(*slot, g);
    } else {
      slot = g;
    }
  };
  // Leaves reached only through rules that are zero (sign, ...) get zeros, as any other leaf
  // reached through recorded ops gets its gradient.
  auto add_zeros = [](auto& r) {
    for (const detail::ad::tensor_state* s : r.zero) {
      if (s->slot && !r.cot.contains(s)) r.cot.emplace(s, r.zeros_for(*s));
    }
  };
  detail::ad::sweep_arena arena;
  auto has_slot = [](const detail::ad::tensor_state* s) { return s->slot != nullptr; };
  if (options.create_graph) {
    auto r =
        detail::ad::reverse_sweep<detail::ad::traced_sweep>(state_.get(), seed, &arena.resource, has_slot);
    add_zeros(r);
    for (const auto& [state, g] : r.cot) {
      if (!state->slot) continue;
      auto& slot = *state->slot;
      const Tensor value = g.materialized();
      for (;;) {
        detail::ad::state_ptr old;
        {
          const std::lock_guard lock(slot.mutex);
          old = slot.traced;
        }
        const detail::ad::state_ptr sum = old ? EagerTensor(old).add(g).state() : g.state();
        const std::lock_guard lock(slot.mutex);
        if (slot.traced != old) continue;  // another backward deposited meanwhile
        slot.traced = sum;
        add_to(slot.grad, value);
        break;
      }
    }
    return;
  }
  auto r = detail::ad::reverse_sweep<detail::ad::kernel_sweep>(state_.get(), seed, &arena.resource, has_slot);
  add_zeros(r);
  std::vector<const detail::ad::tensor_state*> grads;  // deferred leaf gradients: computed together
  for (const auto& [state, g] : r.cot) {
    if (state->slot) grads.push_back(g.state().get());
  }
  detail::ad::fill_deferred(grads);
  // Compact every gradient (a view is copied out of its buffer) before the first slot changes, so
  // a failing allocation leaves every slot as it was.
  std::vector<Tensor> values;
  values.reserve(r.cot.size());
  for (const auto& [state, g] : r.cot) {
    if (state->slot) values.push_back(g.materialized().materialized());
  }
  std::size_t k = 0;
  for (const auto& [state, g] : r.cot) {
    if (!state->slot) continue;
    const std::lock_guard lock(state->slot->mutex);
    add_to(state->slot->grad, values[k++]);
  }
}

}  // namespace tenferro

#endif  // TENFERRO_HEADER_ONLY
