// The prepared-derivative cache of a runtime: the plans kernel sweeps made of graph structures
// (ad/plan.hpp), under the structure's fingerprint. A light header: the runtime holds the cache.
#pragma once

#include <tenferro/core/cache.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tenferro {

// How much a runtime's prepared-derivative cache keeps (docs/caches.md).
using AdTransformCacheLimits = CacheLimits;

}  // namespace tenferro

namespace tenferro::detail::ad {

struct sweep_plan;

enum class sweep_direction : std::uint8_t { reverse, forward };

// A plan's key: the structure's fingerprint, the sweep, and the position of the value a forward
// sweep starts from (0 for reverse).
struct plan_key {
  std::uint64_t fingerprint = 0;
  sweep_direction direction = sweep_direction::reverse;
  std::uint32_t start = 0;
  friend bool operator==(const plan_key&, const plan_key&) = default;
};

struct plan_key_hash {
  std::size_t operator()(const plan_key& k) const noexcept {
    return static_cast<std::size_t>(k.fingerprint ^
                                    (std::uint64_t{k.start} << 8 | static_cast<std::uint64_t>(k.direction)));
  }
};

using plan_cache = lru_cache<plan_key, std::shared_ptr<const sweep_plan>, plan_key_hash>;

}  // namespace tenferro::detail::ad
