// Element buffers of every Tensor (and of every array the compile-time layer returns) come from
// tenferro's buffer allocator:
// - each buffer is 64-byte aligned (a cache line, one AVX-512 register);
// - a buffer of at least `buffer_cache_min_bytes` is kept when it is released, in a process-wide
//   cache bounded by `buffer_cache_limit()` bytes, and handed to the next request of about the
//   same size (a training step that makes the same shapes again reuses the same pages: no page
//   faults, no trips through the C heap);
// - smaller buffers come from the per-thread block pool (up to 1 KiB) or from malloc;
// - buffers of 2 MiB or more are mapped from the system directly (mmap), 2 MiB aligned and
//   marked for transparent huge pages (madvise MADV_HUGEPAGE; Debian's default THP mode serves
//   only such mappings). An 8 MB tensor then takes 4 TLB entries instead of 2048. Measured on
//   the eager `sum(sin(x) * y + exp(x * y))` op by op at N = 1e6, one thread, in interleaved
//   runs: median 7.1-7.2 ms against 8.4 ms from malloc (docs/benchmarks.md).
//
// Why not posix_memalign (xsimd's aligned allocator, xtensor's default under XTENSOR_USE_XSIMD):
// glibc serves an aligned request by carving a larger chunk and returning the ends to its bins;
// with multi-megabyte tensors made and freed every step the heap fragments (measured: 580 MB
// resident and 720 page faults per step for a loop that needs 60 MB), and without the fragments
// glibc returns freed megabytes to the system and faults them in again on the next step.
//
// The cache is thread-safe (one mutex, taken only for buffers of 64 KiB or more). Eviction is
// oldest first. A buffer larger than the limit is never kept; a limit of 0 turns caching off.
#pragma once

#include <tenferro/core/detail/block_pool.hpp>
#include <tenferro/core/detail/config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#if __has_include(<sys/mman.h>) && __has_include(<unistd.h>)
#include <sys/mman.h>
#include <unistd.h>
#define TENFERRO_HAS_MMAP 1
#else
#define TENFERRO_HAS_MMAP 0
#endif

// Whether this translation unit maps large buffers itself. Address-sanitizer builds keep them in
// malloc, where overflows of them are caught. (A block records how it was made, so translation
// units that differ here can still free each other's buffers.)
#if defined(__SANITIZE_ADDRESS__)
#define TENFERRO_MMAP_BUFFERS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TENFERRO_MMAP_BUFFERS 0
#endif
#endif
#if !defined(TENFERRO_MMAP_BUFFERS)
#define TENFERRO_MMAP_BUFFERS TENFERRO_HAS_MMAP
#endif

namespace tenferro {

// Counters of the buffer cache (process-wide, since the process started).
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
  static constexpr std::size_t alignment = 64;
  static constexpr std::size_t default_limit = std::size_t{1} << 30;

  static buffer_cache& instance() {
    // Never destroyed: tensors released during static destruction still find it.
    static buffer_cache* const c = new buffer_cache;
    return *c;
  }

  // A 64-byte aligned buffer of at least `bytes` bytes. Out of line, as deallocate: every array
  // constructor and destructor calls them, and inlined they would be compiled into each.
  TENFERRO_NOINLINE void* allocate(std::size_t bytes) {
    if (bytes < buffer_cache_min_bytes) {
      return place(small_allocate(bytes + alignment), bytes + alignment);
    }
    const std::size_t capacity = round_up(bytes);
    {
      std::lock_guard lock(mutex_);
      // Best fit among kept buffers no more than a quarter larger than the request.
      auto best = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->capacity >= capacity && it->capacity - capacity <= capacity / 4 &&
            (best == entries_.end() || it->capacity < best->capacity)) {
          best = it;
        }
      }
      if (best != entries_.end()) {
        void* p = best->data;
        const std::size_t held = best->capacity;
        stats_.retained_bytes -= held;
        entries_.erase(best);
        ++stats_.hits;
        --stats_.entries;
        count_live(held);
        return p;
      }
      ++stats_.misses;
    }
    bool mapped = false;
    void* raw = large_allocate(capacity + alignment, mapped);
    if (raw == nullptr) {
      clear();
      raw = large_allocate(capacity + alignment, mapped);
      if (raw == nullptr) throw std::bad_alloc();
    }
    void* p = place(raw, capacity, mapped);
    std::lock_guard lock(mutex_);
    count_live(capacity);
    return p;
  }

  // Releases a buffer from allocate(bytes) (the same `bytes`).
  TENFERRO_NOINLINE void deallocate(void* p, std::size_t bytes) noexcept {
    const header h = header_of(p);
    if (bytes < buffer_cache_min_bytes) {
      small_deallocate(h.raw, bytes + alignment);
      return;
    }
    std::vector<void*> evicted;
    {
      std::lock_guard lock(mutex_);
      stats_.live_bytes -= h.capacity;
      if (h.capacity <= limit_) {
        try {
          entries_.push_back({p, h.capacity});
          stats_.retained_bytes += h.capacity;
          ++stats_.entries;
          p = nullptr;
        } catch (...) {  // no room to record it: free it below
        }
        while (stats_.retained_bytes > limit_) pop_oldest(evicted);
      }
    }
    if (p != nullptr) large_free(h);
    for (void* q : evicted) large_free(header_of(q));
  }

  std::size_t limit() const {
    std::lock_guard lock(mutex_);
    return limit_;
  }

  void set_limit(std::size_t bytes) {
    std::vector<void*> evicted;
    {
      std::lock_guard lock(mutex_);
      limit_ = bytes;
      while (stats_.retained_bytes > limit_) pop_oldest(evicted);
    }
    for (void* q : evicted) large_free(header_of(q));
  }

  void clear() {
    std::vector<entry> all;
    {
      std::lock_guard lock(mutex_);
      all.swap(entries_);
      stats_.evictions += all.size();
      stats_.entries = 0;
      stats_.retained_bytes = 0;
    }
    for (const entry& e : all) large_free(header_of(e.data));
  }

  BufferCacheStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_live_bytes = stats_.live_bytes;
  }

 private:
  struct entry {
    void* data;
    std::size_t capacity;
  };
  // Kept just below the aligned address: where the block starts and how many bytes it holds.
  // `raw` has its lowest bit set for a mapped block (blocks are at least 16-byte aligned).
  struct header {
    void* raw;
    std::size_t capacity;
  };
  static constexpr std::uintptr_t mapped_tag = 1;
  // place() needs header + padding <= alignment for a block that is at least 16-byte aligned.
  static_assert(sizeof(header) <= 16);

  buffer_cache() = default;

  // Under the mutex: a buffer of `capacity` bytes handed out.
  void count_live(std::size_t capacity) {
    stats_.live_bytes += capacity;
    stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
  }

  // Large requests are rounded up to whole 4 KiB pages, so nearby sizes share buffers. A size
  // within a few huge pages of SIZE_MAX cannot be allocated (and would wrap the mapping's
  // rounding in large_allocate).
  static std::size_t round_up(std::size_t bytes) {
    constexpr std::size_t page = 4096;
    if (bytes > SIZE_MAX - 4 * huge_page) throw std::bad_alloc();
    return (bytes + page - 1) / page * page;
  }

  // The aligned address inside `raw` (a block of capacity + alignment bytes, at least
  // 16-byte aligned), with its header written just below it.
  static void* place(void* raw, std::size_t capacity, bool mapped = false) noexcept {
    const auto base = reinterpret_cast<std::uintptr_t>(raw) + sizeof(header);
    void* p = reinterpret_cast<void*>((base + alignment - 1) & ~std::uintptr_t{alignment - 1});
    void* const tagged =
        reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(raw) | (mapped ? mapped_tag : 0));
    ::new (static_cast<char*>(p) - sizeof(header)) header{tagged, capacity};
    return p;
  }

  static header header_of(void* p) noexcept {
    return *std::launder(reinterpret_cast<header*>(static_cast<char*>(p) - sizeof(header)));
  }

  // Blocks of `total` bytes (capacity + alignment) for cached buffers: from mmap, 2 MiB aligned
  // and advised for huge pages, from `huge_page` bytes on (`mapped` says so); else from malloc.
  // nullptr when the system has no memory left.
  static constexpr std::size_t huge_page = std::size_t{2} << 20;
  static void* large_allocate(std::size_t total, bool& mapped) noexcept {
    mapped = false;
#if TENFERRO_MMAP_BUFFERS
    if (total >= huge_page) {
      // Map a huge page more, then unmap the unaligned head and the tail beyond `length`.
      const std::size_t length = mapped_length(total);
      void* const region =
          ::mmap(nullptr, length + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (region == MAP_FAILED) return nullptr;
      const auto start = reinterpret_cast<std::uintptr_t>(region);
      const auto aligned = (start + huge_page - 1) & ~std::uintptr_t{huge_page - 1};
      if (aligned != start) ::munmap(region, aligned - start);
      if (const std::size_t tail = start + huge_page - aligned; tail != 0) {
        ::munmap(reinterpret_cast<void*>(aligned + length), tail);
      }
#if defined(MADV_HUGEPAGE)
      ::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // advice only: no error to handle
#endif
      mapped = true;
      return reinterpret_cast<void*>(aligned);
    }
#endif
    return std::malloc(total);
  }

  static void large_free(const header& h) noexcept {
    const auto raw = reinterpret_cast<std::uintptr_t>(h.raw);
#if TENFERRO_HAS_MMAP
    if ((raw & mapped_tag) != 0) {
      ::munmap(reinterpret_cast<void*>(raw & ~mapped_tag), mapped_length(h.capacity + alignment));
      return;
    }
#endif
    std::free(reinterpret_cast<void*>(raw));
  }

#if TENFERRO_HAS_MMAP
  // Whole huge pages when that wastes at most an eighth (1e6 doubles: 8 MiB for 8 MB, all of it
  // in huge pages), else whole pages of the system (mmap's unit; the tail beyond the last whole
  // huge page then has small pages).
  static std::size_t mapped_length(std::size_t total) noexcept {
    const std::size_t huge = (total + huge_page - 1) / huge_page * huge_page;
    if (huge - total <= total / 8) return huge;
    static const std::size_t page = [] {
      const long size = ::sysconf(_SC_PAGESIZE);
      return size > 0 ? static_cast<std::size_t>(size) : std::size_t{4096};
    }();
    return (total + page - 1) / page * page;
  }
#endif

  static void* small_allocate(std::size_t total) {
    if (total <= block_pool::classes * block_pool::granule) return block_pool::allocate(total);
    void* raw = std::malloc(total);
    if (raw == nullptr) throw std::bad_alloc();
    return raw;
  }

  static void small_deallocate(void* raw, std::size_t total) noexcept {
    if (total <= block_pool::classes * block_pool::granule) {
      block_pool::deallocate(raw, total);
    } else {
      std::free(raw);
    }
  }

  void pop_oldest(std::vector<void*>& evicted) {
    const entry e = entries_.front();
    entries_.erase(entries_.begin());
    stats_.retained_bytes -= e.capacity;
    --stats_.entries;
    ++stats_.evictions;
    try {
      evicted.push_back(e.data);
    } catch (...) {
      large_free(header_of(e.data));
    }
  }

  mutable std::mutex mutex_;
  std::vector<entry> entries_;  // oldest first
  std::size_t limit_ = default_limit;
  BufferCacheStats stats_;
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
