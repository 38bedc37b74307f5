// The two sweeps every derivative of a recorded graph runs: reverse (cotangents from an output back
// to the values it depends on) and forward (tangents from one value to an output).
//
// Reverse mode is ONE sweep from the output over the nodes that reach it, in reverse creation
// order (a topological order), summing cotangents where a value is used twice. Forward mode walks
// the same nodes in creation order. Both sweeps read the graph as one walk from the output gives it
// (graph_walk: every value a gradient flows into at a position, and how the nodes connect) and run
// over the node positions in sweep order, which the runtime keeps per structure (ad/plan.hpp). One
// executor per direction, run with one of three policies:
//
// - tensor_sweep: kernel rules on Tensors, recording nothing (backward(), and transforms while
//   recording is off, when every value is small);
// - kernel_sweep: the same on EagerTensors, where large elementwise ops run their traced rules with
//   recording off instead, which defers them (ad/deferred.hpp): a backward sweep over large
//   elementwise ops computes its cotangents in few fused passes;
// - traced_sweep: rules recorded with the runtime's ops, so results can be differentiated again
//   (transforms while recording is on, backward with create_graph).
#pragma once

#include <tenferro/ad/ops.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <optional>
#include <span>
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

inline constexpr std::uint32_t no_position = ~std::uint32_t{0};

// A graph's structure as one walk from its output reads it (ad/plan.hpp writes it): the values a
// gradient flows into by position, the output at 0, and per position one word (a leaf, or a node
// and its input count) followed, for a node, by one word per input: the input's position, or
// no_position when no gradient flows into it.
struct graph_walk {
  explicit graph_walk(std::pmr::memory_resource* mem) : states(mem), words(mem), at(mem) {}

  enum : std::uint64_t { leaf = 1ULL << 62, op = 2ULL << 62, flows = 3ULL << 62 };

  std::pmr::vector<const tensor_state*> states;
  std::pmr::vector<std::uint64_t> words;
  std::pmr::vector<std::uint32_t> at;  // by position: the index of its word
  std::uint64_t fingerprint = 0;
  bool small = true;  // no value a deferred pass would take

  std::size_t inputs(std::uint32_t p) const noexcept { return words[at[p]] & ~(3ULL << 62); }
  // The position input k of node p flows into, or no_position.
  std::uint32_t edge(std::uint32_t p, std::size_t k) const noexcept {
    return static_cast<std::uint32_t>(words[at[p] + 1 + k]);
  }
};

// A new handle on a state of the graph.
inline EagerTensor handle(const tensor_state& s) {
  return EagerTensor(std::const_pointer_cast<tensor_state>(s.shared_from_this()));
}

struct tensor_sweep {
  using value = Tensor;
  static void accumulate(Tensor& acc, const Tensor& b) { cpu::add_into(acc, b); }  // (copies a shared buffer)
  static auto vjp(const node& n, const tensor_state& s, const Tensor& c, const std::vector<bool>& needed) {
    return n.vjp(s.value(), c, needed);
  }
  static Tensor jvp(const node& n, const tensor_state& s, std::span<const Tensor* const> t) {
    return n.jvp(s.value(), t);
  }
  static EagerTensor eager(Tensor v, const tensor_state& s) {
    return EagerTensor::from_tensor_in(std::move(v), s.runtime);
  }
};

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
  static EagerTensor eager(EagerTensor v, const tensor_state&) { return v; }
};

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
  static EagerTensor eager(EagerTensor v, const tensor_state&) { return v; }
};

template <class V>
using value_map = std::pmr::unordered_map<const tensor_state*, V>;

// What a reverse sweep leaves: the summed cotangent of every tracked state kept (leaves, and the
// states the caller asked for), and the tracked states reached through recorded ops whose cotangent
// is zero by the rules alone (sign, comparisons: a rule returned none). Those get zeros where a
// caller asks for them (zeros_for): a leaf reached through recorded ops has a gradient, whatever
// the rules.
struct sweep_result {
  value_map<EagerTensor> cot;
  std::pmr::unordered_set<const tensor_state*> zero;

  // The cotangent of s: its sum, zeros when it was reached only with zero, nullopt when the
  // output does not depend on it.
  std::optional<EagerTensor> of(const tensor_state* s) const {
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

// The reverse sweep of walk w's graph with cotangent `seed` at the output, over the node positions
// `order` (reverse creation order). A state's cotangent is released once its node's rule has
// consumed it (nothing reaches a state after its node), unless keep(state): the result holds the
// cotangents of the states kept and of the leaves reached.
template <class Sweep, class Keep>
sweep_result run_reverse(const graph_walk& w, std::span<const std::uint32_t> order,
                         typename Sweep::value seed, Keep&& keep, std::pmr::memory_resource* mem) {
  const std::size_t m = w.states.size();
  std::pmr::vector<std::optional<typename Sweep::value>> cot(m, mem);
  std::pmr::vector<char> zero(m, 0, mem);
  std::vector<bool> needed;
  cot[0] = std::move(seed);
  for (const std::uint32_t p : order) {
    const tensor_state& s = *w.states[p];
    const std::size_t inputs = w.inputs(p);
    if (!cot[p]) {  // reached with a zero cotangent: so are its tracked inputs
      if (zero[p]) {
        for (std::size_t k = 0; k < inputs; ++k) {
          if (w.edge(p, k) != no_position) zero[w.edge(p, k)] = 1;
        }
      }
      continue;
    }
    needed.clear();
    for (std::size_t k = 0; k < inputs; ++k) needed.push_back(w.edge(p, k) != no_position);
    auto in_cot = Sweep::vjp(*s.grad_fn, s, *cot[p], needed);
    vjp_rules_run().fetch_add(1, std::memory_order_relaxed);
    for (std::size_t k = 0; k < std::min(inputs, in_cot.size()); ++k) {
      const std::uint32_t q = w.edge(p, k);
      if (q == no_position) continue;
      if (!in_cot[k]) {
        zero[q] = 1;
      } else if (!cot[q]) {
        cot[q] = std::move(*in_cot[k]);
      } else {
        Sweep::accumulate(*cot[q], *in_cot[k]);
      }
    }
    if (!keep(&s)) cot[p].reset();
  }
  sweep_result r{value_map<EagerTensor>(mem), std::pmr::unordered_set<const tensor_state*>(mem)};
  for (std::size_t p = 0; p < m; ++p) {
    const tensor_state* s = w.states[p];
    if (cot[p]) r.cot.emplace(s, Sweep::eager(std::move(*cot[p]), *s));
    if (zero[p]) r.zero.insert(s);
  }
  return r;
}

// The forward sweep of walk w's graph: the tangent of the output when the value at position
// `start` moves along `tangent` (nullopt: the output does not depend on it), over the node
// positions `order` (creation order). A tangent is released when its last reader has run.
template <class Sweep>
std::optional<typename Sweep::value> run_forward(const graph_walk& w, std::span<const std::uint32_t> order,
                                                 std::uint32_t start, typename Sweep::value tangent,
                                                 std::pmr::memory_resource* mem) {
  using V = typename Sweep::value;
  if (start == 0) return tangent;
  std::pmr::vector<std::optional<V>> tan(w.states.size(), mem);
  std::pmr::vector<std::uint32_t> readers(w.states.size(), 0, mem);
  for (const std::uint32_t p : order) {
    if (p == start) continue;
    for (std::size_t k = 0; k < w.inputs(p); ++k) {
      if (w.edge(p, k) != no_position) ++readers[w.edge(p, k)];
    }
  }
  tan[start] = std::move(tangent);
  std::pmr::vector<const V*> in_tan(mem);
  for (const std::uint32_t p : order) {
    if (p == start) continue;
    const tensor_state& s = *w.states[p];
    const std::size_t inputs = w.inputs(p);
    in_tan.assign(inputs, nullptr);
    bool any = false;
    for (std::size_t k = 0; k < inputs; ++k) {
      const std::uint32_t q = w.edge(p, k);
      if (q != no_position && tan[q]) in_tan[k] = &*tan[q], any = true;
    }
    if (any) tan[p] = Sweep::jvp(*s.grad_fn, s, std::span<const V* const>(in_tan.data(), inputs));
    for (std::size_t k = 0; k < inputs; ++k) {
      const std::uint32_t q = w.edge(p, k);
      if (q != no_position && --readers[q] == 0) tan[q].reset();
    }
  }
  return std::move(tan[0]);
}

}  // namespace tenferro::detail::ad
