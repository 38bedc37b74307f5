// CpuBackend: where eager kernels run. It holds a oneTBB task arena, the one of its placement and
// thread count (cpu/placement.hpp), shared with every backend resolving to the same; large kernels
// run inside it, so their parallel loops use exactly the backend's threads.
#pragma once

#include <tenferro/core/detail/handoff.hpp>
#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/cpu/placement.hpp>

#include <tbb/task_arena.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <string>
#include <utility>

namespace tenferro {

class CpuBackend {
 public:
  // Copied, never moved from, so that a backend stays whole after std::move (a copy is two
  // reference counts).
  CpuBackend(const CpuBackend&) = default;
  CpuBackend& operator=(const CpuBackend&) = default;

  // A backend on every CPU the process may use (its affinity mask), one thread each, or as many
  // threads as the environment variable TENFERRO_NUM_THREADS says. Throws InvalidArgument, naming
  // the variable, when it is set to anything but a whole number from 1 to 65536.
  static CpuBackend create() {
    const auto threads = detail::cpu_topology::threads_from_environment(std::getenv("TENFERRO_NUM_THREADS"),
                                                                        "CpuBackend::create");
    return CpuBackend(detail::cpu_topology::resolve(
        CpuPlacement::automatic(), threads ? *threads : detail::cpu_topology::allowed_cpus().size(),
        "CpuBackend::create"));
  }

  // A backend running kernels on at most `threads` threads (the calling thread included), on every
  // CPU the process may use. Throws InvalidArgument for 0 and above 65536.
  static CpuBackend with_threads(std::size_t threads) {
    if (threads == 0) {
      throw Error(ErrorKind::InvalidArgument, "CpuBackend::with_threads",
                  "argument 'threads' is 0; a backend needs at least one thread");
    }
    if (threads > detail::cpu_topology::max_threads) {
      throw_error(ErrorKind::InvalidArgument, "CpuBackend::with_threads",
                  {"argument 'threads' is ", threads, "; at most ", detail::cpu_topology::max_threads,
                   " are supported"});
    }
    return CpuBackend(
        detail::cpu_topology::resolve(CpuPlacement::automatic(), threads, "CpuBackend::with_threads"));
  }

  // A backend on `placement`: automatic() is create(); all_allowed() one thread per CPU the process
  // may use; numa_node(id) one thread per CPU of that node, pinned to it. Throws CpuPlacementError
  // when the node does not exist or the NUMA topology cannot be read.
  static CpuBackend for_placement(const CpuPlacement& placement) {
    if (placement == CpuPlacement::automatic()) return create();
    return CpuBackend(detail::cpu_topology::resolve(placement, 0, "CpuBackend::for_placement"));
  }

  // Threads, placement and the CPUs the threads may run on.
  const CpuExecutionInfo& execution_info() const noexcept { return *info_; }
  const CpuPlacement& placement() const noexcept { return info_->placement; }

  // The number of threads kernels may use.
  std::size_t threads() const noexcept { return info_->threads; }

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
    return detail::execute_in(*arena_, std::forward<F>(f));
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
    return arena_ == other.arena_ && placement() == other.placement() && fusion_ == other.fusion_;
  }

  friend std::ostream& operator<<(std::ostream& os, const CpuBackend& b) {
    return os << "CpuBackend(threads=" << b.threads() << ", placement=" << b.placement()
              << ", fusion=" << (b.fusion_ ? "on" : "off") << ")";
  }

 private:
  explicit CpuBackend(detail::cpu_topology::resolved r)
      : arena_(std::move(r.arena)), info_(std::make_shared<const CpuExecutionInfo>(std::move(r.info))) {}
  std::shared_ptr<tbb::task_arena> arena_;
  std::shared_ptr<const CpuExecutionInfo> info_;
  bool fusion_ = true;
};

}  // namespace tenferro
