// What the eager tests share: random inputs in a domain, tensors as doubles, and closeness of
// vectors of values.
#pragma once

#include <tenferro/cpu/common.hpp>  // cpu::cast
#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace tenferro::test {

// Where an input is drawn: uniform in [lo, hi], with a random sign when either_sign.
struct domain {
  double lo = -2.0;
  double hi = 2.0;
  bool either_sign = false;
};

inline std::vector<double> random_values(std::size_t n, domain d, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(d.lo, d.hi);
  std::bernoulli_distribution coin(0.5);
  std::vector<double> v(n);
  for (auto& x : v) x = (d.either_sign && coin(rng) ? -1.0 : 1.0) * u(rng);
  return v;
}

inline Tensor make(const Shape& shape, const std::vector<double>& v, DType dtype) {
  return cpu::cast(Tensor::from_vec_col_major<double>(shape, v), dtype);
}

inline std::vector<double> as_doubles(const Tensor& t) {
  const Tensor d = cpu::cast(t, DType::F64);
  auto s = d.as_slice<double>();
  return {s.begin(), s.end()};
}

// The elements of t, whose dtype must be U's.
template <class U>
std::vector<U> values_of(const EagerTensor& t) {
  REQUIRE(t.dtype() == dtype_of<U>);
  const auto s = t.materialized().template as_slice<U>();
  return {s.begin(), s.end()};
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                          const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << " element " << i << ": got " << got[i] << ", want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

}  // namespace tenferro::test
