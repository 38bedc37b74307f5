// Copying a strided view into a compact column-major array (Tensor::materialized()). The plain
// walk reads along the first axis. When another axis is the one stored contiguously (a transposed
// view), reading along the first axis touches a new cache line per element; the walk then goes in
// 8 x 8 tiles over those two axes, each read as 8 contiguous rows and written as 8 contiguous
// columns: in registers with AVX-512 (f64: three rounds of shuffles), through a small local array
// otherwise. On a transposed [4000, 2500] f64 against a memcpy of the same bytes: 1.1-1.5x with the
// shuffles (docs/benchmarks.md, "Copies"), about 2x through the local array, 3.5x read element by
// element in 32 x 32 tiles.
#pragma once

#include <tenferro/core/shape.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tenferro::detail {

inline constexpr std::size_t copy_tile = 8;

// d[i + c op] = s[i s0 + c] for i, c < 8: an 8 x 8 tile whose source rows (fixed i) are contiguous.
template <class T>
void transpose_tile(const T* s, std::ptrdiff_t s0, T* d, std::ptrdiff_t op) {
  constexpr std::size_t n = copy_tile;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, double>) {
    __m512d r[n], t[n], u[n];
    for (std::size_t i = 0; i < n; ++i) r[i] = _mm512_loadu_pd(s + static_cast<std::ptrdiff_t>(i) * s0);
    for (std::size_t k = 0; k < n / 2; ++k) {  // pairs of rows interleaved within 128-bit lanes
      t[2 * k] = _mm512_unpacklo_pd(r[2 * k], r[2 * k + 1]);
      t[2 * k + 1] = _mm512_unpackhi_pd(r[2 * k], r[2 * k + 1]);
    }
    for (std::size_t k = 0; k < 2; ++k) {  // then 128-bit lanes of four rows, then of all eight
      u[4 * k] = _mm512_shuffle_f64x2(t[4 * k], t[4 * k + 2], 0x88);
      u[4 * k + 1] = _mm512_shuffle_f64x2(t[4 * k], t[4 * k + 2], 0xdd);
      u[4 * k + 2] = _mm512_shuffle_f64x2(t[4 * k + 1], t[4 * k + 3], 0x88);
      u[4 * k + 3] = _mm512_shuffle_f64x2(t[4 * k + 1], t[4 * k + 3], 0xdd);
    }
    constexpr std::size_t column[4][2] = {{0, 4}, {2, 6}, {1, 5}, {3, 7}};  // of u[k] with u[k + 4]
    for (std::size_t k = 0; k < 4; ++k) {
      _mm512_storeu_pd(d + static_cast<std::ptrdiff_t>(column[k][0]) * op,
                       _mm512_shuffle_f64x2(u[k], u[k + 4], 0x88));
      _mm512_storeu_pd(d + static_cast<std::ptrdiff_t>(column[k][1]) * op,
                       _mm512_shuffle_f64x2(u[k], u[k + 4], 0xdd));
    }
    return;
  }
#endif
  T tile[n][n];
#pragma GCC unroll 8
  for (std::size_t i = 0; i < n; ++i) {
#pragma GCC unroll 8
    for (std::size_t c = 0; c < n; ++c)
      tile[c][i] = s[static_cast<std::ptrdiff_t>(i) * s0 + static_cast<std::ptrdiff_t>(c)];
  }
#pragma GCC unroll 8
  for (std::size_t c = 0; c < n; ++c) {
#pragma GCC unroll 8
    for (std::size_t i = 0; i < n; ++i)
      d[static_cast<std::ptrdiff_t>(c) * op + static_cast<std::ptrdiff_t>(i)] = tile[c][i];
  }
}

template <class T>
void copy_to_compact(const T* src, std::span<const std::size_t> shape,
                     std::span<const std::ptrdiff_t> strides, T* dst) {
  constexpr std::size_t tile = copy_tile;
  const std::size_t rank = shape.size();
  std::size_t p = rank;  // the contiguous axis, when it is not the first
  if (rank >= 2 && strides[0] != 1 && strides[0] != -1) {
    for (std::size_t d = 1; d < rank && p == rank; ++d) {
      if ((strides[d] == 1 || strides[d] == -1) && shape[d] > 1) p = d;
    }
  }
  if (p == rank || shape[0] < tile || shape[p] < tile) {
    if (rank == 0 || (strides[0] != 0 && strides[0] != 1)) {
      for_each_column_major(shape, strides, [&](std::size_t k, std::ptrdiff_t at) { dst[k] = src[at]; });
      return;
    }
    // Whole runs along axis 0: one element repeated (a broadcast) or a contiguous copy.
    const std::size_t run = shape[0];
    const bool repeated = strides[0] == 0;
    for_each_column_major(shape.subspan(1), strides.subspan(1), [&](std::size_t r, std::ptrdiff_t at) {
      T* d = dst + r * run;
      if (repeated) {
        std::fill_n(d, run, src[at]);
      } else {
        std::copy_n(src + at, run, d);
      }
    });
    return;
  }
  // The other axes are walked as an odometer around the tiled pair (axis 0, axis p).
  const Strides out = column_major_strides(shape);
  const std::size_t n0 = shape[0], np = shape[p];
  const std::ptrdiff_t s0 = strides[0], sp = strides[p], op = out[p];
  std::size_t outer = 1;
  for (std::size_t d = 1; d < rank; ++d) outer *= d == p ? 1 : shape[d];
  std::vector<std::size_t> at(rank, 0);
  std::ptrdiff_t from = 0, to = 0;
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t j0 = 0; j0 < np; j0 += tile) {
      const std::size_t j1 = std::min(np, j0 + tile);
      for (std::size_t i0 = 0; i0 < n0; i0 += tile) {
        const std::size_t i1 = std::min(n0, i0 + tile);
        if (sp == 1 && i1 - i0 == tile && j1 - j0 == tile) {
          transpose_tile(
              src + from + static_cast<std::ptrdiff_t>(j0) + static_cast<std::ptrdiff_t>(i0) * s0, s0,
              dst + to + static_cast<std::ptrdiff_t>(j0) * op + static_cast<std::ptrdiff_t>(i0), op);
          continue;
        }
        for (std::size_t j = j0; j < j1; ++j) {
          const T* s = src + from + static_cast<std::ptrdiff_t>(j) * sp;
          T* d = dst + to + static_cast<std::ptrdiff_t>(j) * op;
          for (std::size_t i = i0; i < i1; ++i) d[i] = s[static_cast<std::ptrdiff_t>(i) * s0];
        }
      }
    }
    for (std::size_t d = 1; d < rank; ++d) {  // the next outer index
      if (d == p) continue;
      from += strides[d], to += out[d];
      if (++at[d] < shape[d]) break;
      from -= strides[d] * static_cast<std::ptrdiff_t>(shape[d]);
      to -= out[d] * static_cast<std::ptrdiff_t>(shape[d]);
      at[d] = 0;
    }
  }
}

}  // namespace tenferro::detail
