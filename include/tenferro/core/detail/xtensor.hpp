// The one place tenferro includes xtensor and xsimd. Every other header includes this one instead
// of <xtensor/...> or <xsimd/...> (a layering test enforces it), so the compatibility fixes below
// are in force before any xtensor template is instantiated.
#pragma once

#include <tenferro/core/buffer_cache.hpp>

// xsimd 8 + g++ without optimization + AVX-512BW: GCC's avx512bwintrin.h defines
// _mm512_mask_blend_epi8 and _epi16 as macros when not optimizing, which cast their arguments
// straight to __v64qi / __v32hi; xsimd's select on integer batches passes batch objects, which
// only convert to __m512i, so every integer kernel fails to compile at -O0. Redefined with the
// conversion to __m512i first (what the inline functions used when optimizing do).
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__) && defined(__AVX512BW__)
#include <immintrin.h>
#undef _mm512_mask_blend_epi8
#undef _mm512_mask_blend_epi16
#define _mm512_mask_blend_epi8(U, A, W) \
  ((__m512i)__builtin_ia32_blendmb_512_mask((__v64qi)(__m512i)(A), (__v64qi)(__m512i)(W), (__mmask64)(U)))
#define _mm512_mask_blend_epi16(U, A, W) \
  ((__m512i)__builtin_ia32_blendmw_512_mask((__v32hi)(__m512i)(A), (__v32hi)(__m512i)(W), (__mmask32)(U)))
#endif

#include <xtensor/xexpression_traits.hpp>

// xtensor 0.24 + g++ >= 7 + C++20: xexpression_traits.hpp declares the svector-shape partial
// specialization of xtype_for_shape only when __cplusplus == 201703L. Without it, P0522 template
// template matching lets svector<T, N, A, Init> match the std::array-shaped specialization
// S<X, N>, so the temporary type of an xarray expression becomes xtensor<T, 4>: xt::eval(a + a)
// reads past its shape, immediate reductions throw and xt::tile corrupts the heap. Re-declaring
// the more specialized template-template form restores xarray. (Fixed upstream in 0.26.)
#if defined(__GNUC__) && (__GNUC__ > 6) && (__cplusplus > 201703L) && (XTENSOR_VERSION_MAJOR == 0) && \
    (XTENSOR_VERSION_MINOR < 26)
namespace xt::detail {
template <template <class, std::size_t, class, bool> class S, class X, std::size_t N, class A, bool Init>
struct xtype_for_shape<S<X, N, A, Init>> {
  template <class T, layout_type L>
  using type = xarray<T, L>;
};
}  // namespace xt::detail
#endif

#include <xsimd/xsimd.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

namespace tenferro {
// The xtensor container behind a Tensor of element type T, and the array type the compile-time
// layer returns: dense, column-major (the first index varies fastest), its elements in a 64-byte
// aligned buffer from tenferro's buffer cache (core/buffer_cache.hpp).
template <class T>
using column_major_array = xt::xarray<T, xt::layout_type::column_major, detail::buffer_allocator<T>>;
}  // namespace tenferro
