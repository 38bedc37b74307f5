// Moving large arrays through memory: the store rule (which passes write their outputs around the
// caches), prefetching the next tile, and the streaming stores themselves.
//
// The store rule: a pass streams its outputs (writes them with non-temporal stores, which skip
// reading each line before overwriting it, a third of the traffic of a pass that writes
// gradients) when the bytes it writes exceed streaming_store_threshold(), by default the size of
// the last-level cache. Below that the outputs stay in the cache, where whatever reads them next
// finds them. Used by the compile-time layer's memory-bound passes (expr/eval/pass.hpp) and the
// eager runtime's deferred passes (ad/deferred.hpp); the results are the same either way, only
// the traffic differs (docs/compile-time.md, "Where outputs are stored").
#pragma once

#include <tenferro/core/detail/environment.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include <unistd.h>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace tenferro {

// The size in bytes of the last-level cache one core shares, as the system reports it: the
// highest-level data or unified cache of CPU 0 in /sys/devices/system/cpu/cpu0/cache. Where the
// kernel publishes no cache topology (virtual machines that hide it from their guests), sysconf's
// level-3 (else level-2) size, capped at 32 MiB: it comes from a CPUID leaf that such a machine
// may fill with its host's total (one measured reports 508 MiB for the 32 MiB L3 of one core's
// complex). 32 MiB when neither says anything.
inline std::size_t last_level_cache_bytes() {
  std::size_t level = 0, bytes = 0;
  for (int k = 0; k < 16; ++k) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(k) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    std::size_t l = 0, size = 0;
    std::string type, suffix;
    if (!(level_file >> l) || !(type_file >> type) || !(size_file >> size)) break;
    size_file >> suffix;  // "K" or "M" as in "32768K"
    if (type == "Instruction") continue;
    const std::size_t scale = suffix == "M" ? std::size_t(1) << 20 : suffix == "K" ? 1024 : 1;
    if (l > level) level = l, bytes = size * scale;
  }
  if (bytes > 0) return bytes;
  constexpr std::size_t fallback = std::size_t(32) << 20;
  for (const int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    if (const long b = ::sysconf(name); b > 0) return std::min(static_cast<std::size_t>(b), fallback);
  }
  return fallback;
}

namespace detail {
inline constexpr std::size_t unresolved_threshold = SIZE_MAX;
inline std::atomic<std::size_t>& stream_threshold_state() noexcept {
  static std::atomic<std::size_t> bytes{unresolved_threshold};
  return bytes;
}
// Passes that have streamed their outputs, for tests of the rule.
inline std::atomic<std::uint64_t>& streamed_passes() noexcept {
  static std::atomic<std::uint64_t> count{0};
  return count;
}
}  // namespace detail

// The bytes a pass may write before it streams them: the value given to
// set_streaming_store_threshold, else the environment variable TENFERRO_STREAM_THRESHOLD (a whole
// number of bytes; anything else throws InvalidArgument naming it), else last_level_cache_bytes().
// Read once, on the first pass.
inline std::size_t streaming_store_threshold() {
  auto& state = detail::stream_threshold_state();
  std::size_t bytes = state.load(std::memory_order_relaxed);
  if (bytes != detail::unresolved_threshold) return bytes;
  const auto from_environment = detail::whole_number_from_environment(
      "TENFERRO_STREAM_THRESHOLD", std::getenv("TENFERRO_STREAM_THRESHOLD"), "streaming_store_threshold", 0,
      detail::unresolved_threshold - 1, "bytes");
  const std::size_t resolved = from_environment ? *from_environment : last_level_cache_bytes();
  // A value set meanwhile wins.
  state.compare_exchange_strong(bytes, std::min(resolved, detail::unresolved_threshold - 1),
                                std::memory_order_relaxed);
  return state.load(std::memory_order_relaxed);
}

// Sets the threshold for every later pass in the process (0: every pass bound by memory streams;
// SIZE_MAX: none does); nullopt goes back to the default, read again on the next pass. Results do
// not depend on it, only speed.
inline void set_streaming_store_threshold(std::optional<std::size_t> bytes) noexcept {
  detail::stream_threshold_state().store(
      bytes ? std::min(*bytes, detail::unresolved_threshold - 1) : detail::unresolved_threshold,
      std::memory_order_relaxed);
}

namespace detail {

// Whether a pass writing `arrays` arrays of `bytes_each` bytes streams them.
inline bool streams_outputs(std::size_t bytes_each, std::size_t arrays) {
  std::size_t written = 0;
  if (__builtin_mul_overflow(bytes_each, arrays, &written)) return true;
  return arrays > 0 && written > streaming_store_threshold();
}

inline constexpr std::size_t cache_line = 64;

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

}  // namespace detail
}  // namespace tenferro
