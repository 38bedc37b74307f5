// block_pool: per-thread free lists of small blocks, for the objects every eager op allocates and
// frees (a tensor's storage header, a result's state with its tape node).
//
// glibc's per-thread cache keeps 7 blocks of each size: a tape of a few hundred ops overflows it,
// and each op then pays for glibc's shared bins (sorting, coalescing). Here a thread keeps up to
// `keep` blocks of each 64-byte size class up to 1 KiB (larger requests go straight to operator
// new). A block freed on another thread joins that thread's lists; a thread's lists are returned
// to operator delete when it exits. Built with AddressSanitizer the pool is off, so that a
// use-after-free of these objects is still reported.
#pragma once

#include <tenferro/core/detail/config.hpp>

#include <cstddef>
#include <cstdint>
#include <new>

#define TENFERRO_BLOCK_POOL (!TENFERRO_SANITIZED_HEAP)

namespace tenferro::detail {

class block_pool {
 public:
  static constexpr std::size_t granule = 64;
  static constexpr std::size_t classes = 16;  // blocks of 64, 128, ..., 1024 bytes
  static constexpr std::uint32_t keep = 2048;
  static constexpr std::size_t max_bytes = classes * granule;  // the largest block it keeps

  static void* allocate(std::size_t bytes) {
    const std::size_t c = size_class(bytes);
    if (TENFERRO_BLOCK_POOL && c < classes) {
      lists& l = local();
      if (free_block* b = l.head[c]) {
        l.head[c] = b->next;
        --l.count[c];
        return b;
      }
      return ::operator new((c + 1) * granule);
    }
    return ::operator new(bytes);
  }

  static void deallocate(void* p, std::size_t bytes) noexcept {
    const std::size_t c = size_class(bytes);
    if (TENFERRO_BLOCK_POOL && c < classes) {
      lists& l = local();
      if (l.open && l.count[c] < keep) {
        l.head[c] = ::new (p) free_block{l.head[c]};
        ++l.count[c];
        return;
      }
      ::operator delete(p);
      return;
    }
    ::operator delete(p);
  }

  // Blocks the calling thread keeps in its lists (for tests).
  static std::size_t cached_blocks() noexcept {
    std::size_t n = 0;
    for (std::uint32_t k : local().count) n += k;
    return n;
  }

 private:
  struct free_block {
    free_block* next;
  };

  // Trivially destructible, so it stays usable while the thread's other thread_local and static
  // objects are destroyed; `closer` empties it when the thread exits and closes it to new blocks.
  struct lists {
    free_block* head[classes];
    std::uint32_t count[classes];
    bool open;
  };

  struct closer {
    lists* l;
    ~closer() {
      l->open = false;
      for (std::size_t c = 0; c < classes; ++c) {
        while (free_block* b = l->head[c]) {
          l->head[c] = b->next;
          ::operator delete(b);
        }
        l->count[c] = 0;
      }
    }
  };

  static std::size_t size_class(std::size_t bytes) noexcept { return bytes == 0 ? 0 : (bytes - 1) / granule; }

  static lists& local() noexcept {
    thread_local constinit lists l{{}, {}, false};
    if (!l.open) [[unlikely]] {
      open_once(l);
    }
    return l;
  }

  static void open_once(lists& l) noexcept {
    thread_local bool registered = false;
    if (registered) return;  // closed: the thread is exiting
    registered = true;
    l.open = true;
    thread_local closer c{&l};
    (void)c;
  }
};

// An allocator drawing from block_pool (for std::allocate_shared).
template <class T>
struct pool_allocator {
  using value_type = T;
  pool_allocator() noexcept = default;
  template <class U>
  pool_allocator(const pool_allocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                  "block_pool blocks have operator new's alignment");
    return static_cast<T*>(block_pool::allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { block_pool::deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const pool_allocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace tenferro::detail
