// ContextId: the process-unique, opaque identity of an eager runtime. Comparable, hashable and
// printable ("ContextId(3)"); never reused while the process runs.
#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace tenferro {

class ContextId {
 public:
  // A fresh identifier, different from every one handed out before in this process.
  static ContextId next() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return ContextId(counter.fetch_add(1, std::memory_order_relaxed) + 1);
  }

  std::uint64_t value() const noexcept { return value_; }
  friend auto operator<=>(const ContextId&, const ContextId&) = default;

 private:
  explicit ContextId(std::uint64_t v) noexcept : value_(v) {}
  std::uint64_t value_;
};

inline std::string to_string(ContextId id) { return "ContextId(" + std::to_string(id.value()) + ")"; }
inline std::ostream& operator<<(std::ostream& os, ContextId id) { return os << to_string(id); }

}  // namespace tenferro

template <>
struct std::hash<tenferro::ContextId> {
  std::size_t operator()(tenferro::ContextId id) const noexcept {
    return std::hash<std::uint64_t>{}(id.value());
  }
};
