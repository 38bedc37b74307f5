// Moving large arrays through memory: prefetching the next tile, and writing results that will
// not be read soon around the caches.
//
// Used by the eager runtime's deferred passes (ad/deferred.hpp), which walk every array they
// touch in tiles of one page: the hardware prefetchers follow a stream only within a page, so the
// pass asks for the next tile's lines itself. An array of several MB written by a pass leaves the
// caches anyway, so the deferred passes and the fused loop's memory-bound passes
// (expr/eval/fused_loop.hpp) write it with streaming stores, which skip reading every line before
// overwriting it (a third of the memory traffic of a pass that writes gradients).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace tenferro::detail {

inline constexpr std::size_t cache_line = 64;

// Arrays of at least this many bytes written by one pass go around the caches: they leave them
// before they are read anyway (measured: the two 8 MB gradients of a backward pass, about 1 ms
// less, with no slower read of them afterwards).
inline constexpr std::size_t stream_bytes = std::size_t(4) << 20;

// Stores SIMD register v (an xsimd batch converts to it) at p, aligned to the register's size,
// around the caches; any other type with an ordinary copy.
template <class R>
void stream_register(const R& v, void* p) noexcept {
  std::memcpy(p, &v, sizeof(R));
}
#if defined(__AVX512F__)
inline void stream_register(__m512d v, void* p) noexcept { _mm512_stream_pd(static_cast<double*>(p), v); }
inline void stream_register(__m512 v, void* p) noexcept { _mm512_stream_ps(static_cast<float*>(p), v); }
#endif
#if defined(__AVX__)
inline void stream_register(__m256d v, void* p) noexcept { _mm256_stream_pd(static_cast<double*>(p), v); }
inline void stream_register(__m256 v, void* p) noexcept { _mm256_stream_ps(static_cast<float*>(p), v); }
#endif
#if defined(__SSE2__)
inline void stream_register(__m128d v, void* p) noexcept { _mm_stream_pd(static_cast<double*>(p), v); }
inline void stream_register(__m128 v, void* p) noexcept { _mm_stream_ps(static_cast<float*>(p), v); }
#endif

// Asks for the cache lines of [p, p + bytes) in the second-level cache, to read or to write.
inline void prefetch_for_read(const void* p, std::size_t bytes) noexcept {
  for (std::size_t k = 0; k < bytes; k += cache_line)
    __builtin_prefetch(static_cast<const char*>(p) + k, 0, 2);
}
inline void prefetch_for_write(const void* p, std::size_t bytes) noexcept {
  for (std::size_t k = 0; k < bytes; k += cache_line)
    __builtin_prefetch(static_cast<const char*>(p) + k, 1, 2);
}

// dst[0, n) = src[0, n), written around the caches when dst is 64-byte aligned and the copy is
// whole cache lines (else, and without SSE2, an ordinary copy).
// Call stream_fence() before another thread may read dst.
template <class T>
void stream_copy(T* dst, const T* src, std::size_t n) noexcept {
  const std::size_t bytes = n * sizeof(T);
#if defined(__SSE2__)
  if (reinterpret_cast<std::uintptr_t>(dst) % cache_line == 0 && bytes % cache_line == 0) {
    auto* d = reinterpret_cast<char*>(dst);
    const auto* s = reinterpret_cast<const char*>(src);
    for (std::size_t k = 0; k < bytes; k += cache_line) {
#if defined(__AVX512F__)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + k), _mm512_loadu_si512(s + k));
#elif defined(__AVX__)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + k),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k)));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + k + 32),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k + 32)));
#else
      for (std::size_t q = 0; q < cache_line; q += 16) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + k + q),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k + q)));
      }
#endif
    }
    return;
  }
#endif
  std::copy_n(src, n, dst);
}

// Orders this thread's streaming stores before its later stores (and so before a release).
inline void stream_fence() noexcept {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace tenferro::detail
