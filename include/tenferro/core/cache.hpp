// What a cache of the runtime reports (CacheStats) and how much it may keep (CacheLimits), and the
// one cache they describe: a thread-safe map that forgets its least recently used entries once it
// holds more than max_entries entries or max_bytes bytes (the bytes are what each insert declares).
#pragma once

#include <tenferro/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <ostream>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace tenferro {

// A cache's contents and its history since the runtime was made. `hits` and `misses` count
// lookups; `evictions` the entries dropped to stay within the limits; `clears` the calls that
// emptied the cache (entries dropped by a clear are not evictions).
struct CacheStats {
  std::size_t entries = 0;
  std::size_t retained_bytes = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;
  std::uint64_t clears = 0;

  friend bool operator==(const CacheStats&, const CacheStats&) = default;
  friend std::ostream& operator<<(std::ostream& os, const CacheStats& s) {
    return os << "{entries=" << s.entries << ", retained_bytes=" << s.retained_bytes << ", hits=" << s.hits
              << ", misses=" << s.misses << ", evictions=" << s.evictions << ", clears=" << s.clears << '}';
  }
};

// How much a cache keeps: at most max_entries entries and max_bytes bytes (both at least 1).
struct CacheLimits {
  std::size_t max_entries = 256;
  std::size_t max_bytes = std::size_t{64} << 20;

  friend bool operator==(const CacheLimits&, const CacheLimits&) = default;
  friend std::ostream& operator<<(std::ostream& os, const CacheLimits& l) {
    return os << "{max_entries=" << l.max_entries << ", max_bytes=" << l.max_bytes << '}';
  }
};

namespace detail {

// Throws InvalidArgument naming `op` when a limit is zero.
inline void check_cache_limits(std::string_view op, const CacheLimits& l) {
  if (l.max_entries == 0 || l.max_bytes == 0) {
    throw_error(ErrorKind::InvalidArgument, op,
                {"cache limits must keep at least one entry and one byte, got max_entries=", l.max_entries,
                 ", max_bytes=", l.max_bytes});
  }
}

// The least-recently-used cache. Values are returned by copy (make them shared_ptrs to share).
// An entry larger than max_bytes is not kept (its insert counts as an eviction; the entries
// already kept stay).
template <class Key, class Value, class Hash = std::hash<Key>>
class lru_cache {
 public:
  explicit lru_cache(CacheLimits limits = {}) : limits_(limits) {}

  // The value under k (now the most recently used), counting a hit or a miss.
  std::optional<Value> find(const Key& k) {
    return find(k, [](const Value&) { return true; });
  }
  // The value under k if accept(value) holds (called under the cache's lock), counting a hit; a
  // miss when there is none or it is not accepted.
  template <class Accept>
  std::optional<Value> find(const Key& k, Accept&& accept) {
    const std::lock_guard lock(mutex_);
    auto it = index_.find(k);
    if (it == index_.end() || !accept(std::as_const(it->second->value))) {
      ++stats_.misses;
      return std::nullopt;
    }
    ++stats_.hits;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->value;
  }

  // Keeps v under k, declaring `bytes` retained, unless another value is already there: then that
  // one stays (two threads that missed together agree on one value). Returns the value kept.
  Value insert(const Key& k, Value v, std::size_t bytes) {
    const std::lock_guard lock(mutex_);
    if (auto it = index_.find(k); it != index_.end()) return it->second->value;
    if (bytes > limits_.max_bytes) {  // never kept, and not at the others' expense
      ++stats_.evictions;
      return v;
    }
    order_.push_front(entry{k, std::move(v), bytes});
    index_.emplace(k, order_.begin());
    stats_.retained_bytes += bytes;
    Value kept = order_.front().value;
    trim();
    return kept;
  }

  // Keeps v under k in place of any value there (now the most recently used), declaring `bytes`.
  void insert_or_assign(const Key& k, Value v, std::size_t bytes) {
    const std::lock_guard lock(mutex_);
    if (auto it = index_.find(k); it != index_.end()) {
      stats_.retained_bytes -= it->second->bytes;
      order_.erase(it->second);
      index_.erase(it);
    }
    if (bytes > limits_.max_bytes) {
      ++stats_.evictions;
      return;
    }
    order_.push_front(entry{k, std::move(v), bytes});
    index_.emplace(k, order_.begin());
    stats_.retained_bytes += bytes;
    trim();
  }

  // Drops the entries whose key satisfies pred (counted as evictions: they went stale).
  template <class Pred>
  void evict_if(Pred&& pred) {
    const std::lock_guard lock(mutex_);
    for (auto it = order_.begin(); it != order_.end();) {
      it = pred(it->key) ? drop(it) : std::next(it);
    }
  }

  void clear() {
    const std::lock_guard lock(mutex_);
    order_.clear();
    index_.clear();
    stats_.retained_bytes = 0;
    ++stats_.clears;
  }

  CacheStats stats() const {
    const std::lock_guard lock(mutex_);
    CacheStats s = stats_;
    s.entries = index_.size();
    return s;
  }
  CacheLimits limits() const {
    const std::lock_guard lock(mutex_);
    return limits_;
  }
  // New limits (checked by the caller); entries beyond them are evicted now.
  void set_limits(CacheLimits l) {
    const std::lock_guard lock(mutex_);
    limits_ = l;
    trim();
  }

 private:
  struct entry {
    Key key;
    Value value;
    std::size_t bytes;
  };
  using iterator = typename std::list<entry>::iterator;

  iterator drop(iterator it) {
    stats_.retained_bytes -= it->bytes;
    ++stats_.evictions;
    index_.erase(it->key);
    return order_.erase(it);
  }
  void trim() {
    while (!order_.empty() &&
           (index_.size() > limits_.max_entries || stats_.retained_bytes > limits_.max_bytes)) {
      drop(std::prev(order_.end()));
    }
  }

  mutable std::mutex mutex_;
  CacheLimits limits_;
  CacheStats stats_;
  std::list<entry> order_;  // most recently used first
  std::unordered_map<Key, iterator, Hash> index_;
};

}  // namespace detail

}  // namespace tenferro
