// Where the buffer cache (core/buffer_cache.hpp) gets its blocks: 64-byte aligned buffers with a
// header just below the aligned address that records the block they were carved from, so that a
// buffer can be freed knowing only its address.
// - Buffers of 2 MiB or more are mapped from the system (mmap), 2 MiB aligned and marked for
//   transparent huge pages (madvise MADV_HUGEPAGE; Debian's default THP mode serves only such
//   mappings): an 8 MB tensor takes 4 TLB entries instead of 2048. Freeing one unmaps it, so its
//   pages go back to the system at once.
// - Smaller ones come from malloc.
// Address-sanitizer builds take every block from malloc, where overflows of them are caught. (A
// block records how it was made, so translation units that differ here can still free each
// other's buffers.)
#pragma once

#include <tenferro/core/detail/config.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#if __has_include(<sys/mman.h>) && __has_include(<unistd.h>)
#include <sys/mman.h>
#include <unistd.h>
#define TENFERRO_HAS_MMAP 1
#else
#define TENFERRO_HAS_MMAP 0
#endif

// Whether this translation unit maps large buffers itself.
#define TENFERRO_MMAP_BUFFERS (TENFERRO_HAS_MMAP && !TENFERRO_SANITIZED_HEAP)

namespace tenferro::detail::system_blocks {

inline constexpr std::size_t alignment = 64;
inline constexpr std::size_t huge_page = std::size_t{2} << 20;

// Kept just below the aligned address: where the block starts and how many bytes the buffer
// holds. `raw` has its lowest bit set for a mapped block (blocks are at least 16-byte aligned).
struct header {
  void* raw;
  std::size_t capacity;
};
inline constexpr std::uintptr_t mapped_tag = 1;
// place() needs header + padding <= alignment for a block that is at least 16-byte aligned.
static_assert(sizeof(header) <= 16);

// The aligned address inside `raw` (a block of capacity + alignment bytes, at least 16-byte
// aligned), with its header written just below it.
inline void* place(void* raw, std::size_t capacity, bool mapped = false) noexcept {
  const auto base = reinterpret_cast<std::uintptr_t>(raw) + sizeof(header);
  void* p = reinterpret_cast<void*>((base + alignment - 1) & ~std::uintptr_t{alignment - 1});
  void* const tagged =
      reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(raw) | (mapped ? mapped_tag : 0));
  ::new (static_cast<char*>(p) - sizeof(header)) header{tagged, capacity};
  return p;
}

inline header header_of(void* p) noexcept {
  return *std::launder(reinterpret_cast<header*>(static_cast<char*>(p) - sizeof(header)));
}

#if TENFERRO_HAS_MMAP
// Whole huge pages when that wastes at most an eighth (1e6 doubles: 8 MiB for 8 MB, all of it in
// huge pages), else whole pages of the system (mmap's unit; the tail beyond the last whole huge
// page then has small pages).
inline std::size_t mapped_length(std::size_t total) noexcept {
  const std::size_t huge = (total + huge_page - 1) / huge_page * huge_page;
  if (huge - total <= total / 8) return huge;
  static const std::size_t page = [] {
    const long size = ::sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<std::size_t>(size) : std::size_t{4096};
  }();
  return (total + page - 1) / page * page;
}
#endif

// A buffer of `capacity` bytes (which must stay a few huge pages below SIZE_MAX), or nullptr
// when the system has no memory left.
inline void* allocate(std::size_t capacity) noexcept {
  const std::size_t total = capacity + alignment;
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
    return place(reinterpret_cast<void*>(aligned), capacity, true);
  }
#endif
  void* raw = std::malloc(total);
  return raw == nullptr ? nullptr : place(raw, capacity);
}

// Frees a buffer from allocate().
inline void free(void* p) noexcept {
  const header h = header_of(p);
  const auto raw = reinterpret_cast<std::uintptr_t>(h.raw);
#if TENFERRO_HAS_MMAP
  if ((raw & mapped_tag) != 0) {
    ::munmap(reinterpret_cast<void*>(raw & ~mapped_tag), mapped_length(h.capacity + alignment));
    return;
  }
#endif
  std::free(reinterpret_cast<void*>(raw));
}

inline std::size_t capacity_of(void* p) noexcept { return header_of(p).capacity; }

}  // namespace tenferro::detail::system_blocks
