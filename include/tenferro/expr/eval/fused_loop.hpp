// The fused SIMD loop of one pass and what tunes it: the element costs that decide threading,
// accumulator interleaving and streaming stores, the policies, and the padded tail batch. How a
// pass is set up and run around it is in pass.hpp.
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/streaming.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/eval/cse.hpp>
#include <tenferro/expr/eval/kernel.hpp>

#include <array>
#include <tuple>

namespace tenferro::expr::detail {

// Elements per chunk: the unit of threading and of deterministic reduction order.
inline constexpr std::size_t chunk_elements = 4096;

// A pass runs on oneTBB when its work, elements times the summed op costs of one element, reaches
// this; below it runs on the calling thread. Measured on 2 cores (docs/benchmarks.md):
// sum(square(x)) (cost 2 per element) gains from a second thread from 32768 elements on,
// sum(sin(x) * x + exp(x * x)) (cost 28) already at 8192.
inline constexpr std::size_t parallel_work = 65536;

// Summed op costs of evaluating one element of E (leaves and hoisted values cost nothing).
template <class E>
inline constexpr std::size_t tree_cost = 0;
template <class Op, class A>
inline constexpr std::size_t tree_cost<unary<Op, A>> = Op::cost + tree_cost<A>;
template <class Op, class L, class R>
inline constexpr std::size_t tree_cost<binary<Op, L, R>> = Op::cost + tree_cost<L> + tree_cost<R>;

// Summed costs of one element of a pass: its reduction bodies and its stored outputs.
template <class Reds, class Stores>
inline constexpr std::size_t pass_cost =
    []<class... R, class... S>(std::type_identity<std::tuple<R...>>, std::type_identity<std::tuple<S...>>) {
      return ((tree_cost<typename R::body_type> + 1) + ... + 0) +
             ((tree_cost<typename S::expr_type> + 1) + ... + 0);
    }(std::type_identity<Reds>{}, std::type_identity<Stores>{});

// Up to this cost per element a reduction is bound by the latency of its combining adds (sum(x),
// sum(square(x)), dot): the loop then alternates two accumulators. A costlier body hides that
// latency by itself and runs with one accumulator, so the flattened body is emitted once, not
// three times (both accumulators and the odd last batch): a third of the code to compile.
inline constexpr std::size_t interleave_cost = 8;

// Up to this cost per element a pass is bound by memory, and the store rule (core/streaming.hpp)
// decides whether its outputs go around the caches. Measured with the outputs streamed (one
// thread, AVX-512): the gradients of sum(square(x)) (cost 4) and of the normal log-pdf (11) at 1e7
// doubles take 2.7-2.9 ms instead of 3.7-3.9, but at 1e6 (8 MB, in the L3) 189-199 µs instead of
// 158-161; a pass with a transcendental function (log_sum_exp's, 13; sum(sin(x) * y + exp(x * y)),
// 28) was 5-15 % slower with them, and keeps ordinary stores.
inline constexpr std::size_t stream_cost = 12;

struct simd_policy {};
struct reference_policy {};  // one element at a time with std math, serial: the tests' oracle

template <class B>
B lane_indices() {
  using T = typename B::value_type;
  alignas(64) std::array<T, B::size> lanes{};
  for (std::size_t k = 0; k < B::size; ++k) lanes[k] = static_cast<T>(k);
  return B::load_unaligned(lanes.data());
}

// The lanes of a batch of B below `count` (B complex: of its real batch, which has as many lanes).
template <class B>
auto lanes_below(std::size_t count) {
  using R = xsimd::batch<real_t<typename B::value_type>, typename B::arch_type>;
  using RT = typename R::value_type;
  return lane_indices<R>() < R(static_cast<RT>(count));
}

template <class Op, class B>
typename B::value_type horizontal(const B& acc) {
  using T = typename B::value_type;
  alignas(64) std::array<T, B::size> lanes{};
  acc.store_unaligned(lanes.data());
  // Pairwise, in a fixed order: log2(lanes) dependent combines rather than lanes - 1, which at a
  // few batches per call were a visible part of the call.
  for (std::size_t half = B::size / 2; half > 0; half /= 2) {
    for (std::size_t k = 0; k < half; ++k) lanes[k] = Op::combine(lanes[k], lanes[k + half]);
  }
  return lanes[0];
}

// One padded batch of every array leaf, starting at element i, `count` < batch size valid.
template <class T, std::size_t W, class Leaves>
auto padded_leaves(const Leaves& leaves, std::size_t i, std::size_t count,
                   std::array<std::array<T, W>, std::tuple_size_v<Leaves>>& buffers) {
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto pad = [&](const auto& leaf, std::array<T, W>& buf) {
      using Leaf = std::remove_cvref_t<decltype(leaf)>;
      if constexpr (std::is_same_v<Leaf, array_leaf<T>>) {
        if (leaf.broadcast()) return leaf;
        std::copy(leaf.data + i, leaf.data + i + count, buf.begin());
        std::fill(buf.begin() + count, buf.end(), leaf.data[i + count - 1]);  // a value in the domain
        return array_leaf<T>{buf.data()};
      } else {
        return leaf;
      }
    };
    return Leaves{pad(std::get<K>(leaves), buffers[K])...};
  }
  (std::make_index_sequence<std::tuple_size_v<Leaves>>{});
}

// The fused loop: `count` elements (a whole number of batches) from element `at`, the start of a
// chunk, with `flushes` whole chunks first (see the end of the loop). Flattened so
// that the whole tree, xsimd's math included, is one loop body: the compiler then computes a
// subexpression shared by the value and the gradients (exp(x * y) in sin(x) * y + exp(x * y))
// once. It is instantiated and compiled once per pass: the last partial batch goes through it too
// (padded, see run_hoisted_pass) by a call rather than a second inlined copy. Shared lists the
// subtrees computed once per batch (cse.hpp); every occurrence of one has the same value (the pass
// checked), so the body holds no run-time test of it.
template <class T, class Shared, class Reps, class Reds, class Stores, class Leaves, class Acc,
          std::size_t NR>
TENFERRO_FLATTEN TENFERRO_ONE_COPY void fused_loop(const Reds& reds, const Stores& stores_in,
                                                   const std::array<bool, NR>& active,
                                                   const Reps& reps, const Leaves& leaves_in,
                                                   const T* results, T count_n, std::size_t at,
                                                   std::size_t count, Acc& acc, std::array<T, NR>* partial,
                                                   std::size_t flushes, bool stream) {
  using B = xsimd::batch<T>;
  constexpr std::size_t W = B::size;
  // Local copies of the input and output pointers and of the trees (their hoisted values): a SIMD
  // store may alias any memory, so what is read through pointers would be loaded again after
  // every store; these stay in registers.
  const Leaves leaves = leaves_in;
  const Stores stores = stores_in;
  const auto bodies = std::apply([](const auto&... r) { return std::tuple{*r.body...}; }, reds);
  const auto exprs = std::apply([](const auto&... t) { return std::tuple{*t.expr...}; }, stores);
  const auto rep_nodes = std::apply([](const auto&... r) { return std::tuple{*r.node...}; }, reps);
  // And of the flags, which are then known not to change while the loop stores.
  const std::array<bool, NR> active_local = active;
  auto step = [&](std::size_t i, Acc& into) {
    const auto registers = std::apply(
        [&](const auto&... leaf) { return std::tuple{register_leaf<B>{leaf.template load<B>(i)}...}; },
        leaves);
    constexpr std::size_t M = std::tuple_size_v<Reps>;
    std::array<B, M> shared;
    const element_context<T, std::remove_const_t<decltype(registers)>, Shared, B> ctx{
        registers, results, count_n, i, shared.data()};
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto fill = [&]<std::size_t Kc>(std::integral_constant<std::size_t, Kc>) {
        using Rep = std::tuple_element_t<Kc, Reps>;
        using S = std::tuple_element_t<Kc, std::remove_const_t<decltype(rep_nodes)>>;
        using P = typename pair_partner<S>::type;
        constexpr std::size_t partner = std::is_void_v<P> ? not_shared : shared_index<Shared, P>;
        if constexpr (partner == not_shared) {
          shared[Kc] = eval_node<Rep::base, B>(std::get<Kc>(rep_nodes), ctx);
        } else if constexpr (pair_slot_of<S> == 0) {
          const auto [first, second] =
              S::op_type::pair_batch(eval_batch<Rep::base, B>(std::get<Kc>(rep_nodes).operand, ctx));
          shared[Kc] = first;
          shared[partner] = second;
        }  // the second half of a pair (a cos with a sin partner): filled with the first
      };
      (void)fill;
      (fill(std::integral_constant<std::size_t, K>{}), ...);
    }
    (std::make_index_sequence<M>{});
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      auto reduce_one = [&]<std::size_t Jc>(std::integral_constant<std::size_t, Jc>) {
        using Task = std::tuple_element_t<Jc, Reds>;
        // A duplicate of an earlier reduction: computed only when its constants differ (never
        // when its body holds none, decided here rather than per batch).
        if constexpr (first_same_task<Reds, Jc>() != Jc) {
          if (!holds_values<typename Task::body_type> || !active_local[Jc]) return;
        }
        into[Jc] = Task::op::combine(into[Jc], eval_batch<Task::id + 1, B>(std::get<Jc>(bodies), ctx));
      };
      (void)reduce_one;  // unused when the pass has no reduction
      (reduce_one(std::integral_constant<std::size_t, J>{}), ...);
    }
    (std::make_index_sequence<NR>{});
    [&]<std::size_t... S>(std::index_sequence<S...>) {
      auto store_one = [&]<std::size_t Sc>(std::integral_constant<std::size_t, Sc>) {
        using Task = std::tuple_element_t<Sc, Stores>;
        const B v = eval_batch<Task::base, B>(std::get<Sc>(exprs), ctx);
        T* const to = std::get<Sc>(stores).out + i;
        if constexpr (!requires { typename B::register_type; }) {  // complex: two registers
          v.store_unaligned(to);
        } else if (stream) {
          tenferro::detail::stream_register(static_cast<typename B::register_type>(v), to);
        } else {
          v.store_unaligned(to);
        }
      };
      (void)store_one;
      (store_one(std::integral_constant<std::size_t, S>{}), ...);
    }
    (std::make_index_sequence<std::tuple_size_v<Stores>>{});
  };
  // The first `flushes` chunks (whole ones) each reduce from the identity into partial[c]; the
  // rest of the elements (the range's last chunk) into acc. One loop for a run of chunks, so the
  // accumulators stay in registers across them. Without reductions, one stretch.
  const std::size_t chunks_out = NR > 0 ? flushes : 0;
  for (std::size_t c = 0;; ++c) {
    const bool last = c == chunks_out;
    const std::size_t from = at + c * chunk_elements;
    const std::size_t len = last ? count - c * chunk_elements : chunk_elements;
    Acc local = acc;  // in registers, not behind the reference
    if (!last) {
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        ((local[J] = B(std::tuple_element_t<J, Reds>::op::template identity<T>())), ...);
      }
      (std::make_index_sequence<NR>{});
    }
    if constexpr (NR > 0 && pass_cost<Reds, Stores> <= interleave_cost) {
      // Two independent accumulators, in registers. Fixed order, so still deterministic.
      Acc odd;
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        ((odd[J] = B(std::tuple_element_t<J, Reds>::op::template identity<T>())), ...);
      }
      (std::make_index_sequence<NR>{});
      std::size_t k = 0;
      for (; k + 2 * W <= len; k += 2 * W) {
        step(from + k, local);
        step(from + k + W, odd);
      }
      if (k < len) step(from + k, local);
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        ((local[J] = std::tuple_element_t<J, Reds>::op::combine(local[J], odd[J])), ...);
      }
      (std::make_index_sequence<NR>{});
    } else {
      for (std::size_t k = 0; k < len; k += W) step(from + k, local);
    }
    if (last) {
      acc = local;
      return;
    }
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      ((partial[c][J] = horizontal<typename std::tuple_element_t<J, Reds>::op>(local[J])), ...);
    }
    (std::make_index_sequence<NR>{});
  }
}

}  // namespace tenferro::expr::detail
