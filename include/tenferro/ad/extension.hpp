// Extension modules: op families beyond the built-in ops, installed into an EagerRuntime.
//
// A module (ExtensionModule) has an id and, in configure(), registers through an
// ExtensionRegistrar its op families: each op (ExtensionOp) with its forward kernel, on Tensors,
// and its derivative rules (ExtensionRules), on EagerTensors, and the caches the family keeps
// (values the runtime holds for it, keyed by family, cache name and a discriminator the family
// chooses). EagerRuntime::install_extension_module installs one; call_extension runs one of its
// ops and records it on the tape like a built-in op (docs/extensions.md).
#pragma once

#include <tenferro/ad/op.hpp>
#include <tenferro/core/cache.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <typeindex>
#include <vector>

namespace tenferro {

class BackendSession;
class EagerTensor;
class Tensor;

// Counts the changes of a runtime's installed extensions: 1 for a fresh runtime, one more for each
// module installed or replaced. Cached values that involve a family are stale after its change.
struct RuntimeEpoch {
  std::uint64_t value = 1;
  friend auto operator<=>(const RuntimeEpoch&, const RuntimeEpoch&) = default;
  friend std::ostream& operator<<(std::ostream& os, RuntimeEpoch e) { return os << "epoch " << e.value; }
};

using ExtensionCacheLimits = CacheLimits;

// Where an extension keeps a value: its family, one of the caches it registered, and a
// discriminator it chooses (e.g. the subscripts and shapes of an einsum).
struct ExtensionCacheKey {
  std::string family;
  std::string cache;
  std::string discriminator;
  friend bool operator==(const ExtensionCacheKey&, const ExtensionCacheKey&) = default;
};

namespace detail {
struct extension_cache_key_hash {
  std::size_t operator()(const ExtensionCacheKey& k) const noexcept {
    const std::hash<std::string> h;
    return h(k.family) ^ (h(k.cache) * 31) ^ (h(k.discriminator) * 1000003);
  }
};
}  // namespace detail

namespace detail {

// The extension caches of one runtime (LRU, limited by ExtensionCacheLimits): which (family, cache)
// pairs installed modules registered, and since which epoch each family's module is the one
// installed. A call that began under an older epoch than its family's (its kernel is the replaced
// module's) neither reads nor keeps values of that family: what it makes is returned, uncached.
// Lock order: the registrations' mutex, then the LRU's; neither is held while a value is made.
class extension_cache_table {
 public:
  template <class T, class Make>
  std::shared_ptr<const T> get_or_insert(const ExtensionCacheKey& key, Make&& make, std::size_t bytes,
                                         RuntimeEpoch epoch) {
    const bool live = usable(key, epoch);
    if (live) {
      if (auto hit = cache_.find(key)) return cast<T>(*hit, key);
    }
    std::shared_ptr<const T> made;
    if constexpr (std::is_convertible_v<decltype(make()), std::shared_ptr<const T>>) {
      made = make();
    } else {
      made = std::make_shared<const T>(make());
    }
    if (!live) return made;
    const std::lock_guard lock(mutex_);
    if (!current(key, epoch)) return made;
    return cast<T>(cache_.insert(key, stored{made, typeid(T)}, bytes), key);
  }
  template <class T>
  std::shared_ptr<const T> find(const ExtensionCacheKey& key, RuntimeEpoch epoch) {
    if (!usable(key, epoch)) return nullptr;
    auto hit = cache_.find(key);
    return hit ? cast<T>(*hit, key) : nullptr;
  }

  CacheStats stats() const { return cache_.stats(); }
  void clear() { cache_.clear(); }
  CacheLimits limits() const { return cache_.limits(); }
  void set_limits(const CacheLimits& l) {
    check_cache_limits("set_extension_cache_limits", l);
    cache_.set_limits(l);
  }

  // At `epoch`, the module owning `old_families` (none for a first install) gives way to one
  // registering `caches`: prepare() builds the new registrations (it may throw; nothing changes),
  // commit() swaps them in and drops the old families' values in one step under the lock (a
  // lookup sees the caches before or after, never neither), and does not throw.
  struct replacement {
    std::vector<std::string> old_families;
    std::vector<std::pair<std::string, std::string>> registered;
    std::vector<std::pair<std::string, RuntimeEpoch>> installed_at;
  };
  replacement prepare(std::span<const std::string> old_families,
                      std::span<const std::pair<std::string, std::string>> caches, RuntimeEpoch epoch) const;
  void commit(replacement& r) noexcept;

 private:
  struct stored {
    std::shared_ptr<const void> value;
    std::type_index type;
  };
  template <class T>
  static std::shared_ptr<const T> cast(const stored& s, const ExtensionCacheKey& key) {
    if (s.type != typeid(T)) wrong_type(key);
    return std::static_pointer_cast<const T>(s.value);
  }
  // Throws Extension when no installed module registers the key's cache; else whether a call of
  // `epoch` may use the key's family (current()).
  bool usable(const ExtensionCacheKey& key, RuntimeEpoch epoch) const;
  bool current(const ExtensionCacheKey& key, RuntimeEpoch epoch) const;  // mutex_ held
  [[noreturn]] static void wrong_type(const ExtensionCacheKey& key);

  lru_cache<ExtensionCacheKey, stored, extension_cache_key_hash> cache_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> registered_;
  std::vector<std::pair<std::string, RuntimeEpoch>> installed_at_;  // family -> its module's epoch
};

}  // namespace detail

// The extension caches as a forward kernel (or a with_extension_execution_context callback) sees
// them: thread-safe; a lookup counts as a hit or a miss.
class ExtensionCacheStore {
 public:
  ExtensionCacheStore(detail::extension_cache_table& table, RuntimeEpoch epoch) noexcept
      : table_(&table), epoch_(epoch) {}

  // The value under key, or make()'s (a T, or a shared_ptr to one), kept under key with `bytes`
  // declared retained. Throws Extension when the key's cache is not registered by an installed
  // module, or when the value under key is not a T.
  template <class T, class Make>
  std::shared_ptr<const T> get_or_insert(const ExtensionCacheKey& key, Make&& make,
                                         std::size_t bytes = sizeof(T)) const {
    return table_->get_or_insert<T>(key, std::forward<Make>(make), bytes, epoch_);
  }
  // The value under key, or nullptr.
  template <class T>
  std::shared_ptr<const T> find(const ExtensionCacheKey& key) const {
    return table_->find<T>(key, epoch_);
  }
  CacheStats stats() const { return table_->stats(); }

 private:
  detail::extension_cache_table* table_;
  RuntimeEpoch epoch_;
};

// What an extension op's forward kernel, and EagerRuntime::with_extension_execution_context's
// callback, receive: the backend session (a CpuSession running inside the backend's arena) and the
// runtime's extension caches, as of the epoch the call began in. The session is entered first; the
// cache locks are taken per lookup.
class ExtensionExecutionContext {
 public:
  ExtensionExecutionContext(BackendSession& backend, ExtensionCacheStore caches) noexcept
      : backend_(&backend), caches_(caches) {}
  BackendSession& backend_mut() const noexcept { return *backend_; }
  const ExtensionCacheStore& caches() const noexcept { return caches_; }

 private:
  BackendSession* backend_;
  ExtensionCacheStore caches_;
};

// What a derivative rule sees of a recorded extension op: its inputs, attributes and output.
struct ExtensionCall {
  std::span<const EagerTensor> inputs;
  const OpAttributes& attributes;
  const EagerTensor& output;
};

// The derivative rules of an extension op, written with EagerTensor ops: they are recorded when
// the transform records (so results can be differentiated again) and run as plain computations
// under backward(). vjp: the cotangent of every input flagged in `needed` (nullopt: zero); jvp: the
// output's tangent given the inputs' (nullptr: that input does not move). A rule left empty makes
// that mode throw UnsupportedAdRule naming the op.
struct ExtensionRules {
  std::function<std::vector<std::optional<EagerTensor>>(const ExtensionCall&, const EagerTensor& cotangent,
                                                        const std::vector<bool>& needed)>
      vjp;
  std::function<EagerTensor(const ExtensionCall&, std::span<const EagerTensor* const> tangents)> jvp;
};

// One op of an extension family. `forward` computes the value from the inputs' values (one
// runtime; their dtypes as given) and the call's attributes; it must not keep references to them.
struct ExtensionOp {
  std::string family;     // e.g. "tenferro.einsum"
  std::string name;       // unique among a runtime's extension ops; node keys say "family/name"
  std::size_t arity = 0;  // the number of inputs; 0: any number from 1
  std::function<Tensor(ExtensionExecutionContext&, std::span<const Tensor>, const OpAttributes&)> forward;
  ExtensionRules rules;  // a rule an AdContext gives for the op takes the place of its own
};

// What ExtensionModule::configure registers.
class ExtensionRegistrar {
 public:
  void add_op(ExtensionOp op) { ops_.push_back(std::move(op)); }
  void add_cache(std::string family, std::string cache) {
    caches_.emplace_back(std::move(family), std::move(cache));
  }

  const std::vector<ExtensionOp>& ops() const noexcept { return ops_; }
  const std::vector<std::pair<std::string, std::string>>& caches() const noexcept { return caches_; }

 private:
  std::vector<ExtensionOp> ops_;
  std::vector<std::pair<std::string, std::string>> caches_;
};

class ExtensionModule {
 public:
  virtual ~ExtensionModule() = default;
  // Unique per module: installing a module under a taken id replaces the one installed.
  virtual std::string module_id() const = 0;
  virtual void configure(ExtensionRegistrar& registrar) const = 0;
};

namespace detail::ad {

// An installed extension op: what its op_def's rules dispatch to (ad/extension_impl.hpp).
struct extension_entry {
  ExtensionOp op;
};

}  // namespace detail::ad

}  // namespace tenferro
