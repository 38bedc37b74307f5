// Splitting a loop over [0, count) with oneTBB in the current task arena, behind a type-erased
// body. A oneTBB loop template instantiates a task type, its execution, splitting and cancellation for
// every body type; every fused pass has a body type of its own, so calling one directly costs that
// instantiation per pass (in the compile time of every translation unit that takes a gradient).
// Through range_fn it is instantiated once per translation unit; the price is one indirect call
// per range, each range being thousands of elements.
#pragma once

#include <tenferro/core/detail/handoff.hpp>

#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>

namespace tenferro::detail {

class range_fn;

// What range_fn refers to: any callable but a range_fn itself (a copy of a range_fn stays a copy).
template <class F>
concept range_body = !std::is_same_v<std::remove_cv_t<F>, range_fn>;

// A non-owning reference to a callable `void(std::size_t begin, std::size_t end)`; the callable
// must outlive the call it is passed to.
class range_fn {
 public:
  template <range_body F>
  range_fn(F& f) noexcept  // NOLINT(google-explicit-constructor): a parameter type, like std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, std::size_t begin, std::size_t end) {
          (*static_cast<F*>(object))(begin, end);
        }) {}

  void operator()(std::size_t begin, std::size_t end) const { call_(object_, begin, end); }

 private:
  void* object_;
  void (*call_)(void*, std::size_t, std::size_t);
};

// How parallel_ranges calls its body when it splits the loop: `even` once per range of exactly
// `grain` indices (the last may be shorter), so the boundaries do not depend on the threads;
// `adaptive` once per share a thread takes (whole ranges of `grain` indices). On one thread, or
// when `count <= grain`, both call it once over [0, count).
enum class split { even, adaptive };

// body(begin, end) for ranges that together cover [0, count) exactly once, on the threads of the
// current task arena.
//
// The calling thread and one task per other thread of the arena (oneTBB's task_group) take shares
// of the ranges from one shared counter until none is left, each share a run of neighbouring ranges
// of 1 / (2 * threads) of those left (guided scheduling). A thread thus walks long runs of memory
// (interleaving single ranges between two threads made a memory-bound pass over 1e7 doubles 1.6x
// slower), the shares shrink towards the end so the threads finish together, and a thread that
// starts late or is busy elsewhere simply takes fewer. Unlike tbb::parallel_for, whose last task
// reads a node on the caller's stack after the caller may already see the loop finished, a task here
// touches the caller's stack only between the fork and join hand-offs (plain reads of the captures,
// atomic updates of the counters), and after the join only the task group's own count, which the
// caller reads with acquire ordering before it returns: ThreadSanitizer sees that order too
// (core/detail/handoff.hpp, tests/tsan.supp).
//
// The task group has an isolated context: a loop run inside a task whose group was cancelled (or
// failed) still covers every index, instead of silently skipping all of them.
inline void parallel_ranges(std::size_t count, std::size_t grain, split how, range_fn body) {
  const auto threads = static_cast<std::size_t>(std::max(1, tbb::this_task_arena::max_concurrency()));
  grain = std::max<std::size_t>(grain, 1);
  // On one thread, or for one range: one call over the whole range, in order, with no task at all
  // (tbb::parallel_for in an arena of one thread scaled log_sum_exp's gradient in place, 1e6
  // doubles, in about 216 µs where one call took 119: perf samples, one thread pinned).
  if (threads == 1 || count <= grain) {
    if (count > 0) body(0, count);
    return;
  }
  const std::size_t ranges = count / grain + (count % grain != 0);
  std::atomic<std::size_t> next{0};  // the first range no thread has taken
  std::atomic<bool> failed{false};   // a range threw: the others stop before their next range
  // For ThreadSanitizer (core/detail/handoff.hpp): what the caller did before the loop happens
  // before every range, and every range before what the caller does after it.
  tsan_handoff fork, join;
  auto work = [&] {
    fork.acquire();
    const tsan_release_at_exit done{join};
    for (;;) {
      std::size_t first = next.load(std::memory_order_relaxed);
      std::size_t share = 0;
      do {
        if (first >= ranges) return;
        share = std::max<std::size_t>(1, (ranges - first) / (2 * threads));
      } while (!next.compare_exchange_weak(first, first + share, std::memory_order_relaxed));
      try {
        if (how == split::adaptive) {
          body(first * grain, std::min(count, (first + share) * grain));
        } else {
          for (std::size_t r = first; r < first + share && !failed.load(std::memory_order_relaxed); ++r)
            body(r * grain, std::min(count, (r + 1) * grain));
        }
      } catch (...) {
        failed.store(true, std::memory_order_relaxed);
        next.store(ranges, std::memory_order_relaxed);  // and no thread takes a new share
        throw;                                          // rethrown by run_and_wait once all have stopped
      }
    }
  };
  // Both made before the hand-off: the tasks' last act is to count down in the group.
  tbb::task_group_context context{tbb::task_group_context::isolated};
  tbb::task_group group{context};
  fork.release();
  const tsan_acquire_at_exit joined{join};
  for (std::size_t t = 1; t < std::min(threads, ranges); ++t) group.run(work);
  group.run_and_wait(work);
}

}  // namespace tenferro::detail
