// One pass over the data: the fused SIMD loop (simd_policy) and the element-by-element oracle
// the tests compare it with (reference_policy).
//
// The loop runs over chunks of `chunk_elements` (whole SIMD batches) split with oneTBB in the
// current task arena once the pass has enough work (`parallel_work`). Each chunk reduces into its own
// partial, and partials are combined in chunk order, so reductions are bit-identical for any thread count and
// from run to run. The last partial batch of the data is padded and masked and goes through the same kernel
// as the body, so a result never depends on an element's position.
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/parallel.hpp>
#include <tenferro/core/streaming.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/eval/broadcast.hpp>
#include <tenferro/expr/eval/cse.hpp>
#include <tenferro/expr/eval/fused_loop.hpp>
#include <tenferro/expr/eval/hoist.hpp>
#include <tenferro/expr/eval/kernel.hpp>

#include <algorithm>
#include <array>
#include <tuple>
#include <vector>

namespace tenferro::expr::detail {

// The first occurrence of S among the trees of a pass (reduction bodies, then stored outputs).
template <class S, class Reds, class Stores>
auto first_in_pass(const Reds& reds, const Stores& stores) {
  constexpr std::size_t NR = std::tuple_size_v<Reds>;
  constexpr std::size_t index = []<class... R, class... T>(std::type_identity<std::tuple<R...>>,
                                                           std::type_identity<std::tuple<T...>>) {
    constexpr std::array<bool, sizeof...(R) + sizeof...(T)> has{contains<S, typename R::body_type>...,
                                                                contains<S, typename T::expr_type>...};
    std::size_t k = 0;
    while (!has[k]) ++k;
    return k;
  }(std::type_identity<Reds>{}, std::type_identity<Stores>{});
  if constexpr (index < NR) {
    const auto& task = std::get<index>(reds);
    return first_occurrence<S, std::remove_cvref_t<decltype(task)>::id + 1>(*task.body);
  } else {
    const auto& task = std::get<index - NR>(stores);
    return first_occurrence<S, std::remove_cvref_t<decltype(task)>::base>(*task.expr);
  }
}

template <class T, class Reds, class Stores, class Leaves>
void run_hoisted_pass(const Reds& reds, const Stores& stores, const Leaves& leaves, std::size_t n,
                      T* results) {
  using B = xsimd::batch<T>;
  constexpr std::size_t W = B::size;
  static_assert(chunk_elements % W == 0);
  constexpr std::size_t NR = std::tuple_size_v<Reds>;
  constexpr std::size_t NS = std::tuple_size_v<Stores>;
  // Stores that sum (store_task::sum): the loop writes each chunk of them to a scratch chunk in
  // the first-level cache, summed when the chunk is done; so the loop itself is the same for
  // every pass, and costs nothing more when no store sums.
  const bool sums = std::apply([](const auto&... t) { return (t.sum || ... || false); }, stores);

  // A duplicate reduction (same type, same constants as an earlier one) is computed once.
  std::array<bool, NR> active{};
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    // A duplicate shares the loop's work and applies its own scale and offset (hoist.hpp).
    auto differs = [&](const auto& a, const auto& b) { return !same_values(*a.body, *b.body); };
    (void)differs;  // unused when the pass has no reduction
    ((active[J] = first_same_task<Reds, J>() == J ||
                  differs(std::get<J>(reds), std::get<first_same_task<Reds, J>()>(reds))),
     ...);
  }
  (std::make_index_sequence<NR>{});

  const std::size_t chunks = (n + chunk_elements - 1) / chunk_elements;
  // One partial per chunk; on the stack up to 2^20 elements (at most 16 bytes per reduction and
  // chunk), so a pass of up to that many allocates nothing.
  constexpr std::size_t inline_chunks = 256;
  std::array<std::array<T, NR>, inline_chunks> partial_inline;
  std::vector<std::array<T, NR>> partial_heap(NR > 0 && chunks > inline_chunks ? chunks : 0);
  std::array<T, NR>* partial = chunks > inline_chunks ? partial_heap.data() : partial_inline.data();
  const T count_n = static_cast<T>(n);

  // Subtrees shared by the trees of this pass (cse.hpp), with their first occurrences.
  using Shared = decltype(
      []<class... R, class... S>(std::type_identity<std::tuple<R...>>, std::type_identity<std::tuple<S...>>) {
        return shared_subtrees_t<typename R::body_type..., typename S::expr_type...>{};
      }(std::type_identity<Reds>{}, std::type_identity<Stores>{}));
  // Apply f(tree, base-constant) to every tree of the pass.
  auto for_each_tree = [&](auto&& f) {
    std::apply(
        [&](const auto&... r) {
          (f(*r.body, std::integral_constant<std::size_t, std::remove_cvref_t<decltype(r)>::id + 1>{}), ...);
        },
        reds);
    std::apply(
        [&](const auto&... t) {
          (f(*t.expr, std::integral_constant<std::size_t, std::remove_cvref_t<decltype(t)>::base>{}), ...);
        },
        stores);
  };
  const auto reps = [&]<class... S>(type_list<S...>) {
    return std::tuple{first_in_pass<S>(reds, stores)...};
  }(Shared{});
  // Sharing is sound when every occurrence of each shared subtree has the value of the one
  // computed. Equal types can differ in their constants (sin(2 * x) and sin(3 * x)); a pass where
  // one does runs a second copy of the loop that shares only the subtrees holding no constants
  // (their occurrences cannot differ), compiled only when a shared subtree holds constants at all.
  // Decided once here, so the loop body tests nothing per batch.
  constexpr bool may_differ = []<class... S>(type_list<S...>) { return (holds_values<S> || ... || false); }(Shared{});
  bool share = true;
  if constexpr (may_differ) {
    for_each_tree([&](const auto& tree, auto) {
      for_each_subtree(tree, [&](const auto& node) {
        using N = std::remove_cvref_t<decltype(node)>;
        constexpr std::size_t k = shared_index<Shared, N>;
        if constexpr (k != not_shared && holds_values<N>) {
          // A cos filled by its sin partner's sincos (the second half of a pair filled by the
          // first) needs the first's operand; anything else its own first occurrence.
          using P = typename pair_partner<N>::type;
          if constexpr (pair_slot_of<N> == 1 && shared_index<Shared, P> != not_shared) {
            share = share && same_values(node.operand, std::get<shared_index<Shared, P>>(reps).node->operand);
          } else {
            share = share && same_values(node, *std::get<k>(reps).node);
          }
        }
      });
    });
  }
  using Plain = decltype([]<class... S>(type_list<S...>) {
    return typename concat_lists<std::conditional_t<holds_values<S>, type_list<>, type_list<S>>...>::type{};
  }(Shared{}));
  const auto plain_reps = [&]<class... S>(type_list<S...>) {
    return std::tuple{std::get<shared_index<Shared, S>>(reps)...};
  }(Plain{});
  (void)plain_reps;  // unused when no shared subtree holds constants
  auto loop = [&](const Stores& st, const Leaves& lv, std::size_t at, std::size_t count, auto& into,
                  std::array<T, NR>* to, std::size_t flushes, bool streaming) {
    if constexpr (may_differ) {
      if (!share) {
        fused_loop<T, Plain>(reds, st, active, plain_reps, lv, results, count_n, at, count, into, to, flushes,
                             streaming);
        return;
      }
    }
    fused_loop<T, Shared>(reds, st, active, reps, lv, results, count_n, at, count, into, to, flushes, streaming);
  };

  // The outputs of a pass bound by memory (stream_cost), aligned to a batch as tenferro's arrays
  // are, go around the caches when together they exceed the store rule's threshold
  // (core/streaming.hpp).
  const bool stream = [&] {
    if constexpr (pass_cost<Reds, Stores> > stream_cost || NS == 0) {
      return false;
    } else {
      bool aligned = !sums;
      std::apply(
          [&](const auto&... t) {
            ((aligned = aligned && reinterpret_cast<std::uintptr_t>(t.out) % sizeof(B) == 0), ...);
          },
          stores);
      return aligned && tenferro::detail::streams_outputs(n * sizeof(T), NS);
    }
  }();
  if (stream) tenferro::detail::streamed_passes().fetch_add(1, std::memory_order_relaxed);

  // Chunks [first, last) with stores `st` and leaves `lv`, whose element 0 is element `offset` of
  // the pass: the partials of all but the last come out of the loop, the last one's after its
  // padded tail batch.
  auto run_range = [&](std::size_t first, std::size_t last, const Stores& st, const Leaves& lv,
                       std::size_t offset) {
    const std::size_t c = last - 1;
    const std::size_t begin = first * chunk_elements - offset;
    const std::size_t end = std::min(n, last * chunk_elements) - offset;
    std::array<B, NR> acc;
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      ((acc[J] = B(std::tuple_element_t<J, Reds>::op::template identity<T>())), ...);
    }
    (std::make_index_sequence<NR>{});

    const std::size_t body_end = begin + (end - begin) / W * W;
    loop(st, lv, begin, body_end - begin, acc, NR > 0 ? partial + first : nullptr, last - 1 - first, stream);
    if (body_end < end) {
      // The last partial batch: inputs padded with an in-domain value, outputs written to a
      // batch-sized buffer and copied out, reductions masked to the valid lanes.
      const std::size_t count = end - body_end;
      std::array<std::array<T, W>, std::tuple_size_v<Leaves>> in_buffers;
      const Leaves tail = padded_leaves<T, W>(lv, body_end, count, in_buffers);
      std::array<std::array<T, W>, NS> out_buffers;
      Stores tail_stores = st;
      [&]<std::size_t... S>(std::index_sequence<S...>) {
        ((std::get<S>(tail_stores).out = out_buffers[S].data()), ...);
      }
      (std::make_index_sequence<NS>{});
      std::array<B, NR> tail_acc;
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        ((tail_acc[J] = B(std::tuple_element_t<J, Reds>::op::template identity<T>())), ...);
      }
      (std::make_index_sequence<NR>{});
      loop(tail_stores, tail, 0, W, tail_acc, partial, 0, false);
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        ((acc[J] = std::tuple_element_t<J, Reds>::op::combine(
              acc[J], xsimd::select(lanes_below<B>(count), tail_acc[J],
                                    B(std::tuple_element_t<J, Reds>::op::template identity<T>())))),
         ...);
      }
      (std::make_index_sequence<NR>{});
      [&]<std::size_t... S>(std::index_sequence<S...>) {
        (std::copy(out_buffers[S].begin(), out_buffers[S].begin() + count, std::get<S>(st).out + body_end),
         ...);
      }
      (std::make_index_sequence<NS>{});
    }
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      ((partial[c][J] = horizontal<typename std::tuple_element_t<J, Reds>::op>(acc[J])), ...);
    }
    (std::make_index_sequence<NR>{});
    if (stream)
      tenferro::detail::stream_fence();  // before the task ends and another thread reads the outputs
  };
  // Leaves filled chunk by chunk (gather_source): then the pass runs chunk by chunk, as it does
  // with stores that sum.
  constexpr std::size_t NL = std::tuple_size_v<Leaves>;
  const bool gathers = std::apply([](const auto&... leaf) { return (gathered(leaf) || ... || false); }, leaves);
  std::vector<std::array<T, NS>> store_partial(sums ? chunks : 0);
  auto run_chunks = [&](std::size_t first, std::size_t last) {
    if (!sums && !gathers) {
      run_range(first, last, stores, leaves, 0);
      return;
    }
    // Per thread: a chunk for each store (those that sum use theirs) and each leaf (those
    // gathered use theirs). Nothing here waits on other tasks, so no other pass runs on this
    // thread while the scratch is in use.
    thread_local std::vector<T> scratch;
    if (scratch.size() < (NS + NL) * chunk_elements) scratch.resize((NS + NL) * chunk_elements);
    for (std::size_t c = first; c < last; ++c) {  // each chunk with its own element 0
      const std::size_t base = c * chunk_elements;
      const std::size_t len = std::min(chunk_elements, n - base);
      Stores st = stores;
      [&]<std::size_t... S>(std::index_sequence<S...>) {
        auto rebase = [&](auto& task, std::size_t s) {
          task.out = task.sum ? scratch.data() + s * chunk_elements : task.out + base;
        };
        (void)rebase;
        (rebase(std::get<S>(st), S), ...);
      }
      (std::make_index_sequence<NS>{});
      const Leaves lv = [&]<std::size_t... K>(std::index_sequence<K...>) {
        return Leaves{chunk_of(std::get<K>(leaves), base, len, scratch.data() + (NS + K) * chunk_elements)...};
      }
      (std::make_index_sequence<NL>{});
      run_range(c, c + 1, st, lv, base);
      [&]<std::size_t... S>(std::index_sequence<S...>) {
        ((std::get<S>(st).sum ? void(store_partial[c][S] = chunk_sum(scratch.data() + S * chunk_elements, len))
                              : void()),
         ...);
      }
      (std::make_index_sequence<NS>{});
    }
  };

  constexpr std::size_t cost = pass_cost<Reds, Stores>;
  if (chunks > 1 && n * cost >= parallel_work) {  // on one thread, parallel_ranges runs them in order
    tenferro::detail::parallel_ranges(chunks, 1, tenferro::detail::split::even, run_chunks);
  } else if (chunks > 0) {
    run_chunks(0, chunks);
  }

  [&]<std::size_t... J>(std::index_sequence<J...>) {
    auto finish = [&]<std::size_t Jc>(std::integral_constant<std::size_t, Jc>) {
      using Task = std::tuple_element_t<Jc, Reds>;
      // A duplicate reads its first copy's partials.
      const std::size_t from = active[Jc] ? Jc : first_same_task<Reds, Jc>();
      T total = Task::op::template identity<T>();
      for (std::size_t c = 0; c < chunks; ++c) total = Task::op::combine(total, partial[c][from]);
      const auto& task = std::get<Jc>(reds);
      if constexpr (!Real<T>) {  // never hoisted (run_pass)
        results[Task::id] = total;
      } else {
        results[Task::id] =
            static_cast<T>(static_cast<double>(total) * task.scale + static_cast<double>(n) * task.offset);
      }
    };
    (void)finish;
    (finish(std::integral_constant<std::size_t, J>{}), ...);
  }
  (std::make_index_sequence<NR>{});
  if (sums) {  // chunk partials of the summing stores, in chunk order
    [&]<std::size_t... S>(std::index_sequence<S...>) {
      auto finish = [&](auto& task, std::size_t s) {
        if (!task.sum) return;
        T total = 0;
        for (std::size_t c = 0; c < chunks; ++c) total += store_partial[c][s];
        task.out[0] = total;
      };
      (void)finish;
      (finish(std::get<S>(stores), S), ...);
    }
    (std::make_index_sequence<NS>{});
  }
}

// One pass: hoist the loop-invariant subtrees of every tree (hoist.hpp), then run the loop.
template <class T, class Reds, class Stores, class Leaves>
void run_pass(simd_policy, const Reds& reds, const Stores& stores, const Leaves& leaves, std::size_t n,
              T* results) {
  if constexpr (!Real<T>) {  // hoisted values and factors are doubles (and integer division does
    run_hoisted_pass<T>(reds, stores, leaves, n, results);  // not distribute): integers and
  } else {                                                  // complex values run as they are
    const element_context<T, Leaves> ctx{leaves, results, static_cast<T>(n), 0};
    // A sum keeps its varying part in the loop; a max keeps its body as it is.
    auto prepare = [&](const auto& r) {
      using Task = std::remove_cvref_t<decltype(r)>;
      auto body = hoist<Task::id + 1>(*r.body, ctx);
      if constexpr (std::is_same_v<typename Task::op, ops::sum>) {
        return split_sum(body);
      } else {
        return affine_sum<decltype(body)>{1.0, 0.0, body};
      }
    };
    const auto bodies = std::apply([&](const auto&... r) { return std::tuple{prepare(r)...}; }, reds);
    const auto exprs = std::apply(
        [&](const auto&... t) {
          return std::tuple{fold_factors(hoist<std::remove_cvref_t<decltype(t)>::base>(*t.expr, ctx))...};
        },
        stores);
    const auto hoisted_reds = [&]<std::size_t... J>(std::index_sequence<J...>) {
      return std::tuple{
          reduce_task<std::tuple_element_t<J, Reds>::id, typename std::tuple_element_t<J, Reds>::op,
                      decltype(std::get<J>(bodies).rest)>{
              &std::get<J>(bodies).rest, std::get<J>(bodies).scale, std::get<J>(bodies).offset}...};
    }
    (std::make_index_sequence<std::tuple_size_v<Reds>>{});
    const auto hoisted_stores = [&]<std::size_t... S>(std::index_sequence<S...>) {
      return std::tuple{store_task<std::tuple_element_t<S, Stores>::base,
                                   std::tuple_element_t<S, std::remove_const_t<decltype(exprs)>>, T>{
          &std::get<S>(exprs), std::get<S>(stores).out, std::get<S>(stores).sum}...};
    }
    (std::make_index_sequence<std::tuple_size_v<Stores>>{});
    run_hoisted_pass<T>(hoisted_reds, hoisted_stores, leaves, n, results);
  }
}

template <class T, class Reds, class Stores, class Leaves>
void run_pass(reference_policy, const Reds& reds, const Stores& stores, const Leaves& gathered_leaves,
              std::size_t n, T* results) {
  // Gathered leaves filled whole: the oracle reads every input by position.
  std::vector<std::vector<T>> filled(std::tuple_size_v<Leaves>);
  const Leaves leaves = [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto fill = [&](const auto& leaf, std::vector<T>& buffer) {
      if (!gathered(leaf) || n == 0) return leaf;
      buffer.resize(n);
      return chunk_of(leaf, 0, n, buffer.data());
    };
    return Leaves{fill(std::get<K>(gathered_leaves), filled[K])...};
  }
  (std::make_index_sequence<std::tuple_size_v<Leaves>>{});
  constexpr std::size_t NR = std::tuple_size_v<Reds>;
  std::array<T, NR> acc;
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    ((acc[J] = std::tuple_element_t<J, Reds>::op::template identity<T>()), ...);
  }
  (std::make_index_sequence<NR>{});
  for (std::size_t i = 0; i < n; ++i) {
    const element_context<T, Leaves> ctx{leaves, results, static_cast<T>(n), i};
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      ((acc[J] = std::tuple_element_t<J, Reds>::op::combine(
            acc[J], eval_element<std::tuple_element_t<J, Reds>::id + 1, T>(*std::get<J>(reds).body, ctx))),
       ...);
    }
    (std::make_index_sequence<NR>{});
    auto store = [&](const auto& task) {
      const T v = eval_element<std::remove_cvref_t<decltype(task)>::base, T>(*task.expr, ctx);
      if (!task.sum) {
        task.out[i] = v;
      } else {
        task.out[0] = i == 0 ? v : task.out[0] + v;
      }
    };
    std::apply([&](const auto&... task) { (store(task), ...); }, stores);
  }
  if (n == 0) {
    std::apply([&](const auto&... task) { ((task.sum ? void(task.out[0] = T(0)) : void()), ...); }, stores);
  }
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    ((results[std::tuple_element_t<J, Reds>::id] = acc[J]), ...);
  }
  (std::make_index_sequence<NR>{});
}

}  // namespace tenferro::expr::detail
