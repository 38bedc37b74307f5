// CpuBackend: where eager kernels run. It owns a oneTBB task arena; large kernels run inside it,
// so their parallel loops use exactly the backend's threads. Copies share the arena.
#pragma once

#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>

#include <tbb/task_arena.h>

#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <utility>

namespace tenferro {

class CpuBackend {
 public:
  // A backend using every core oneTBB may use in this process.
  static CpuBackend create() { return CpuBackend(std::make_shared<tbb::task_arena>()); }

  // A backend running kernels on at most `threads` threads (the calling thread included).
  // Throws InvalidArgument for 0.
  static CpuBackend with_threads(std::size_t threads) {
    if (threads == 0) {
      throw Error(ErrorKind::InvalidArgument, "CpuBackend::with_threads",
                  "argument 'threads' is 0; a backend needs at least one thread");
    }
    return CpuBackend(std::make_shared<tbb::task_arena>(static_cast<int>(threads)));
  }

  // The number of threads kernels may use.
  std::size_t threads() const { return static_cast<std::size_t>(arena_->max_concurrency()); }

  // Deferred fusion (on by default): elementwise eager ops on tensors of at least
  // `fusion_elements` elements are not computed when called but when their value is needed, and
  // then together, block by block, so a chain of them makes one pass over memory (docs/eager.md).
  // A copy of this backend (same threads) with fusion on or off.
  CpuBackend with_fusion(bool on) const {
    CpuBackend b = *this;
    b.fusion_ = on;
    return b;
  }
  bool fuses() const noexcept { return fusion_; }
  static constexpr std::size_t fusion_elements = 16384;

  // The one decision of whether an elementwise op producing `elements` elements of `dtype` is
  // deferred (fusion on, at least fusion_elements, a floating dtype); `run` below is the one
  // decision of how many threads a kernel gets.
  bool defers(std::size_t elements, DType dtype) const noexcept {
    return fusion_ && elements >= fusion_elements && is_floating(dtype);
  }

  // Runs f() inside the backend's arena and returns its result; exceptions propagate.
  template <class F>
  decltype(auto) execute(F&& f) const {
    return arena_->execute(std::forward<F>(f));
  }

  // Runs f() for a kernel touching `elements` elements: inside the arena when the kernel is large
  // enough to be split across threads (so it uses exactly this backend's threads), else directly
  // on the calling thread (entering an arena costs more than a small kernel, which never splits).
  template <class F>
  decltype(auto) run(std::size_t elements, F&& f) const {
    if (elements > serial_elements) return execute(std::forward<F>(f));
    return std::forward<F>(f)();
  }

  // Kernels this small never split (one chunk of the fused loop; cpu/fused.hpp asserts it), so
  // `run` does not enter the arena for them.
  static constexpr std::size_t serial_elements = 4096;

  bool operator==(const CpuBackend& other) const noexcept {
    return arena_ == other.arena_ && fusion_ == other.fusion_;
  }

  friend std::ostream& operator<<(std::ostream& os, const CpuBackend& b) {
    return os << "CpuBackend(threads=" << b.threads() << ", fusion=" << (b.fusion_ ? "on" : "off") << ")";
  }

 private:
  explicit CpuBackend(std::shared_ptr<tbb::task_arena> arena) : arena_(std::move(arena)) {
    arena_->initialize();
  }
  std::shared_ptr<tbb::task_arena> arena_;
  bool fusion_ = true;
};

}  // namespace tenferro
