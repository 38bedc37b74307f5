// Prepared derivatives: what a sweep learns about a graph's structure, kept by the runtime
// (EagerRuntime's prepared-derivative cache, ad/plan_cache.hpp) so the next graph of the same
// structure — a training loop rebuilds the same graph every step — is swept without working its
// structure out again. Every sweep (ad/sweep.hpp), kernel or recorded, reverse or forward, starts
// here.
//
// One walk from the output reads the structure: every value a gradient flows into gets a position
// (breadth first, inputs in order), and the walk writes, position by position, whether it is a
// leaf or a node, and for a node which inputs take a cotangent and at which positions, as words
// hashed into a fingerprint. The sweep runs over the walk's positions, with cotangents in a table
// by position rather than a hash map, in the order the nodes were created (reverse for a reverse
// sweep): that order is all a plan keeps besides the words. The rules are the nodes' own, called on
// each graph with its own ops, attributes, dtypes and shapes, so one plan serves a loop whose
// learning rate or batch size changes, and a sweep by a kept plan runs the same rules in the same
// order as one without: results are identical bit for bit. A hit compares the words in full (a
// fingerprint collision is a miss, never a wrong plan) and checks that the new graph's nodes were
// created in the plan's order (the order decides the order cotangents are summed in); a plan that
// does not fit is replaced by the new graph's. No epoch is needed in the key: installing an
// extension module changes which rules new nodes get, not how a graph's nodes connect.
//
// Plans are kept for graphs of small values only (every value below CpuBackend::fusion_elements,
// or fusion off): a graph of large elementwise values fuses its rules across the sweep instead
// (ad/deferred.hpp), where the rules' own cost dwarfs the sort a plan saves. Those graphs are sorted
// on every sweep and not looked up (the cache's hits and misses do not count them).
#pragma once

#include <tenferro/ad/plan_cache.hpp>
#include <tenferro/ad/sweep.hpp>
#include <tenferro/core/detail/config.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <optional>
#include <vector>

namespace tenferro::detail::ad {

// What the runtime keeps of a structure: its words (a hit compares them in full) and its node
// positions in sweep order.
struct sweep_plan {
  std::vector<std::uint64_t> words;
  std::vector<std::uint32_t> order;

  // What the cache counts against its max_bytes.
  std::size_t bytes() const noexcept {
    return sizeof(sweep_plan) + words.size() * sizeof(std::uint64_t) + order.size() * sizeof(std::uint32_t);
  }
};

void walk_graph(graph_walk& w, const tensor_state* root, const CpuBackend& backend);

// The reverse sweep from `root` with cotangent `seed`: with recorded ops when `recorded` (results
// differentiable again), else with kernels. The result keeps the cotangents of the leaves reached
// and of `target`, or, with no target, of every state with a gradient slot (backward()).
sweep_result reverse_sweep(const tensor_state* root, const EagerTensor& seed, const tensor_state* target,
                           bool recorded, std::pmr::memory_resource* mem);

// The forward sweep: the tangent of root when wrt moves along tangent (nullopt: root does not
// depend on wrt), with recorded ops when `recorded`, else with kernels.
std::optional<EagerTensor> forward_sweep(const tensor_state* root, const tensor_state* wrt,
                                         const EagerTensor& tangent, bool recorded,
                                         std::pmr::memory_resource* mem);

}  // namespace tenferro::detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace tenferro::detail::ad {

// The positions of a walk's states: an open-addressing table (a walk looks up every input edge, so
// this is its inner loop).
class position_table {
 public:
  explicit position_table(std::pmr::memory_resource* mem) : slots_(64, slot{}, mem) {}

  // The position of s, inserting `next` when s has none; true when inserted.
  std::pair<std::uint32_t, bool> try_emplace(const tensor_state* s, std::uint32_t next) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    slot& e = find(s);
    if (e.state) return {e.position, false};
    e = {s, next};
    ++size_;
    return {next, true};
  }

 private:
  struct slot {
    const tensor_state* state = nullptr;
    std::uint32_t position = 0;
  };
  slot& find(const tensor_state* s) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = (std::bit_cast<std::uintptr_t>(s) >> 4) * 0x9e3779b97f4a7c15ULL >> 20 & mask;
    while (slots_[i].state && slots_[i].state != s) i = (i + 1) & mask;
    return slots_[i];
  }
  void grow() {
    std::pmr::vector<slot> old(2 * slots_.size(), slot{}, slots_.get_allocator());
    old.swap(slots_);
    for (const slot& e : old) {
      if (e.state) find(e.state) = e;
    }
  }
  std::pmr::vector<slot> slots_;
  std::size_t size_ = 0;
};

TENFERRO_INLINE void walk_graph(graph_walk& w, const tensor_state* root, const CpuBackend& backend) {
  position_table position(w.states.get_allocator().resource());
  constexpr std::uint64_t still = graph_walk::flows | no_position;
  // False for a value a deferred pass would take (its rules would defer).
  auto small = [&](const tensor_state& t) { return !t.deferred() && !backend.defers(t.size(), t.dtype()); };
  w.words.reserve(256);
  w.states.push_back(root);
  position.try_emplace(root, 0);
  for (std::size_t p = 0; p < w.states.size(); ++p) {
    const tensor_state& s = *w.states[p];
    w.at.push_back(static_cast<std::uint32_t>(w.words.size()));
    w.small = w.small && small(s);
    if (!s.grad_fn) {
      w.words.push_back(graph_walk::leaf);
      continue;
    }
    const node& n = *s.grad_fn;
    w.words.push_back(graph_walk::op | n.inputs().size());
    for (const auto& in : n.inputs()) {
      if (in->gradient_flows()) {
        const auto [at, fresh] = position.try_emplace(in.get(), static_cast<std::uint32_t>(w.states.size()));
        if (fresh) w.states.push_back(in.get());
        w.words.push_back(graph_walk::flows | at);
      } else {
        w.small = w.small && small(*in);
        w.words.push_back(still);
      }
    }
  }
  std::uint64_t h = 0xcbf29ce484222325ULL ^ w.words.size();
  for (const std::uint64_t v : w.words) h = (h ^ v) * 0x100000001b3ULL ^ (h >> 29);
  w.fingerprint = h;
}

// True when node a comes before node b in a sweep in `direction`.
inline bool sweeps_before(sweep_direction direction, const tensor_state* a, const tensor_state* b) {
  const std::uint64_t x = a->grad_fn->sequence(), y = b->grad_fn->sequence();
  return direction == sweep_direction::reverse ? x > y : x < y;
}

// The node positions of walk w in sweep order, appended to `order`.
template <class Vector>
void sort_nodes(Vector& order, const graph_walk& w, sweep_direction direction) {
  for (std::uint32_t p = 0; p < w.states.size(); ++p) {
    if (w.states[p]->grad_fn) order.push_back(p);
  }
  std::ranges::sort(order, [&](std::uint32_t a, std::uint32_t b) {
    return sweeps_before(direction, w.states[a], w.states[b]);
  });
}

// True when `plan` is the plan of walk w's structure, its nodes made in the plan's order.
inline bool plan_fits(const sweep_plan& plan, const graph_walk& w, sweep_direction direction) {
  if (plan.words.size() != w.words.size() ||
      std::memcmp(plan.words.data(), w.words.data(), w.words.size() * sizeof(std::uint64_t)) != 0) {
    return false;
  }
  for (std::size_t i = 1; i < plan.order.size(); ++i) {
    if (!sweeps_before(direction, w.states[plan.order[i - 1]], w.states[plan.order[i]])) return false;
  }
  return true;
}

// The node positions of walk w in sweep order: the runtime's plan when its AdContext has prepared
// derivatives on, the output is a node (not a leaf) and every value is small (made now and kept in place of a
// plan under its key that does not fit, on a miss), else sorted now.
class sweep_order {
 public:
  sweep_order(const graph_walk& w, sweep_direction direction, std::uint32_t start,
              std::pmr::memory_resource* mem)
      : own_(mem) {
    EagerRuntime& rt = *w.states[0]->runtime;
    if (!w.states[0]->grad_fn || !w.small || !rt.ad_context().prepared_derivatives()) {
      sort_nodes(own_, w, direction);
      view_ = own_;
      return;
    }
    const plan_key key{w.fingerprint, direction, start};
    auto kept = rt.prepared_derivative_plans().find(
        key, [&](const std::shared_ptr<const sweep_plan>& p) { return plan_fits(*p, w, direction); });
    if (kept) {
      plan_ = std::move(*kept);
    } else {
      auto made = std::make_shared<sweep_plan>();
      made->words.assign(w.words.begin(), w.words.end());
      sort_nodes(made->order, w, direction);
      const std::size_t bytes = made->bytes();
      plan_ = made;
      rt.prepared_derivative_plans().insert_or_assign(key, plan_, bytes);
    }
    view_ = plan_->order;
  }
  sweep_order(const sweep_order&) = delete;  // view_ may point into own_
  sweep_order& operator=(const sweep_order&) = delete;
  std::span<const std::uint32_t> positions() const noexcept { return view_; }

 private:
  std::shared_ptr<const sweep_plan> plan_;
  std::pmr::vector<std::uint32_t> own_;
  std::span<const std::uint32_t> view_;
};

TENFERRO_INLINE sweep_result reverse_sweep(const tensor_state* root, const EagerTensor& seed,
                                           const tensor_state* target, bool recorded,
                                           std::pmr::memory_resource* mem) {
  graph_walk w(mem);
  walk_graph(w, root, root->runtime->backend());
  const sweep_order order(w, sweep_direction::reverse, 0, mem);
  auto keep = [&](const tensor_state* s) { return target ? s == target : s->slot != nullptr; };
  if (recorded) return run_reverse<traced_sweep>(w, order.positions(), seed, keep, mem);
  if (w.small) return run_reverse<tensor_sweep>(w, order.positions(), seed.materialized(), keep, mem);
  return run_reverse<kernel_sweep>(w, order.positions(), seed, keep, mem);
}

TENFERRO_INLINE std::optional<EagerTensor> forward_sweep(const tensor_state* root, const tensor_state* wrt,
                                                         const EagerTensor& tangent, bool recorded,
                                                         std::pmr::memory_resource* mem) {
  if (root == wrt) return tangent;
  graph_walk w(mem);
  walk_graph(w, root, root->runtime->backend());
  const auto at = std::ranges::find(w.states, wrt);
  if (at == w.states.end()) return std::nullopt;  // no gradient flows from root to wrt
  const auto start = static_cast<std::uint32_t>(at - w.states.begin());
  const sweep_order order(w, sweep_direction::forward, start, mem);
  if (recorded) return run_forward<traced_sweep>(w, order.positions(), start, tangent, mem);
  if (!w.small) return run_forward<kernel_sweep>(w, order.positions(), start, tangent, mem);
  auto t = run_forward<tensor_sweep>(w, order.positions(), start, tangent.materialized(), mem);
  if (!t) return std::nullopt;
  return EagerTensor::from_tensor_in(std::move(*t), root->runtime);
}

}  // namespace tenferro::detail::ad

#endif  // TENFERRO_HEADER_ONLY
