// Kernels that assemble tensors: concatenate along an axis (each input copied as whole column-major
// runs, one memcpy per run), the diagonal of a matrix (a view) and a matrix with a given diagonal,
// and the triangles of the last two axes.
#pragma once

#include <tenferro/cpu/common.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tenferro::cpu {

// The inputs joined along `axis` (every input of one dtype and rank, equal extents off the axis).
// Throws InvalidArgument for no inputs; Validation for a dtype or rank that differs from the first
// input's, or an axis out of range; ShapeMismatch naming both shapes and the axis where two inputs
// differ off the joined axis.
inline Tensor concatenate(std::span<const Tensor> in, std::size_t axis, std::string_view op) {
  check_not_empty(op, in.size());
  const Shape first = in[0].shape();
  check_axis(op, first, axis);
  Shape out = first;
  out[axis] = 0;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const Shape s = in[k].shape();
    if (in[k].dtype() != in[0].dtype()) {
      throw_error(ErrorKind::Validation, op,
                  {"input ", k, " has dtype ", dtype_name(in[k].dtype()), " but input 0 has ",
                   dtype_name(in[0].dtype()), " (shapes ", s, " and ", first, ")"});
    }
    if (s.size() != first.size()) {
      throw_error(ErrorKind::Validation, op,
                  {"rank mismatch: input ", k, " has rank ", s.size(), " (shape ", s, "), expected rank ",
                   first.size(), " as input 0 (shape ", first, ")"});
    }
    for (std::size_t d = 0; d < s.size(); ++d) {
      if (d != axis && s[d] != first[d]) {
        throw_error(ErrorKind::ShapeMismatch, op,
                    {"input ", k, " (shape ", s, ") and input 0 (shape ", first, ") differ on axis ", d,
                     ", which is not the joined axis ", axis});
      }
    }
    if (__builtin_add_overflow(out[axis], s[axis], &out[axis]))
      tenferro::detail::throw_shape_too_large(op, s);
  }
  if (!checked_shape_size(out)) tenferro::detail::throw_shape_too_large(op, out);
  // Column-major: below the axis an input is runs of inner * extent elements, one per outer index.
  // (Named fields, not a structured binding: clang 14 cannot capture one in a lambda.)
  const detail::axis_split split = detail::split_at(out, axis);
  const std::size_t inner = split.pre, joined = split.n, outer = split.post;
  return tenferro::detail::visit_dtype(in[0].dtype(), [&]<class T>(T) {
    Tensor result = Tensor::for_overwrite<T>(out, op);
    T* dst = result.mutable_array<T>().data();
    const std::size_t row = inner * joined;  // elements of one outer index in the result
    std::size_t at = 0;                      // where input k starts in a run of the result
    for (const Tensor& x : in) {
      const std::size_t run = inner * x.shape()[axis];
      if (run == 0) continue;
      const Tensor c = x.materialized();
      const T* src = c.as_slice<T>().data();
      for (std::size_t o = 0; o < outer; ++o) std::memcpy(dst + o * row + at, src + o * run, run * sizeof(T));
      at += run;
    }
    return result;
  });
}

// The diagonal of a matrix [m, n]: min(m, n) elements, a view (stride: the sum of both strides).
// Throws Validation for a rank other than 2.
inline Tensor extract_diag(const Tensor& x, std::string_view op) {
  const Shape s = x.shape();
  if (s.size() != 2) {
    throw_error(ErrorKind::Validation, op,
                {"rank mismatch: expected a matrix (rank 2), got rank ", s.size(), " (shape ", s, ")"});
  }
  const std::size_t k = std::min(s[0], s[1]);
  if (k == 0) return Tensor::zeros({0}, x.dtype());
  const Strides st = x.strides();
  return x.as_strided({k}, {st[0] + st[1]}, x.offset());
}

// The matrix [m, n] with v (a vector of min(m, n) elements) on its diagonal and zeros elsewhere.
inline Tensor embed_diag(const Tensor& v, std::size_t m, std::size_t n, std::string_view op) {
  const Shape s = v.shape();
  if (s.size() != 1 || s[0] != std::min(m, n)) {
    throw_error(ErrorKind::ShapeMismatch, op,
                {"a diagonal of shape ", s, " does not fit a matrix of shape ", Shape{m, n},
                 " (expected shape ", Shape{std::min(m, n)}, ")"});
  }
  if (!checked_shape_size(Shape{m, n})) tenferro::detail::throw_shape_too_large(op, Shape{m, n});
  Tensor result = Tensor::zeros({m, n}, v.dtype());
  const Tensor c = v.materialized();
  tenferro::detail::visit_dtype(v.dtype(), [&]<class T>(T) {
    T* dst = result.mutable_array<T>().data();
    const T* src = c.as_slice<T>().data();
    for (std::size_t i = 0; i < s[0]; ++i) dst[i + i * m] = src[i];
  });
  return result;
}

// Which triangle of the last two axes (rows i, columns j) a mask keeps: tril keeps j - i <= k,
// triu keeps j - i >= k.
enum class triangle : std::uint8_t { lower, upper };

// x with the elements outside the triangle zeroed, over every matrix of its last two axes.
// Throws Validation for a rank below 2.
inline Tensor triangle_of(const Tensor& x, triangle which, std::int64_t k, std::string_view op) {
  const Shape s = x.shape();
  if (s.size() < 2) {
    throw_error(ErrorKind::Validation, op,
                {"rank mismatch: expected rank 2 or more (matrices over the last two axes), got rank ",
                 s.size(), " (shape ", s, ")"});
  }
  Tensor result = x.clone();
  const std::size_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  const std::size_t inner = detail::split_at(s, s.size() - 2).pre;  // the batch axes vary fastest
  if (result.size() == 0) return result;
  tenferro::detail::visit_dtype(x.dtype(), [&]<class T>(T) {
    T* p = result.mutable_array<T>().data();
    for (std::size_t j = 0; j < cols; ++j) {
      for (std::size_t i = 0; i < rows; ++i) {
        // j - i against k without overflow: in 128 bits.
        __extension__ typedef __int128 wide;
        const wide diff = wide(j) - wide(i);
        const bool keep = which == triangle::lower ? diff <= k : diff >= k;
        if (keep) continue;
        T* m = p + (i + j * rows) * inner;
        std::fill(m, m + inner, T{});
      }
    }
  });
  return result;
}

}  // namespace tenferro::cpu
