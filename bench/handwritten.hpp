// Hand-written xsimd loops computing the same values and gradients as the benchmarked
// expressions: the practical limit the compile-time layer is measured against. Written the way
// a careful engineer would by hand: one pass, one accumulator batch, the engine's SIMD math in the body
// (tenferro/expr/ops/math.hpp, so the ratio measures the engine and not the math; sin
// and cos from one sincos, log(sigma) and 1/sigma hoisted, the normal log-pdf's sums rearranged
// by hand) and the same math on a padded last batch.
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/ops/math.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>

namespace handwritten {

using B = xsimd::batch<double>;
constexpr std::size_t W = B::size;

// Loads the last partial batch padded with its last element; `valid` lanes are real.
inline B load_tail(const double* p, std::size_t valid) {
  alignas(64) std::array<double, W> buf;
  std::copy(p, p + valid, buf.begin());
  std::fill(buf.begin() + valid, buf.end(), p[valid - 1]);
  return B::load_aligned(buf.data());
}
inline void store_tail(const B& v, double* p, std::size_t valid) {
  alignas(64) std::array<double, W> buf;
  v.store_aligned(buf.data());
  std::copy(buf.begin(), buf.begin() + valid, p);
}
inline B lanes_below(std::size_t valid, const B& v, double fill) {
  alignas(64) std::array<double, W> idx;
  for (std::size_t k = 0; k < W; ++k) idx[k] = double(k);
  return xsimd::select(B::load_aligned(idx.data()) < B(double(valid)), v, B(fill));
}

// (1) sum(x^2) and 2x
inline double sum_square(const double* x, double* gx, std::size_t n) {
  B acc(0.0);
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    const B v = B::load_unaligned(x + i);
    acc += v * v;
    (v + v).store_unaligned(gx + i);
  }
  if (i < n) {
    const B v = load_tail(x + i, n - i);
    acc += lanes_below(n - i, v * v, 0.0);
    store_tail(v + v, gx + i, n - i);
  }
  return xsimd::hadd(acc);
}

// (2) sum(sin(x) y + exp(x y)) with gx = cos(x) y + exp(x y) y, gy = sin(x) + exp(x y) x
inline double sin_exp(const double* x, const double* y, double* gx, double* gy, std::size_t n) {
  B acc(0.0);
  auto body = [&](const B& a, const B& b, B& f, B& da, B& db) {
    const auto [s, c] = tenferro::expr::math::sincos(a);
    const B e = tenferro::expr::math::exp(a * b);
    f = s * b + e;
    da = c * b + e * b;
    db = s + e * a;
  };
  std::size_t i = 0;
  B f, da, db;
  for (; i + W <= n; i += W) {
    body(B::load_unaligned(x + i), B::load_unaligned(y + i), f, da, db);
    acc += f;
    da.store_unaligned(gx + i);
    db.store_unaligned(gy + i);
  }
  if (i < n) {
    body(load_tail(x + i, n - i), load_tail(y + i, n - i), f, da, db);
    acc += lanes_below(n - i, f, 0.0);
    store_tail(da, gx + i, n - i);
    store_tail(db, gy + i, n - i);
  }
  return xsimd::hadd(acc);
}

// (3) log Σ exp(x) = m + log Σ exp(x - m), gradient softmax: a max pass, a pass that stores
//     exp(x - m) into the gradient while it sums, and a pass that scales the gradient by 1 / sum
inline double log_sum_exp(const double* x, double* gx, std::size_t n) {
  B mx(-std::numeric_limits<double>::infinity());
  std::size_t i = 0;
  for (; i + W <= n; i += W) mx = xsimd::max(mx, B::load_unaligned(x + i));
  double m = -std::numeric_limits<double>::infinity();
  alignas(64) std::array<double, W> lanes;
  mx.store_aligned(lanes.data());
  for (double v : lanes) m = std::max(m, v);
  for (std::size_t k = i; k < n; ++k) m = std::max(m, x[k]);
  B acc(0.0);
  const B bm(m);
  for (i = 0; i + W <= n; i += W) {
    const B e = tenferro::expr::math::exp(B::load_unaligned(x + i) - bm);
    acc += e;
    e.store_unaligned(gx + i);
  }
  if (i < n) {
    const B e = tenferro::expr::math::exp(load_tail(x + i, n - i) - bm);
    acc += lanes_below(n - i, e, 0.0);
    store_tail(e, gx + i, n - i);
  }
  const double s = xsimd::hadd(acc);
  const B inv(1.0 / s);
  for (i = 0; i + W <= n; i += W) (B::load_unaligned(gx + i) * inv).store_unaligned(gx + i);
  for (; i < n; ++i) gx[i] *= 1.0 / s;
  return m + std::log(s);
}

// (4) Σ -0.5 ((x - mu)/sigma)^2 - log sigma, with gx = -(x - mu)/sigma^2, dmu = Σ (x - mu)/sigma^2,
//     dsigma = Σ (x - mu)^2/sigma^3 - n/sigma
struct normal_result {
  double value, dmu, dsigma;
};
inline normal_result normal_log_pdf(const double* x, double mu, double sigma, double* gx, std::size_t n) {
  const B bmu(mu), inv(1.0 / sigma);
  B acc_z2(0.0), acc_z(0.0);
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    const B z = (B::load_unaligned(x + i) - bmu) * inv;
    acc_z2 += z * z;
    acc_z += z;
    (-z * inv).store_unaligned(gx + i);
  }
  if (i < n) {
    const B z = (load_tail(x + i, n - i) - bmu) * inv;
    acc_z2 += lanes_below(n - i, z * z, 0.0);
    acc_z += lanes_below(n - i, z, 0.0);
    store_tail(-z * inv, gx + i, n - i);
  }
  const double z2 = xsimd::hadd(acc_z2), z1 = xsimd::hadd(acc_z);
  return {-0.5 * z2 - double(n) * std::log(sigma), z1 / sigma, z2 / sigma - double(n) / sigma};
}

}  // namespace handwritten
