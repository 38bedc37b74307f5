// Element buffers of every Tensor (and of every array the compile-time layer returns) come from
// tenferro's buffer allocator. Every buffer is 64-byte aligned (a cache line, one AVX-512
// register). By size:
// - up to 1 KiB: per-thread free lists (core/detail/block_pool.hpp);
// - up to 64 KiB: oneTBB's scalable allocator (per-thread caches; glibc's heap, trimmed and grown
//   again around such blocks, made a 100-op chain of 8 KB tensors up to 20x slower);
// - 64 KiB (`buffer_cache_min_bytes`) or more: this cache. A released buffer is kept, up to
//   `buffer_cache_limit()` bytes, and handed to the next request of about the same size (the most
//   recently released of the smallest that fits, often still in the caches): a training step that
//   makes the same shapes again reuses the same pages, with no page faults and no system calls. New ones come from core/detail/system_blocks.hpp (from 2 MiB on, mapped in
//   transparent huge pages).
// oneTBB's scalable allocator for the large buffers too was measured side by side against this
// cache and was slower on the rows that matter (docs/benchmarks.md, "Allocator"); the environment
// variable TENFERRO_ALLOCATOR=tbb, read once at the first allocation, serves every buffer from it
// (huge pages on) to repeat that comparison (bench/allocator_ratios.py).
//
// No global lock: the cache is split into shards, and each thread keeps and takes buffers in its
// own shard, under that shard's mutex (uncontended unless several threads share a shard). A
// thread looks in the other shards only when its own has nothing that fits. The hit, miss and
// eviction counters live in the shards; the bytes kept and in use are process-wide atomics.
// Eviction is oldest first, from the evicting thread's shard first. A buffer larger than the limit
// is never kept; a limit of 0 turns caching off; clear_buffer_cache() and a lower limit hand the
// kept buffers back to the system (mapped ones are unmapped at once).
#pragma once

#include <tenferro/core/detail/block_pool.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/system_blocks.hpp>

#include <oneapi/tbb/scalable_allocator.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

namespace tenferro {

// Counters of the buffer cache (process-wide, since the process started). Each is exact; read
// while other threads allocate, they are read one after another, not as one snapshot.
struct BufferCacheStats {
  std::size_t entries = 0;          // buffers held for reuse now
  std::size_t retained_bytes = 0;   // their bytes
  std::size_t hits = 0;             // requests served from the cache
  std::size_t misses = 0;           // cacheable requests that had to allocate
  std::size_t evictions = 0;        // buffers freed to make room (or released by clear_buffer_cache)
  std::size_t live_bytes = 0;       // cacheable buffers (64 KiB or more) in use now, by capacity
  std::size_t peak_live_bytes = 0;  // the most live_bytes since the start or reset_buffer_peak()
};

// Buffers of at least this many bytes are cached; smaller ones never are.
inline constexpr std::size_t buffer_cache_min_bytes = std::size_t{64} << 10;

namespace detail {

class buffer_cache {
 public:
  static constexpr std::size_t alignment = system_blocks::alignment;
  static constexpr std::size_t default_limit = std::size_t{1} << 30;
  static constexpr std::size_t shard_count = 8;

  static buffer_cache& instance() {
    // Never destroyed: tensors released during static destruction still find it.
    static buffer_cache* const c = new buffer_cache;
    return *c;
  }

  // A 64-byte aligned buffer of at least `bytes` bytes. Out of line, as deallocate: every array
  // constructor and destructor calls them, and inlined they would be compiled into each.
  TENFERRO_NOINLINE void* allocate(std::size_t bytes) {
    if (only_scalable_ || bytes < buffer_cache_min_bytes) return small_allocate(bytes);
    const std::size_t capacity = round_up(bytes);
    shard& own = own_shard();
    void* p = take(own, capacity);
    if (p != nullptr) {
      own.hits.fetch_add(1, std::memory_order_relaxed);
    } else {
      own.misses.fetch_add(1, std::memory_order_relaxed);
      p = system_blocks::allocate(capacity);
      if (p == nullptr) {
        clear();
        p = system_blocks::allocate(capacity);
        if (p == nullptr) throw std::bad_alloc();
      }
    }
    // A kept buffer may be up to a quarter larger than asked: counted by what it holds, as when
    // it is released.
    const std::size_t held = system_blocks::capacity_of(p);
    const std::size_t live = live_.fetch_add(held, std::memory_order_relaxed) + held;
    std::size_t peak = peak_.load(std::memory_order_relaxed);
    while (live > peak && !peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
    return p;
  }

  // Releases a buffer from allocate(bytes) (the same `bytes`).
  TENFERRO_NOINLINE void deallocate(void* p, std::size_t bytes) noexcept {
    if (only_scalable_ || bytes < buffer_cache_min_bytes) {
      small_deallocate(p, bytes);
      return;
    }
    const std::size_t capacity = system_blocks::capacity_of(p);
    shard& own = own_shard();
    live_.fetch_sub(capacity, std::memory_order_relaxed);
    if (capacity > limit_.load(std::memory_order_relaxed)) {
      system_blocks::free(p);
      return;
    }
    bool kept = true;
    {
      std::lock_guard lock(own.mutex);
      try {
        own.entries.push_back({p, capacity});
        retained_.fetch_add(capacity, std::memory_order_relaxed);
      } catch (...) {  // no room to record it
        kept = false;
      }
    }
    if (!kept) {
      system_blocks::free(p);
      return;
    }
    trim(own);
  }

  std::size_t limit() const { return limit_.load(std::memory_order_relaxed); }

  void set_limit(std::size_t bytes) {
    limit_.store(bytes, std::memory_order_relaxed);
    trim(own_shard());
  }

  void clear() {
    for (shard& s : shards_) {
      std::vector<entry> all;
      {
        std::lock_guard lock(s.mutex);
        all.swap(s.entries);
      }
      std::size_t bytes = 0;
      for (const entry& e : all) bytes += e.capacity;
      retained_.fetch_sub(bytes, std::memory_order_relaxed);
      s.evictions.fetch_add(all.size(), std::memory_order_relaxed);
      for (const entry& e : all) system_blocks::free(e.data);
    }
  }

  BufferCacheStats stats() {
    constexpr auto relaxed = std::memory_order_relaxed;
    BufferCacheStats s;
    for (shard& h : shards_) {
      {
        std::lock_guard lock(h.mutex);
        s.entries += h.entries.size();
      }
      s.hits += h.hits.load(relaxed);
      s.misses += h.misses.load(relaxed);
      s.evictions += h.evictions.load(relaxed);
    }
    s.retained_bytes = retained_.load(relaxed);
    s.live_bytes = live_.load(relaxed);
    s.peak_live_bytes = peak_.load(relaxed);
    return s;
  }

  void reset_peak() { peak_.store(live_.load(std::memory_order_relaxed), std::memory_order_relaxed); }

 private:
  struct entry {
    void* data;
    std::size_t capacity;
  };
  // Its counters are written by the threads using it (relaxed atomics: stats() reads them too).
  struct alignas(64) shard {
    std::mutex mutex;
    std::vector<entry> entries;  // oldest first
    std::atomic<std::size_t> hits{0}, misses{0}, evictions{0};
  };

  buffer_cache() {
    const char* v = std::getenv("TENFERRO_ALLOCATOR");
    only_scalable_ = v != nullptr && std::string_view(v) == "tbb";
    if (only_scalable_) scalable_allocation_mode(TBBMALLOC_USE_HUGE_PAGES, 1);
  }

  shard& own_shard() noexcept {
    thread_local const std::size_t k = next_shard_.fetch_add(1, std::memory_order_relaxed) % shard_count;
    return shards_[k];
  }

  // A kept buffer of at least `capacity` bytes and at most a quarter more (the best fit), from
  // the calling thread's shard, else from another; nullptr if none.
  void* take(shard& own, std::size_t capacity) {
    if (retained_.load(std::memory_order_relaxed) == 0) return nullptr;
    if (void* p = take_from(own, capacity)) return p;
    for (shard& s : shards_) {
      if (&s == &own) continue;
      if (void* p = take_from(s, capacity)) return p;
    }
    return nullptr;
  }

  void* take_from(shard& s, std::size_t capacity) {
    entry found{nullptr, 0};
    {
      std::lock_guard lock(s.mutex);
      auto best = s.entries.end();
      for (auto it = s.entries.begin(); it != s.entries.end(); ++it) {
        // The smallest that fits; of those the newest, whose lines may still be in the caches.
        if (it->capacity >= capacity && it->capacity - capacity <= capacity / 4 &&
            (best == s.entries.end() || it->capacity <= best->capacity)) {
          best = it;
        }
      }
      if (best == s.entries.end()) return nullptr;
      found = *best;
      s.entries.erase(best);
      retained_.fetch_sub(found.capacity, std::memory_order_relaxed);
    }
    return found.data;
  }

  // Frees the oldest kept buffers, starting in `first`, until the cache is within its limit.
  void trim(shard& first) {
    shard* s = &first;
    for (std::size_t tried = 0; retained_.load(std::memory_order_relaxed) > limit() && tried < shard_count;) {
      entry oldest{nullptr, 0};
      {
        std::lock_guard lock(s->mutex);
        if (!s->entries.empty()) {
          oldest = s->entries.front();
          s->entries.erase(s->entries.begin());
          retained_.fetch_sub(oldest.capacity, std::memory_order_relaxed);
        }
      }
      if (oldest.data == nullptr) {  // this shard is empty: the next one
        s = &shards_[(static_cast<std::size_t>(s - shards_.data()) + 1) % shard_count];
        ++tried;
        continue;
      }
      s->evictions.fetch_add(1, std::memory_order_relaxed);
      system_blocks::free(oldest.data);
    }
  }

  // Large requests are rounded up to whole 4 KiB pages, so nearby sizes share buffers. A size
  // within a few huge pages of SIZE_MAX cannot be allocated (and would wrap the mapping's
  // rounding).
  static std::size_t round_up(std::size_t bytes) {
    constexpr std::size_t page = 4096;
    if (bytes > SIZE_MAX - 4 * system_blocks::huge_page) throw std::bad_alloc();
    return (bytes + page - 1) / page * page;
  }

  // Buffers the cache does not keep: a block-pool block with the aligned buffer placed inside,
  // or (larger, or every buffer under TENFERRO_ALLOCATOR=tbb) oneTBB's. Under AddressSanitizer or
  // ThreadSanitizer (where the block pool is off too) they come from malloc, which they follow.
  void* small_allocate(std::size_t bytes) const {
    if (TENFERRO_SANITIZED_HEAP && !only_scalable_) {
      void* p = system_blocks::allocate(bytes);
      if (p == nullptr) throw std::bad_alloc();
      return p;
    }
    if (!only_scalable_ && bytes + alignment <= block_pool::max_bytes) {
      return system_blocks::place(block_pool::allocate(bytes + alignment), bytes + alignment);
    }
    void* p = scalable_aligned_malloc(bytes == 0 ? 1 : bytes, alignment);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }

  void small_deallocate(void* p, std::size_t bytes) const noexcept {
    if (TENFERRO_SANITIZED_HEAP && !only_scalable_) {
      system_blocks::free(p);
    } else if (!only_scalable_ && bytes + alignment <= block_pool::max_bytes) {
      block_pool::deallocate(system_blocks::header_of(p).raw, bytes + alignment);
    } else {
      scalable_aligned_free(p);
    }
  }

  bool only_scalable_ = false;
  std::array<shard, shard_count> shards_;
  std::atomic<std::size_t> next_shard_{0};
  std::atomic<std::size_t> limit_{default_limit};
  // Process-wide, for the limit and the peak: the bytes kept and in use, and the peak of the latter.
  std::atomic<std::size_t> retained_{0}, live_{0}, peak_{0};
};

// The allocator of tenferro's arrays (see the top of this header).
template <class T>
struct buffer_allocator {
  using value_type = T;
  buffer_allocator() noexcept = default;
  template <class U>
  buffer_allocator(const buffer_allocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(buffer_cache::instance().allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { buffer_cache::instance().deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const buffer_allocator<U>&) const noexcept {
    return true;
  }
};

// n uninitialised elements from the buffer cache, released with it: scratch storage that needs
// no shape (cheaper to compile than an array type).
template <class T>
class scratch_buffer {
 public:
  scratch_buffer() noexcept = default;
  explicit scratch_buffer(std::size_t n)
      : data_(n > 0 ? buffer_allocator<T>().allocate(n) : nullptr), size_(n) {}
  scratch_buffer(scratch_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  // Swaps: `other` releases this object's former buffer when it is destroyed.
  scratch_buffer& operator=(scratch_buffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~scratch_buffer() {
    if (data_ != nullptr) buffer_allocator<T>().deallocate(data_, size_);
  }

  T* data() const noexcept { return data_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace detail

// The most bytes the cache keeps (default 1 GiB). Lowering it frees the oldest buffers at once.
inline std::size_t buffer_cache_limit() { return detail::buffer_cache::instance().limit(); }
inline void set_buffer_cache_limit(std::size_t bytes) { detail::buffer_cache::instance().set_limit(bytes); }

// Frees every cached buffer (tensors in use keep theirs).
inline void clear_buffer_cache() { detail::buffer_cache::instance().clear(); }

inline BufferCacheStats buffer_cache_stats() { return detail::buffer_cache::instance().stats(); }

// Starts a new peak: BufferCacheStats::peak_live_bytes becomes the bytes live now.
inline void reset_buffer_peak() { detail::buffer_cache::instance().reset_peak(); }

}  // namespace tenferro
