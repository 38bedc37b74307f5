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
// Under TENFERRO_SEPARATE_COMPILATION the passes are compiled once (core/detail/config.hpp).
#pragma once

#include <tenferro/ad/record.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/parallel.hpp>
#include <tenferro/core/streaming.hpp>
#include <tenferro/cpu/fused.hpp>

#include <tbb/task_arena.h>

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
// Elements of one block of a pass: one chunk of the fused loop, so a block's sum is the partial the
// fused sum of the whole array computes for it.
inline constexpr std::size_t block_elements = expr::detail::chunk_elements;

// Passes that computed deferred values in this process (tests use it to show a chain is one pass).
inline std::atomic<std::uint64_t>& deferred_passes() noexcept {
  static std::atomic<std::uint64_t> count{0};
  return count;
}

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

// A deferred value in a pass's plan, with its own reference to its op (which keeps the op's
// inputs alive while the pass runs, whatever other threads publish meanwhile).
struct planned_value {
  const tensor_state* state;
  std::shared_ptr<const deferred_op> op;
};

// The sum over every element of deferred x, its blocks summed as the pass makes them (x itself is
// not written); nullopt when x is no longer deferred.
std::optional<Tensor> sum_deferred(const tensor_state& x);

}  // namespace tenferro::detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace tenferro::detail::ad {

// sin(x) and cos(x) of n elements in one loop (one math::sincos; each equal bit for bit to its
// own kernel's result).
template <class T>
void sincos_block(T* sin_out, T* cos_out, const T* x, std::size_t n) {
  const expr::arg<0> a;
  expr::detail::eval_blocks<T>(std::array<T*, 2>{sin_out, cos_out}, std::array<const T*, 1>{x}, n, 0,
                               expr::sin(a), expr::cos(a));
}

// One pass computing `group` (deferred values of one dtype and size, inputs before users, with
// their ops); written[j]: value j is made in values[j] (allocated here), else in a scratch block.
// With `sum` < group size, the blocks of value `sum` are summed, in block order, into *total.
// Runs without the fusion mutex: it reads only its own references to the ops and the inputs'
// filled values, and writes only `values`.
template <class T>
void run_deferred_pass(std::span<const planned_value> group, const std::vector<bool>& written,
                       std::vector<Tensor>& values, std::size_t sum = std::size_t(-1), T* total = nullptr) {
  const std::size_t n = group[0].state->size();
  constexpr std::size_t B = block_elements;
  const std::size_t m = group.size();
  // Where each input's elements come from: a value of the group (by index), a filled tensor, or
  // one filled element broadcast.
  struct source {
    std::size_t index;  // in the group, or m for a filled tensor
    const T* data;
    bool broadcast = false;
  };
  std::vector<std::vector<source>> sources(m);
  for (std::size_t j = 0; j < m; ++j) {
    for (const auto& in : group[j].op->inputs) {
      const auto it = std::find_if(group.begin(), group.begin() + j,
                                   [&](const planned_value& p) { return p.state == in.get(); });
      if (it != group.begin() + j) {
        sources[j].push_back({static_cast<std::size_t>(it - group.begin()), nullptr});
      } else {
        sources[j].push_back({m, in->value_.template array<T>().data(), in->size() == 1 && n != 1});
      }
    }
  }
  using kind = fusion_kind;
  auto kind_of = [&](std::size_t j) { return group[j].op->kind; };
  // x * 1 with 1 a fill (a full sum's cotangent, broadcast): its users read x itself. (Exact:
  // x * 1 == x.) A value requested or summed is still computed.
  std::vector<bool> aliased(m, false);
  std::vector<source> alias_of(m);
  for (std::size_t j = 0; j < m; ++j) {
    for (source& s : sources[j]) {
      if (s.index < m && aliased[s.index]) s = alias_of[s.index];
    }
    if (kind_of(j) != kind::mul || written[j] || j == sum) continue;
    for (std::size_t side = 0; side < 2; ++side) {
      const source one = sources[j][side];
      if (one.index < m && kind_of(one.index) == kind::fill && group[one.index].op->constant == 1.0 &&
          !sources[j][1 - side].broadcast) {  // (its users read n elements of it)
        aliased[j] = true;
        alias_of[j] = sources[j][1 - side];
        break;
      }
    }
  }
  // skip[j]: nothing left reads value j (or its sincos partner computes it).
  std::vector<bool> skip(m, true);
  for (std::size_t j = m; j-- > 0;) {
    if (written[j] || j == sum) skip[j] = false;
    if (skip[j] || aliased[j]) continue;
    for (const source& s : sources[j]) {
      if (s.index < m) skip[s.index] = false;
    }
  }
  // sin and cos of one input: the first of the two computes both (partner).
  constexpr std::size_t none = std::size_t(-1);
  std::vector<std::size_t> partner(m, none);
  for (std::size_t j = 0; j < m; ++j) {
    const kind a = kind_of(j);
    if ((a != kind::sin && a != kind::cos) || skip[j]) continue;
    for (std::size_t k = j + 1; k < m; ++k) {
      const kind b = kind_of(k);
      if ((b == kind::sin || b == kind::cos) && b != a && !skip[k] &&
          group[k].op->inputs[0] == group[j].op->inputs[0]) {
        partner[j] = k;
        skip[k] = true;
        break;
      }
    }
  }
  // Where each computed value's elements go: its own storage when written, the sum's block buffer,
  // or a scratch tile (values the pass skips get none).
  std::vector<bool> computed(m);
  for (std::size_t j = 0; j < m; ++j) computed[j] = !skip[j];
  for (std::size_t j = 0; j < m; ++j) {
    if (partner[j] != none) computed[partner[j]] = true;
  }
  std::vector<T*> base(m, nullptr);
  // Written values of a pass that writes more than the store rule allows (core/streaming.hpp) are
  // made in scratch tiles and copied out with streaming stores.
  std::size_t written_arrays = 0;
  for (std::size_t j = 0; j < m; ++j) written_arrays += written[j] && j != sum;
  const bool streams = streams_outputs(n * sizeof(T), written_arrays);
  if (streams) streamed_passes().fetch_add(1, std::memory_order_relaxed);
  std::vector<std::size_t> scratch_slot(m, 0);
  std::size_t scratch_count = 0;
  for (std::size_t j = 0; j < m; ++j) {
    if (written[j]) {
      values[j] = Tensor::for_overwrite<T>(group[j].state->deferred_shape, "a deferred elementwise value");
      base[j] = values[j].template mutable_array<T>().data();
      if (streams && j != sum) scratch_slot[j] = scratch_count++;
    } else if (computed[j] && j != sum) {
      scratch_slot[j] = scratch_count++;
    }
  }
  // A block (the unit of the thread split, and of sums) runs in tiles of 4 KB per value, so the
  // scratch tiles of a whole pass stay in the first-level cache; tiles sit a few cache lines
  // apart, so no two share cache sets at the same offset.
  constexpr std::size_t tile = 4096 / sizeof(T);
  constexpr std::size_t stride = tile + 128 / sizeof(T);
  const std::size_t blocks = (n + B - 1) / B;
  std::vector<T> partial(sum < m ? blocks : 0);
  // The arrays the pass walks in memory: inputs from filled tensors, and written values.
  std::vector<const T*> reads;
  std::vector<const T*> writes;
  for (std::size_t j = 0; j < m; ++j) {
    if (written[j]) writes.push_back(base[j]);
    if (skip[j]) continue;
    for (const source& s : sources[j]) {
      if (s.index == m && !s.broadcast && std::ranges::find(reads, s.data) == reads.end())
        reads.push_back(s.data);
    }
  }
  auto run_blocks = [&](std::size_t first, std::size_t last) {
    thread_local std::vector<T> scratch;
    const std::size_t need = scratch_count * stride + (sum < m ? B : 0);
    if (scratch.size() < need) scratch.resize(need);
    T* const sum_buffer = scratch.data() + scratch_count * stride;  // the summed value's block
    std::vector<const void*> in;
    for (std::size_t b = first; b < last; ++b) {
      const std::size_t block = b * B;
      const std::size_t block_len = std::min(B, n - block);
      for (std::size_t t = 0; t < block_len; t += tile) {
        const std::size_t offset = block + t;
        const std::size_t len = std::min(tile, block_len - t);
        // Ask for the next tile of every array the pass reads or writes in memory now: its lines
        // arrive while this tile's kernels run (the hardware prefetchers stop at the page a tile
        // fills).
        if (const std::size_t next = offset + tile; next < n) {
          const std::size_t bytes = std::min(tile, n - next) * sizeof(T);
          for (const T* p : reads) prefetch_for_read(p + next, bytes);
          if (!streams) {
            for (const T* p : writes) prefetch_for_write(p + next, bytes);
          }
        }
        auto at = [&](std::size_t j) -> T* {
          if (written[j] && (!streams || j == sum)) return base[j] + offset;
          return j == sum ? sum_buffer + t : scratch.data() + scratch_slot[j] * stride;
        };
        for (std::size_t j = 0; j < m; ++j) {
          if (skip[j]) continue;
          in.clear();
          std::uint32_t broadcast = 0;
          for (const auto& src : sources[j]) {
            if (src.broadcast) broadcast |= 1u << in.size();
            in.push_back(src.index < m ? at(src.index) : src.broadcast ? src.data : src.data + offset);
          }
          if (const std::size_t k = partner[j]; k != none) {
            const bool sin_first = kind_of(j) == kind::sin;
            sincos_block(at(sin_first ? j : k), at(sin_first ? k : j), static_cast<const T*>(in[0]), len);
          } else {
            group[j].op->run(at(j), in.data(), len, &group[j].op->constant, broadcast);
          }
        }
        if (streams) {
          for (std::size_t j = 0; j < m; ++j) {
            if (written[j] && j != sum) stream_copy(base[j] + offset, at(j), len);
          }
        }
      }
      if (sum < m)
        partial[b] = expr::detail::sum_block(written[sum] ? base[sum] + block : sum_buffer, block_len);
    }
    if (streams) stream_fence();
  };
  group[0].state->runtime->backend().run(n * m, [&] {
    if (blocks > 1 && tbb::this_task_arena::max_concurrency() > 1) {
      parallel_ranges(blocks, 2, split::adaptive, run_blocks);
    } else {
      run_blocks(0, blocks);
    }
  });
  if (sum < m) {
    T t = 0;
    for (const T p : partial) t += p;
    *total = t;
  }
  deferred_passes().fetch_add(1, std::memory_order_relaxed);
}

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
