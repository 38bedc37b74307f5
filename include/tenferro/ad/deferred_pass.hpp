// One pass of deferred fusion (ad/deferred.hpp): the plan of a group of deferred values (which
// values alias, which are skipped, which sin/cos pairs share a sincos, where each value's blocks
// go) and the loop over blocks and tiles that runs their kernels. What to compute and when, and
// publishing the results, are in ad/deferred.hpp.
//
// Under TENFERRO_SEPARATE_COMPILATION the pass is compiled once (core/detail/config.hpp).
#pragma once

#include <tenferro/ad/record.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/parallel.hpp>
#include <tenferro/core/streaming.hpp>
#include <tenferro/cpu/fused.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace tenferro::detail::ad {

// Elements of one block of a pass: one chunk of the fused loop, so a block's sum is the partial the
// fused sum of the whole array computes for it.
inline constexpr std::size_t block_elements = expr::detail::chunk_elements;

// Passes that computed deferred values in this process (tests use it to show a chain is one pass).
inline std::atomic<std::uint64_t>& deferred_passes() noexcept {
  static std::atomic<std::uint64_t> count{0};
  return count;
}

// A deferred value in a pass's plan, with its own reference to its op (which keeps the op's
// inputs alive while the pass runs, whatever other threads publish meanwhile).
struct planned_value {
  const tensor_state* state;
  std::shared_ptr<const deferred_op> op;
};

}  // namespace tenferro::detail::ad

#if TENFERRO_HEADER_ONLY

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
  // (The rule counts every value written; a summed one is written as it is summed, not streamed.)
  std::size_t written_arrays = 0, streamable = 0;
  for (std::size_t j = 0; j < m; ++j) {
    written_arrays += written[j];
    streamable += written[j] && j != sum;
  }
  const bool streams = streamable > 0 && streams_outputs(n * sizeof(T), written_arrays);
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
    if (blocks > 1) {  // on one thread, parallel_ranges runs them in order
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

}  // namespace tenferro::detail::ad

#endif  // TENFERRO_HEADER_ONLY
