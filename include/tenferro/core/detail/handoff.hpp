// Work handed to oneTBB, as ThreadSanitizer must see it: tsan_handoff announces a hand-off and a
// join to it, and execute_in runs a task in an arena with both announced. ThreadSanitizer does
// not see oneTBB's own synchronization (Debian's library is not instrumented); with these it checks
// tenferro's code against the real order of events. tests/tsan.supp silences what is left, inside
// oneTBB's headers and in the reads of a task's own captures here. Without ThreadSanitizer these do
// nothing and execute_in is task_arena::execute.
#pragma once

#include <tenferro/core/detail/config.hpp>

#include <tbb/task_arena.h>

#include <optional>
#include <type_traits>
#include <utility>

#if TENFERRO_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace tenferro::detail {

// A hand-off point: what one thread did before release() happens before what another does after
// acquire() (for ThreadSanitizer; nothing otherwise).
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

// release() / acquire() when the scope ends, also by an exception.
struct tsan_release_at_exit {
  tsan_handoff& point;
  ~tsan_release_at_exit() { point.release(); }
};
struct tsan_acquire_at_exit {
  tsan_handoff& point;
  ~tsan_acquire_at_exit() { point.acquire(); }
};

// Runs f() inside `arena` (oneTBB runs it on this thread or hands it to one of the arena's) and
// returns its result, a value or void (as task_arena::execute); an exception from f propagates.
template <class F>
decltype(auto) execute_in(tbb::task_arena& arena, F&& f) {
  using result = std::invoke_result_t<F&>;
  static_assert(!std::is_reference_v<result>, "execute_in: the task must return a value or void");
#if TENFERRO_TSAN
  // Everything the task touches is made before the hand-off is announced.
  std::optional<std::conditional_t<std::is_void_v<result>, char, result>> out;
  tsan_handoff fork, join;
  auto task = [&] {
    fork.acquire();
    const tsan_release_at_exit done{join};
    if constexpr (std::is_void_v<result>) {
      f();
    } else {
      out.emplace(f());
    }
  };
  fork.release();
  {
    const tsan_acquire_at_exit joined{join};
    arena.execute(task);
  }
  if constexpr (!std::is_void_v<result>) return result(std::move(*out));
#else
  return arena.execute(std::forward<F>(f));
#endif
}

}  // namespace tenferro::detail
