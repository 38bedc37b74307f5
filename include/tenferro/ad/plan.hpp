// Prepared derivatives: what a kernel sweep learns about a graph's structure, kept by the runtime
// (EagerRuntime's prepared-derivative cache, ad/plan_cache.hpp) so the next graph of the same
// structure — a training loop rebuilds the same graph every step — is swept without working its
// structure out again.
//
// One walk from the output reads the structure: every value a gradient flows into gets a position
// (breadth first, inputs in order), and the walk writes, position by position, whether it is a
// leaf or a node, and for a node which inputs take a cotangent and at which positions, as words
// hashed into a fingerprint. That is all a plan depends on: the rules are the nodes' own, called
// on each graph with its own ops, attributes, dtypes and shapes, so one plan serves a loop whose
// learning rate or batch size changes. The plan kept under (fingerprint, sweep, start) holds those
// words, the node positions in sweep order, where each input's cotangent goes and each node's
// `needed` flags. On a hit the sweep runs the same rules in the same order as without the plan, on
// the new graph, with cotangents in a table by position instead of a hash map, and no handle per
// cotangent: results are identical bit for bit. A hit compares the words in full (a fingerprint
// collision is a miss, never a wrong plan) and checks that the new graph's nodes were created in
// the plan's order (the order decides the order cotangents are summed in); a plan that does not
// fit is replaced by the new graph's. No epoch is needed in the key: installing an extension
// module changes which rules new nodes get, not how a graph's nodes connect.
//
// Plans are made for graphs of small values only (every value below CpuBackend::fusion_elements
// or fusion off): a graph of large elementwise values fuses its rules across the sweep instead
// (ad/deferred.hpp), where the rules' own cost dwarfs the sweep's bookkeeping. The walk stops at
// the first large value; those graphs are not looked up (the cache's hits and misses do not count
// them).
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

inline constexpr std::uint32_t no_position = ~std::uint32_t{0};

// A graph's structure as one walk from its output reads it.
struct graph_walk {
  explicit graph_walk(std::pmr::memory_resource* mem)
      : states(mem), words(mem), first_edge(mem), edges(mem) {}

  std::pmr::vector<const tensor_state*> states;  // by position; the output at 0
  std::pmr::vector<std::uint64_t> words;
  // Node p's inputs go to edges[first_edge[p]] .. edges[first_edge[p + 1] - 1]: a position, or
  // no_position for an input no gradient flows into.
  std::pmr::vector<std::uint32_t> first_edge;
  std::pmr::vector<std::uint32_t> edges;
  std::uint64_t fingerprint = 0;
  bool plannable = true;  // every value small (no rule of the sweep defers)
};

// What a sweep keeps of a structure (see the top of this file).
struct sweep_plan {
  std::vector<std::uint64_t> words;
  std::vector<std::uint32_t> order;  // node positions in sweep order
  std::vector<std::uint32_t> first_edge;
  std::vector<std::uint32_t> edges;
  std::vector<std::vector<bool>> needed;  // by position (empty for a leaf)
  std::vector<std::uint32_t> readers;     // by position: the nodes reading it (forward sweeps)

  // What the cache counts against its max_bytes.
  std::size_t bytes() const noexcept {
    std::size_t b =
        sizeof(sweep_plan) + words.size() * sizeof(std::uint64_t) +
        (order.size() + first_edge.size() + edges.size() + readers.size()) * sizeof(std::uint32_t);
    for (const auto& n : needed) b += sizeof(n) + (n.size() + 7) / 8;
    return b;
  }
};

void walk_graph(graph_walk& w, const tensor_state* root, const CpuBackend& backend);

// A kernel reverse sweep from `root` with cotangent `seed`, through the runtime's plan cache when
// the runtime's AdContext has prepared derivatives on and the graph is plannable. The result keeps
// the cotangents of the leaves reached and of `target`, or, with no target, of every state with a
// gradient slot (backward()).
sweep_result<EagerTensor> kernel_reverse_sweep(const tensor_state* root, const EagerTensor& seed,
                                               const tensor_state* target, std::pmr::memory_resource* mem);

// forward_sweep<kernel_sweep> (the tangent of root when wrt moves along tangent; nullopt: root does
// not depend on wrt), through the plan cache likewise.
std::optional<EagerTensor> kernel_forward_sweep(const tensor_state* root, const tensor_state* wrt,
                                                const EagerTensor& tangent, std::pmr::memory_resource* mem);

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
  enum : std::uint64_t { leaf = 1ULL << 62, op = 2ULL << 62, flows = 3ULL << 62 };
  constexpr std::uint64_t still = flows | no_position;
  // False for a value a deferred pass would take (its rules would defer).
  auto small = [&](const tensor_state& t) { return !t.deferred() && !backend.defers(t.size(), t.dtype()); };
  w.words.reserve(256);
  w.states.push_back(root);
  position.try_emplace(root, 0);
  for (std::size_t p = 0; p < w.states.size(); ++p) {
    const tensor_state& s = *w.states[p];
    w.first_edge.push_back(static_cast<std::uint32_t>(w.edges.size()));
    if (!small(s)) {
      w.plannable = false;
      return;
    }
    if (!s.grad_fn) {
      w.words.push_back(leaf);
      continue;
    }
    const node& n = *s.grad_fn;
    w.words.push_back(op | n.inputs().size());
    for (const auto& in : n.inputs()) {
      if (in->gradient_flows()) {
        const auto [at, fresh] = position.try_emplace(in.get(), static_cast<std::uint32_t>(w.states.size()));
        if (fresh) w.states.push_back(in.get());
        w.edges.push_back(at);
        w.words.push_back(flows | at);
      } else {
        if (!small(*in)) {
          w.plannable = false;
          return;
        }
        w.edges.push_back(no_position);
        w.words.push_back(still);
      }
    }
  }
  w.first_edge.push_back(static_cast<std::uint32_t>(w.edges.size()));
  std::uint64_t h = 0xcbf29ce484222325ULL ^ w.words.size();
  for (const std::uint64_t v : w.words) h = (h ^ v) * 0x100000001b3ULL ^ (h >> 29);
  w.fingerprint = h;
}

// True when node a comes before node b in a sweep in `direction`.
inline bool sweeps_before(sweep_direction direction, const tensor_state* a, const tensor_state* b) {
  const std::uint64_t x = a->grad_fn->sequence(), y = b->grad_fn->sequence();
  return direction == sweep_direction::reverse ? x > y : x < y;
}

// The plan of walk w's structure for a sweep in `direction`.
inline std::shared_ptr<const sweep_plan> make_plan(const graph_walk& w, sweep_direction direction) {
  auto plan = std::make_shared<sweep_plan>();
  plan->words.assign(w.words.begin(), w.words.end());
  plan->first_edge.assign(w.first_edge.begin(), w.first_edge.end());
  plan->edges.assign(w.edges.begin(), w.edges.end());
  plan->needed.resize(w.states.size());
  for (std::uint32_t p = 0; p < w.states.size(); ++p) {
    if (!w.states[p]->grad_fn) continue;
    plan->order.push_back(p);
    for (std::uint32_t e = w.first_edge[p]; e < w.first_edge[p + 1]; ++e) {
      plan->needed[p].push_back(w.edges[e] != no_position);
    }
  }
  std::ranges::sort(plan->order, [&](std::uint32_t a, std::uint32_t b) {
    return sweeps_before(direction, w.states[a], w.states[b]);
  });
  if (direction == sweep_direction::forward) {
    plan->readers.assign(w.states.size(), 0);
    for (const std::uint32_t q : w.edges) {
      if (q != no_position) ++plan->readers[q];
    }
  }
  return plan;
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

// The plan of walk w's graph for a sweep in `direction` from position `start`: from the runtime's
// cache, or made now and kept in place of a plan under its key that does not fit.
inline std::shared_ptr<const sweep_plan> plan_for(EagerRuntime& rt, const graph_walk& w,
                                                  sweep_direction direction, std::uint32_t start) {
  const plan_key key{w.fingerprint, direction, start};
  auto plan = rt.prepared_derivative_plans().find(
      key, [&](const std::shared_ptr<const sweep_plan>& p) { return plan_fits(*p, w, direction); });
  if (plan) return std::move(*plan);
  auto made = make_plan(w, direction);
  const std::size_t bytes = made->bytes();
  rt.prepared_derivative_plans().insert_or_assign(key, made, bytes);
  return made;
}

// The forward sweep of forward_sweep<kernel_sweep>, run by plan on walk w's graph from position
// `start` (not the output's).
inline std::optional<Tensor> replay_forward(const sweep_plan& plan, const graph_walk& w, std::uint32_t start,
                                            Tensor tangent, std::pmr::memory_resource* mem) {
  std::pmr::vector<std::optional<Tensor>> tan(w.states.size(), mem);
  std::pmr::vector<std::uint32_t> readers(plan.readers.begin(), plan.readers.end(), mem);
  tan[start] = std::move(tangent);
  std::pmr::vector<const Tensor*> in_tan(mem);
  for (const std::uint32_t p : plan.order) {
    if (p == start) continue;
    const tensor_state& s = *w.states[p];
    const std::uint32_t* edge = plan.edges.data() + plan.first_edge[p];
    const std::size_t inputs = plan.first_edge[p + 1] - plan.first_edge[p];
    in_tan.assign(inputs, nullptr);
    bool any = false;
    for (std::size_t k = 0; k < inputs; ++k) {
      if (edge[k] != no_position && tan[edge[k]]) in_tan[k] = &*tan[edge[k]], any = true;
    }
    if (any) tan[p] = s.grad_fn->jvp(s.value(), std::span<const Tensor* const>(in_tan.data(), inputs));
    for (std::size_t k = 0; k < inputs; ++k) {
      if (edge[k] != no_position && --readers[edge[k]] == 0) tan[edge[k]].reset();
    }
  }
  return std::move(tan[0]);
}

// The reverse sweep of reverse_sweep<kernel_sweep>, run by plan on walk w's graph.
inline sweep_result<EagerTensor> replay_reverse(const sweep_plan& plan, const graph_walk& w, Tensor seed,
                                                const tensor_state* target, std::pmr::memory_resource* mem) {
  const std::size_t m = w.states.size();
  std::pmr::vector<std::optional<Tensor>> cot(m, mem);
  std::pmr::vector<char> zero(m, 0, mem);
  auto keep = [&](const tensor_state* s) { return target ? s == target : s->slot != nullptr; };
  cot[0] = std::move(seed);
  for (const std::uint32_t p : plan.order) {
    const tensor_state& s = *w.states[p];
    const std::uint32_t* edge = plan.edges.data() + plan.first_edge[p];
    const std::size_t inputs = plan.first_edge[p + 1] - plan.first_edge[p];
    if (!cot[p]) {  // reached with a zero cotangent: so are its tracked inputs
      if (zero[p]) {
        for (std::size_t k = 0; k < inputs; ++k) {
          if (edge[k] != no_position) zero[edge[k]] = 1;
        }
      }
      continue;
    }
    auto in_cot = s.grad_fn->vjp(s.value(), *cot[p], plan.needed[p]);
    vjp_rules_run().fetch_add(1, std::memory_order_relaxed);
    for (std::size_t k = 0; k < std::min(inputs, in_cot.size()); ++k) {
      const std::uint32_t q = edge[k];
      if (q == no_position) continue;
      if (!in_cot[k]) {
        zero[q] = 1;
      } else if (!cot[q]) {
        cot[q] = std::move(*in_cot[k]);
      } else {
        cpu::add_into(*cot[q], *in_cot[k]);  // (a shared buffer is copied first)
      }
    }
    if (!keep(&s)) cot[p].reset();
  }
  sweep_result<EagerTensor> r{value_map<EagerTensor>(mem), std::pmr::unordered_set<const tensor_state*>(mem)};
  for (std::size_t p = 0; p < m; ++p) {
    const tensor_state* s = w.states[p];
    if (cot[p]) r.cot.emplace(s, EagerTensor::from_tensor_in(std::move(*cot[p]), s->runtime));
    if (zero[p]) r.zero.insert(s);
  }
  return r;
}

TENFERRO_INLINE sweep_result<EagerTensor> kernel_reverse_sweep(const tensor_state* root,
                                                               const EagerTensor& seed,
                                                               const tensor_state* target,
                                                               std::pmr::memory_resource* mem) {
  EagerRuntime& rt = *root->runtime;
  if (root->grad_fn && rt.ad_context().prepared_derivatives()) {
    graph_walk w(mem);
    walk_graph(w, root, rt.backend());
    if (w.plannable) {
      const auto plan = plan_for(rt, w, sweep_direction::reverse, 0);
      return replay_reverse(*plan, w, seed.materialized(), target, mem);
    }
  }
  auto keep = [&](const tensor_state* s) { return target ? s == target : s->slot != nullptr; };
  return reverse_sweep<kernel_sweep>(root, seed, mem, keep);
}

TENFERRO_INLINE std::optional<EagerTensor> kernel_forward_sweep(const tensor_state* root,
                                                                const tensor_state* wrt,
                                                                const EagerTensor& tangent,
                                                                std::pmr::memory_resource* mem) {
  EagerRuntime& rt = *root->runtime;
  if (root != wrt && root->grad_fn && rt.ad_context().prepared_derivatives()) {
    graph_walk w(mem);
    walk_graph(w, root, rt.backend());
    const auto at = std::ranges::find(w.states, wrt);
    if (w.plannable && at != w.states.end()) {
      const auto start = static_cast<std::uint32_t>(at - w.states.begin());
      const auto plan = plan_for(rt, w, sweep_direction::forward, start);
      auto t = replay_forward(*plan, w, start, tangent.materialized(), mem);
      if (!t) return std::nullopt;
      return EagerTensor::from_tensor_in(std::move(*t), root->runtime);
    }
  }
  return forward_sweep<kernel_sweep>(root, wrt, tangent, mem);
}

}  // namespace tenferro::detail::ad

#endif  // TENFERRO_HEADER_ONLY
