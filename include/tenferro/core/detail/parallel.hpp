// Running work in a oneTBB task arena (execute_in), and splitting a loop over [0, count) with
// oneTBB in the current task arena (parallel_ranges), behind a type-erased body.
// tbb::parallel_for instantiates a task type, its execution, splitting and cancellation for every
// body type; every fused pass has a body type of its own, so calling it directly costs that
// instantiation per pass (in the compile time of every translation unit that takes a gradient).
// Through range_fn it is instantiated once per translation unit; the price is one indirect call
// per range, each range being thousands of elements.
#pragma once

#include <tenferro/core/detail/config.hpp>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#if TENFERRO_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace tenferro::detail {

// ThreadSanitizer does not see oneTBB's own synchronization (the library is not instrumented):
// handing work to another thread and waiting for it are announced to it here, around each task
// tenferro gives oneTBB, so that it checks tenferro's code against the real order of events.
// (tests/tsan.supp silences its reports on oneTBB's own objects, and on the captures read here
// before a hand-off is announced.)
// Without ThreadSanitizer these do nothing.
class tsan_handoff {
 public:
  void release() noexcept {
#if TENFERRO_TSAN
    __tsan_release(&token_);
#endif
  }
  void acquire() noexcept {
#if TENFERRO_TSAN
    __tsan_acquire(&token_);
#endif
  }

 private:
  [[maybe_unused]] char token_ = 0;
};

// Runs f() inside `arena` (oneTBB runs it on this thread or hands it to one of the arena's) and
// returns its result; an exception from f propagates.
template <class F>
decltype(auto) execute_in(tbb::task_arena& arena, F&& f) {
#if TENFERRO_TSAN
  // Everything the task touches is made before the hand-off is announced.
  using result = std::invoke_result_t<F&>;
  using stored = std::conditional_t<std::is_reference_v<result>, std::remove_reference_t<result>*,
                                    std::optional<std::conditional_t<std::is_void_v<result>, char, result>>>;
  tsan_handoff handoff;
  stored out{};
  struct finished {
    tsan_handoff& h;
    ~finished() { h.release(); }
  };
  auto task = [&] {
    handoff.acquire();
    const finished done{handoff};
    if constexpr (std::is_void_v<result>) {
      f();
    } else if constexpr (std::is_reference_v<result>) {
      out = &f();
    } else {
      out.emplace(f());
    }
  };
  handoff.release();
  try {
    arena.execute(task);
  } catch (...) {
    handoff.acquire();
    throw;
  }
  handoff.acquire();
  if constexpr (std::is_reference_v<result>) {
    return static_cast<result>(*out);
  } else if constexpr (!std::is_void_v<result>) {
    return result(std::move(*out));
  }
#else
  return arena.execute(std::forward<F>(f));
#endif
}

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

// How parallel_ranges splits: `even` down to ranges of at most `grain` indices, one task each;
// `adaptive` as oneTBB's auto partitioner chooses (ranges of at least about `grain` indices).
enum class split { even, adaptive };

// body(begin, end) for ranges that together cover [0, count) exactly once, on the threads of the
// current task arena.
inline void parallel_ranges(std::size_t count, std::size_t grain, split how, range_fn body) {
  const tbb::blocked_range<std::size_t> all(0, count, grain);
  tsan_handoff handoff;
  auto run = [body, &handoff](const tbb::blocked_range<std::size_t>& r) {
    handoff.acquire();
    body(r.begin(), r.end());
    handoff.release();
  };
  handoff.release();
  if (how == split::even) {
    tbb::parallel_for(all, run, tbb::simple_partitioner{});
  } else {
    tbb::parallel_for(all, run, tbb::auto_partitioner{});
  }
  handoff.acquire();
}

}  // namespace tenferro::detail
