// CpuPlacement: which CPUs a backend's threads run on. automatic() (the default) and all_allowed()
// use the CPUs of the process's affinity mask; numa_node(id) the CPUs of one NUMA node, read by
// oneTBB through hwloc (libtbbbind). A placement resolves to a oneTBB task arena, made once per
// (NUMA node, threads) and shared by every backend that resolves to it (docs/threads.md).
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/environment.hpp>
#include <tenferro/core/error.hpp>

#include <tbb/task_arena.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>
#include <tbb/info.h>

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <mutex>
#include <utility>
#endif

namespace tenferro {

class CpuPlacement {
 public:
  enum class Kind : unsigned char { automatic, numa_node, all_allowed };

  // automatic(), the default.
  constexpr CpuPlacement() noexcept : CpuPlacement(Kind::automatic, 0) {}

  // Every CPU the process may use, with the backend's thread count (TENFERRO_NUM_THREADS or one
  // thread per CPU for CpuBackend::create(), n for with_threads(n)).
  static constexpr CpuPlacement automatic() noexcept { return {Kind::automatic, 0}; }
  // The CPUs of NUMA node `id` the process may use, one thread each; its arena's threads are
  // pinned to that node. Resolving it throws CpuPlacementError when the node does not exist.
  static constexpr CpuPlacement numa_node(std::size_t id) noexcept { return {Kind::numa_node, id}; }
  // Every CPU the process may use, one thread each, whatever TENFERRO_NUM_THREADS says.
  static constexpr CpuPlacement all_allowed() noexcept { return {Kind::all_allowed, 0}; }

  constexpr Kind kind() const noexcept { return kind_; }
  // The NUMA node of a numa_node placement.
  constexpr std::optional<std::size_t> node() const noexcept {
    return kind_ == Kind::numa_node ? std::optional<std::size_t>(node_) : std::nullopt;
  }

  friend constexpr bool operator==(const CpuPlacement&, const CpuPlacement&) = default;

 private:
  constexpr CpuPlacement(Kind kind, std::size_t node) noexcept : kind_(kind), node_(node) {}
  Kind kind_;
  std::size_t node_;
};

// "CpuPlacement::automatic()", "CpuPlacement::numa_node(0)", "CpuPlacement::all_allowed()".
inline std::string to_string(const CpuPlacement& p) {
  switch (p.kind()) {
    case CpuPlacement::Kind::automatic:
      return "CpuPlacement::automatic()";
    case CpuPlacement::Kind::all_allowed:
      return "CpuPlacement::all_allowed()";
    case CpuPlacement::Kind::numa_node:
      break;
  }
  return "CpuPlacement::numa_node(" + std::to_string(*p.node()) + ")";
}
inline std::ostream& operator<<(std::ostream& os, const CpuPlacement& p) { return os << to_string(p); }

// A placement that cannot be resolved: a NUMA node the machine does not have (InvalidArgument), or
// a machine whose NUMA topology oneTBB cannot read (Unsupported). Its op is the call that resolved
// it (e.g. "CpuBackend::for_placement").
class CpuPlacementError : public Error {
 public:
  CpuPlacementError(ErrorKind kind, std::string op, std::string detail, CpuPlacement placement)
      : Error(kind, std::move(op), std::move(detail)), placement_(placement) {}
  const CpuPlacement& placement() const noexcept { return placement_; }

 private:
  CpuPlacement placement_;
};

// Where a backend runs: its threads, its placement and the CPUs those threads may run on.
struct CpuExecutionInfo {
  std::size_t threads;
  CpuPlacement placement;
  std::vector<std::size_t> cpus;
};
std::ostream& operator<<(std::ostream& os, const CpuExecutionInfo& info);

namespace detail::cpu_topology {

// The CPUs of the process's affinity mask, ascending.
std::vector<std::size_t> allowed_cpus();
// Whether this build reads the NUMA topology. Not under AddressSanitizer or ThreadSanitizer:
// oneTBB loads libtbbbind with dlopen(RTLD_DEEPBIND), which their runtimes refuse by ending the
// process; such builds take the path of a machine whose topology cannot be read.
inline constexpr bool reads_topology = !(TENFERRO_ASAN || TENFERRO_TSAN);
// The most threads a backend may have (CpuBackend::with_threads, TENFERRO_NUM_THREADS).
inline constexpr std::size_t max_threads = 65536;
// The NUMA nodes oneTBB reads (through hwloc); empty when it cannot read the topology.
std::vector<std::size_t> numa_nodes();
// The CPUs of NUMA node `node` that the process may use, ascending, from the kernel's
// /sys/devices/system/node/node<node>/cpulist. oneTBB numbers nodes by hwloc's logical index, the
// kernel by its own: the two agree unless the process is kept off some nodes (a cpuset), where
// this list may name another node's CPUs than the arena runs on (docs/threads.md).
std::vector<std::size_t> node_cpus(std::size_t node);
// The thread count TENFERRO_NUM_THREADS asks for (`value` is its text; nullopt when unset). Throws
// InvalidArgument, naming the variable and `op`, unless it is a whole number from 1 to max_threads.
std::optional<std::size_t> threads_from_environment(const char* value, std::string_view op);

// A placement resolved: the shared arena of (its NUMA node, threads) and what execution_info()
// reports. `threads` is the automatic placement's count (ignored by the others). Throws
// CpuPlacementError (op `op`) for a NUMA node that cannot be used.
struct resolved {
  std::shared_ptr<tbb::task_arena> arena;
  CpuExecutionInfo info;
};
resolved resolve(const CpuPlacement& placement, std::size_t threads, std::string_view op);

}  // namespace detail::cpu_topology

#if TENFERRO_HEADER_ONLY
TENFERRO_INLINE std::ostream& operator<<(std::ostream& os, const CpuExecutionInfo& info) {
  os << "CpuExecutionInfo(threads=" << info.threads << ", placement=" << info.placement << ", cpus=[";
  for (std::size_t i = 0; i < info.cpus.size(); ++i) os << (i == 0 ? "" : ", ") << info.cpus[i];
  return os << "])";
}

namespace detail::cpu_topology {

TENFERRO_INLINE std::vector<std::size_t> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<std::size_t> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (std::size_t c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TENFERRO_INLINE std::vector<std::size_t> numa_nodes() {
  std::vector<std::size_t> nodes;
  if (!reads_topology) return nodes;
  for (const tbb::numa_node_id id : tbb::info::numa_nodes()) {
    if (id >= 0) nodes.push_back(static_cast<std::size_t>(id));  // -1: the topology is unknown
  }
  return nodes;
}

// Reads a kernel CPU list ("0-3,8,10-11").
TENFERRO_INLINE std::vector<std::size_t> parse_cpu_list(std::string_view text) {
  std::vector<std::size_t> cpus;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    std::size_t lo = 0, hi = 0;
    auto r = std::from_chars(p, end, lo);
    if (r.ec != std::errc{}) break;
    hi = lo;
    p = r.ptr;
    if (p < end && *p == '-') {
      r = std::from_chars(p + 1, end, hi);
      if (r.ec != std::errc{}) break;
      p = r.ptr;
    }
    for (std::size_t c = lo; c <= hi; ++c) cpus.push_back(c);
    if (p < end && *p == ',')
      ++p;
    else
      break;
  }
  return cpus;
}

TENFERRO_INLINE std::vector<std::size_t> node_cpus(std::size_t node) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  std::string text;
  std::getline(in, text);
  const std::vector<std::size_t> allowed = allowed_cpus();
  std::vector<std::size_t> cpus;
  for (const std::size_t c : parse_cpu_list(text)) {
    if (std::binary_search(allowed.begin(), allowed.end(), c)) cpus.push_back(c);
  }
  return cpus;
}

TENFERRO_INLINE std::optional<std::size_t> threads_from_environment(const char* value, std::string_view op) {
  return whole_number_from_environment("TENFERRO_NUM_THREADS", value, op, 1, max_threads, "threads");
}

TENFERRO_INLINE resolved resolve(const CpuPlacement& placement, std::size_t threads, std::string_view op) {
  std::optional<std::size_t> node = placement.node();
  std::vector<std::size_t> cpus;
  if (node) {
    const std::vector<std::size_t> nodes = numa_nodes();
    if (nodes.empty()) {
      throw CpuPlacementError(
          ErrorKind::Unsupported, std::string(op),
          "cannot resolve " + to_string(placement) +
              ": oneTBB cannot read this machine's NUMA topology (libtbbbind with hwloc did not load, "
              "or a sanitizer build)",
          placement);
    }
    if (std::find(nodes.begin(), nodes.end(), *node) == nodes.end()) {
      std::string known;
      for (const std::size_t n : nodes) known += (known.empty() ? "" : ", ") + std::to_string(n);
      throw CpuPlacementError(ErrorKind::InvalidArgument, std::string(op),
                              "cannot resolve " + to_string(placement) + ": NUMA node " +
                                  std::to_string(*node) + " does not exist; this machine has node(s) " +
                                  known,
                              placement);
    }
    cpus = node_cpus(*node);
    threads = static_cast<std::size_t>(tbb::info::default_concurrency(static_cast<tbb::numa_node_id>(*node)));
  } else {
    cpus = allowed_cpus();
    if (placement.kind() == CpuPlacement::Kind::all_allowed) threads = cpus.size();
  }
  if (threads == 0) threads = 1;

  // One arena per (node, threads), alive while a backend holds it; made here, initialized by
  // oneTBB when work first enters it. The registry is never destroyed, so that a backend made while
  // the program exits still finds it.
  struct registry {
    std::mutex mutex;
    std::map<std::pair<std::ptrdiff_t, std::size_t>, std::weak_ptr<tbb::task_arena>> arenas;
  };
  static registry& r = *new registry;
  auto& arenas = r.arenas;
  const std::pair<std::ptrdiff_t, std::size_t> key{node ? static_cast<std::ptrdiff_t>(*node) : -1, threads};
  const std::lock_guard lock(r.mutex);
  std::shared_ptr<tbb::task_arena> arena = arenas[key].lock();
  if (!arena) {
    std::erase_if(arenas, [](const auto& entry) { return entry.second.expired(); });
    tbb::task_arena::constraints c;
    c.set_max_concurrency(static_cast<int>(threads));
    if (node) c.set_numa_id(static_cast<tbb::numa_node_id>(*node));
    arena = std::make_shared<tbb::task_arena>(c);
    arenas[key] = arena;
  }
  return {std::move(arena), CpuExecutionInfo{threads, placement, std::move(cpus)}};
}

}  // namespace detail::cpu_topology
#endif  // TENFERRO_HEADER_ONLY

}  // namespace tenferro
