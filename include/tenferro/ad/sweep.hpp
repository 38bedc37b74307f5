// The two sweeps every derivative of a recorded graph runs: reverse (cotangents from an output back
// to the values it depends on) and forward (tangents from one value to an output), each either on
// Tensors with the kernel rules (kernel_sweep) or on EagerTensors with recorded ops (traced_sweep).
//
// Reverse mode is ONE sweep from the output over the nodes that reach it, in reverse creation
// order (a topological order), summing cotangents where a value is used twice. Forward mode walks
// the same nodes in creation order. ad/plan.hpp keeps what a kernel sweep learns about a graph's
// structure, so the next graph of the same structure skips the walk's bookkeeping.
#pragma once

#include <tenferro/ad/ops.hpp>

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

}  // namespace tenferro::detail::ad
