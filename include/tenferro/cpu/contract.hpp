// The contraction kernel (dot_general, core/contraction.hpp): per batch index, one matrix product
// C = A B of an m x k and a k x n matrix. f32, f64, c32 and c64 run on BLAS's gemm (CBLAS, from
// the BLAS the build links: OpenBLAS on Debian), i32 and i64 on a loop that wraps on overflow as
// their elementwise ops do. Large products are cut into tiles of C (whole batches, or blocks of
// rows and columns) split over the calling arena's threads, the same way whatever their number (a
// serial BLAS is expected: a threaded one would add its own threads to each).
//
// Operands are read in place when each matrix is a strided view BLAS can take (one of its two
// axis groups with unit stride: a compact operand, a transpose of one, a batch of either, also a
// broadcast batch); otherwise they are compacted once, in the needed order.
#pragma once

#include <tenferro/core/contraction.hpp>
#include <tenferro/core/detail/parallel.hpp>
#include <tenferro/cpu/common.hpp>
#include <tenferro/cpu/complex.hpp>
#include <tenferro/cpu/layout.hpp>

#include <cblas.h>

#include <climits>
#include <complex>
#include <type_traits>

namespace tenferro::cpu {

namespace detail {

// One operand as a stack of matrices: element (i, p) of matrix b lies at
// data[offsets[b] + i * (transposed ? ld : 1) + p * (transposed ? 1 : ld)].
template <class T>
struct matrix_stack {
  Tensor hold;  // owns the buffer `data` points into
  const T* data = nullptr;
  std::vector<std::ptrdiff_t> offsets;
  bool transposed = false;
  std::ptrdiff_t ld = 1;
};

// The stride of axes [lo, hi) of a view read as one axis: nullopt when they do not merge; 0 when
// they hold at most one element (any stride will do).
inline std::optional<std::ptrdiff_t> merged_stride(const Shape& shape, const Strides& strides, std::size_t lo,
                                                   std::size_t hi) {
  std::optional<std::ptrdiff_t> stride;
  std::ptrdiff_t next = 0;
  for (std::size_t d = lo; d < hi; ++d) {
    if (shape[d] == 1) continue;
    if (shape[d] == 0) return std::ptrdiff_t{0};
    if (stride && strides[d] != next) return std::nullopt;
    if (!stride) stride = strides[d];
    next = strides[d] * static_cast<std::ptrdiff_t>(shape[d]);
  }
  return stride.value_or(0);
}

// x's axes `order` (rows..., cols..., batch...) as a stack of rows x cols matrices. `in_place`:
// whether a view BLAS can read is kept (else every operand is compacted, for the integer loop).
template <class T>
matrix_stack<T> as_matrices(const Tensor& x, const Axes& order, std::size_t row_axes, std::size_t col_axes,
                            std::size_t rows, std::size_t cols, bool in_place) {
  matrix_stack<T> s;
  Tensor v = transpose(x, order, "dot_general");
  const Shape shape = v.shape();
  Strides strides = v.strides();
  const std::size_t split = row_axes + col_axes;
  const auto rs = merged_stride(shape, strides, 0, row_axes);
  const auto cs = merged_stride(shape, strides, row_axes, split);
  const auto r = static_cast<std::ptrdiff_t>(rows), c = static_cast<std::ptrdiff_t>(cols);
  bool ok = false;
  if (in_place && rs && cs) {
    if ((rows <= 1 || *rs == 1) && (cols <= 1 || *cs >= std::max<std::ptrdiff_t>(1, r))) {
      ok = true, s.transposed = false, s.ld = cols <= 1 ? std::max<std::ptrdiff_t>(1, r) : *cs;
    } else if ((cols <= 1 || *cs == 1) && (rows <= 1 || *rs >= std::max<std::ptrdiff_t>(1, c))) {
      ok = true, s.transposed = true, s.ld = rows <= 1 ? std::max<std::ptrdiff_t>(1, c) : *rs;
    }
  }
  if (ok && s.ld > INT_MAX) ok = false;  // BLAS's leading dimension is an int
  if (!ok) {
    v = v.materialized();
    strides = column_major_strides(shape);
    s.transposed = false;
    s.ld = std::max<std::ptrdiff_t>(1, r);
  }
  s.data = v.template data<T>();
  s.hold = std::move(v);
  // The batch axes, the first varying fastest (the order of the result's batch axes).
  s.offsets.assign(1, 0);
  for (std::size_t d = split; d < shape.size(); ++d) {
    const std::size_t before = s.offsets.size();
    s.offsets.resize(before * shape[d]);
    for (std::size_t i = 1; i < shape[d]; ++i) {
      for (std::size_t j = 0; j < before; ++j) {
        s.offsets[i * before + j] = s.offsets[j] + static_cast<std::ptrdiff_t>(i) * strides[d];
      }
    }
  }
  return s;
}

// One tile of a product: rows [i0, i1) and columns [j0, j1) of C = A B for batch index `batch`;
// c points at the tile's first element of a column-major C with leading dimension ldc.
struct tile {
  std::size_t batch, i0, i1, j0, j1;
};
template <class T>
void gemm_tile(const matrix_stack<T>& a, const matrix_stack<T>& b, std::size_t k, const tile& t, T* c,
               std::size_t ldc) {
  const auto lda = static_cast<std::size_t>(a.ld), ldb = static_cast<std::size_t>(b.ld);
  const T* A = a.data + a.offsets[t.batch] + static_cast<std::ptrdiff_t>(t.i0 * (a.transposed ? lda : 1));
  const T* B = b.data + b.offsets[t.batch] + static_cast<std::ptrdiff_t>(t.j0 * (b.transposed ? 1 : ldb));
  const std::size_t m = t.i1 - t.i0, n = t.j1 - t.j0;
  if constexpr (std::is_floating_point_v<T> || expr::Complex<T>) {
    const auto ta = a.transposed ? CblasTrans : CblasNoTrans, tb = b.transposed ? CblasTrans : CblasNoTrans;
    const auto M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
    const auto la = static_cast<int>(lda), lb = static_cast<int>(ldb), lc = static_cast<int>(ldc);
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasColMajor, ta, tb, M, N, K, 1.0f, A, la, B, lb, 0.0f, c, lc);
    } else if constexpr (std::is_same_v<T, double>) {
      cblas_dgemm(CblasColMajor, ta, tb, M, N, K, 1.0, A, la, B, lb, 0.0, c, lc);
    } else {
      const T one(1), zero(0);
      if constexpr (std::is_same_v<T, std::complex<float>>) {
        cblas_cgemm(CblasColMajor, ta, tb, M, N, K, &one, A, la, B, lb, &zero, c, lc);
      } else {
        cblas_zgemm(CblasColMajor, ta, tb, M, N, K, &one, A, la, B, lb, &zero, c, lc);
      }
    }
  } else {  // integers, compact operands: wrapping arithmetic in the unsigned type
    using U = std::make_unsigned_t<T>;
    for (std::size_t j = 0; j < n; ++j) {
      U* cj = reinterpret_cast<U*>(c) + j * ldc;
      std::fill(cj, cj + m, U(0));
      for (std::size_t p = 0; p < k; ++p) {
        const auto s = static_cast<U>(B[p + j * ldb]);
        const T* ap = A + p * lda;
        for (std::size_t i = 0; i < m; ++i) cj[i] += static_cast<U>(ap[i]) * s;
      }
    }
  }
}

}  // namespace detail

// A product of more than this many multiply-adds (n = 256 cubed) is cut into tiles of C, the
// tasks split over the arena's threads; from 2^28 (n = 645 cubed) the tiles are 512 x 512, below
// 256 x 256. The cut depends on the shapes only, never on the thread count, so results are the
// same bits on any number of threads (BLAS blocks a smaller call differently). Each tile packs its
// rows of A and columns of B: few large tiles keep that repacking small.
inline constexpr double parallel_work = 1 << 24;
// The contraction of a and b (core/contraction.hpp), each conjugated first when conj_a / conj_b
// (complex operands; real ones are unchanged). Computes in the promoted dtype; bool operands
// alone are Unsupported. The result is a view (its batch axes first) of a buffer laid out
// [lhs free..., rhs free..., batch...], one column-major matrix per batch index.
inline Tensor dot_general(const Tensor& a, const Tensor& b, const DotGeneralConfig& config, bool conj_a,
                          bool conj_b, std::string_view op) {
  const tenferro::detail::contraction_plan plan =
      tenferro::detail::plan_contraction(op, a.shape(), b.shape(), config);
  const std::array<Tensor, 2> in{a, b};
  const DType dtype = promote(op, in, every_kernel);
  if (a.dtype() == DType::Bool && b.dtype() == DType::Bool) {
    throw Error(ErrorKind::Unsupported, std::string(op),
                "both operands (shapes " + format_shape(a.shape()) + " and " + format_shape(b.shape()) +
                    ") are bool: convert them to an integer or floating dtype first");
  }
  Shape layout;  // [lhs free..., rhs free..., batch...]
  for (const std::size_t d : plan.lhs_free) layout.push_back(a.shape()[d]);
  for (const std::size_t d : plan.rhs_free) layout.push_back(b.shape()[d]);
  for (const std::size_t d : config.lhs_batch) layout.push_back(a.shape()[d]);
  Tensor out = visit_compute(dtype, [&]<class T>(T) {
    auto c = tenferro::detail::new_array<T>(op, layout);
    const std::size_t mn = plan.m * plan.n;
    if (mn * plan.batch == 0) return Tensor(std::move(c));
    if (plan.k == 0) {
      std::fill(c.data(), c.data() + c.size(), T(0));
      return Tensor(std::move(c));
    }
    if constexpr (std::is_floating_point_v<T> || expr::Complex<T>) {
      for (const std::size_t e : {plan.m, plan.n, plan.k}) {
        if (e > static_cast<std::size_t>(INT_MAX)) {
          throw Error(ErrorKind::Unsupported, std::string(op),
                      "a matrix extent of " + std::to_string(e) + " exceeds BLAS's 32-bit index (lhs shape " +
                          format_shape(a.shape()) + ", rhs shape " + format_shape(b.shape()) + ")");
        }
      }
    }
    auto operand = [&](const Tensor& x, bool conj, const Axes& order, std::size_t row_axes,
                       std::size_t col_axes, std::size_t rows, std::size_t cols) {
      Tensor t = cast(x, dtype);
      if (conj && is_complex(dtype)) t = part_of(t, complex_part::conj, op);
      constexpr bool blas = std::is_floating_point_v<T> || expr::Complex<T>;
      return detail::as_matrices<T>(t, order, row_axes, col_axes, rows, cols, blas);
    };
    const std::size_t nc = config.lhs_contracting.size();
    const auto A = operand(a, conj_a, plan.lhs_order, plan.lhs_free.size(), nc, plan.m, plan.k);
    const auto B = operand(b, conj_b, plan.rhs_order, nc, plan.rhs_free.size(), plan.k, plan.n);
    T* C = c.data();
    const double work = double(mn) * double(plan.k) * double(plan.batch);
    const std::size_t edge = work <= parallel_work ? 0 : work < double(1 << 28) ? 256 : 512;
    const std::size_t rows = edge ? (plan.m + edge - 1) / edge : 1,
                      cols = edge ? (plan.n + edge - 1) / edge : 1;
    auto task = [&](std::size_t t) {
      const std::size_t batch = t / (rows * cols), r = t / cols % rows, q = t % cols;
      const detail::tile tl{batch, plan.m * r / rows, plan.m * (r + 1) / rows, plan.n * q / cols,
                            plan.n * (q + 1) / cols};
      detail::gemm_tile(A, B, plan.k, tl, C + batch * mn + tl.j0 * plan.m + tl.i0, plan.m);
    };
    const std::size_t tasks = edge ? plan.batch * rows * cols : 0;
    if (!edge) {
      for (std::size_t t = 0; t < plan.batch; ++t) task(t);
    } else {
      auto tiles = [&](std::size_t begin, std::size_t end) {
        for (std::size_t t = begin; t != end; ++t) task(t);
      };
      tenferro::detail::parallel_ranges(tasks, 1, tenferro::detail::split::adaptive, tiles);
    }
    return Tensor(std::move(c));
  });
  if (config.lhs_batch.empty()) return out;
  const std::size_t nb = config.lhs_batch.size(), nfree = layout.size() - nb;
  Axes perm;
  for (std::size_t d = 0; d < nb; ++d) perm.push_back(nfree + d);
  for (std::size_t d = 0; d < nfree; ++d) perm.push_back(d);
  return transpose(out, perm, op);
}

// What CpuBackend::run weighs for dot_general(a, b, config): 0 when the product runs as one task
// (at most parallel_work multiply-adds: entering the arena would only cost), else the
// multiply-adds (saturated). a holds m k b elements and b k n b, so m n k b is |a| |b| / (k b).
inline std::size_t contraction_work(const Tensor& a, const Tensor& b, const DotGeneralConfig& config) {
  const Shape sa = a.shape();
  double kb = 1;
  for (const Axes* list : {&config.lhs_contracting, &config.lhs_batch}) {
    for (const std::size_t d : *list) kb *= d < sa.size() ? double(std::max<std::size_t>(1, sa[d])) : 1.0;
  }
  const double work = double(a.size()) * double(b.size()) / kb;
  if (work <= parallel_work) return 0;
  return work >= 1e18 ? std::size_t(1e18) : static_cast<std::size_t>(work);
}

// NumPy's matmul of a and b (core/contraction.hpp, plan_matmul), on plain tensors.
inline Tensor matmul(const Tensor& a, const Tensor& b, std::string_view op) {
  const auto p = tenferro::detail::plan_matmul(op, a.shape(), b.shape());
  auto to_shape = [&](const Tensor& x, const Shape& s) { return x.shape() == s ? x : reshape(x, s, op); };
  const Tensor x = broadcast_to(to_shape(a, p.lhs_reshape), p.lhs, op);
  const Tensor y = broadcast_to(to_shape(b, p.rhs_reshape), p.rhs, op);
  return to_shape(dot_general(x, y, p.config, false, false, op), p.result);
}

}  // namespace tenferro::cpu
