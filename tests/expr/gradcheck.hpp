// The derivative-checking harness used for every op of the compile-time layer.
//
// check_op(name, f, domains...) takes an elementwise expression f of k placeholders and, for
// float and double and sizes 0, 1, 7, 8, 9, 1000 and 100003, with random inputs drawn from each
// placeholder's domain, checks:
//   - the SIMD value against the scalar reference evaluator (std math, one element at a time);
//   - derivative(f, x_j), evaluated, against central finite differences of the reference (double);
//   - derivative(f, x_j) by SIMD against the same expression by the scalar reference;
//   - grad(sum(f)) against derivative(f, x_j);
//   - vjp(f, c) against c * derivative(f, x_j);
//   - jvp(f, t) against Σ_j derivative(f, x_j) t_j, and its value against eval(f);
//   - grad(sum(f)) bit-identical in a 1-thread and a 2-thread arena;
//   - empty inputs giving empty outputs and a sum of 0.
#pragma once

#include <tenferro/expr.hpp>

#include <tbb/task_arena.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace gradcheck {

template <class T>
using array = tenferro::column_major_array<T>;

// Where a placeholder's inputs are drawn: uniform in [lo, hi], with a random sign when
// `either_sign` (for ops with a kink or pole at 0).
struct domain {
  double lo = -2.0;
  double hi = 2.0;
  bool either_sign = false;
};

template <class T>
array<T> random_array(std::size_t n, domain d, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(d.lo, d.hi);
  std::bernoulli_distribution coin(0.5);
  auto a = array<T>::from_shape({n});
  for (auto& v : a.storage()) v = static_cast<T>((d.either_sign && coin(rng) ? -1.0 : 1.0) * u(rng));
  return a;
}

template <class A, class B = double>
array<double> to_double(const A& a) {
  auto out = array<double>::from_shape({a.size()});
  for (std::size_t i = 0; i < a.size(); ++i) out.data()[i] = static_cast<double>(a.data()[i]);
  return out;
}

// |a - b| <= tol * (1 + |b|), element by element, reporting the first failure.
template <class A, class B>
void require_close(const A& a, const B& b, double tol, const std::string& what) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a.data()[i]);
    const double y = static_cast<double>(b.data()[i]);
    if (!(std::abs(x - y) <= tol * (1.0 + std::abs(y)))) {
      INFO(what << ": element " << i << " of " << a.size() << ": " << x << " vs " << y);
      CHECK(x == Approx(y));
      return;
    }
  }
  SUCCEED(what);
}

template <class T>
struct tolerances;
template <>
struct tolerances<double> {
  static constexpr double same_math = 1e-12;   // SIMD vs reference (last-bit differences compound)
  static constexpr double finite_diff = 2e-6;  // analytic vs central differences
};
template <>
struct tolerances<float> {
  static constexpr double same_math = 2e-5;
  static constexpr double finite_diff = 2e-3;
};

// A value of eval() as an array of n elements (a scalar expression is the same everywhere).
template <class T, class V>
array<T> as_field(const V& v, std::size_t n) {
  if constexpr (std::is_arithmetic_v<V>) {
    auto a = array<T>::from_shape({n});
    std::fill(a.storage().begin(), a.storage().end(), static_cast<T>(v));
    return a;
  } else {
    return v;
  }
}

template <class T, std::size_t K, class F>
auto call(const std::array<array<T>, K>& xs, F&& fn) {
  return [&]<std::size_t... J>(std::index_sequence<J...>) { return fn(xs[J]...); }
  (std::make_index_sequence<K>{});
}

struct options {
  bool finite_differences = true;  // off for ops whose derivative is 0 by convention (stop_gradient)
};

template <class T, std::size_t K, class E>
void check_at(const std::string& name, const E& f, const std::array<domain, K>& domains, std::size_t n,
              options opt) {
  using namespace tenferro::expr;
  using tol = tolerances<T>;
  INFO(name << " with " << (sizeof(T) == 4 ? "float" : "double") << ", n = " << n);
  std::mt19937 rng(1234u + static_cast<unsigned>(n));
  std::array<array<T>, K> xs;
  std::array<array<double>, K> xd;
  std::array<array<T>, K> tangents;
  for (std::size_t k = 0; k < K; ++k) {
    xs[k] = random_array<T>(n, domains[k], rng);
    xd[k] = to_double<array<T>, double>(xs[k]);
    tangents[k] = random_array<T>(n, {-1.0, 1.0, false}, rng);
  }
  const array<T> cot = random_array<T>(n, {-1.0, 1.0, false}, rng);

  const auto value = as_field<T>(call(xs, [&](const auto&... x) { return eval(f, x...); }), n);
  const auto reference = as_field<T>(
      call(xs, [&](const auto&... x) { return detail::eval_with<detail::reference_policy>(f, x...); }), n);
  require_close(value, reference, tol::same_math, "value: SIMD vs reference");

  const auto vg = call(xs, [&](const auto&... x) { return value_and_grad(sum(f), x...); });
  const auto vj = call(xs, [&](const auto&... x) { return vjp(f, cot, x...); });
  const auto jv = [&]<std::size_t... J>(std::index_sequence<J...>) {
    return jvp(f, std::tie(xs[J]...), std::tie(tangents[J]...));
  }
  (std::make_index_sequence<K>{});
  require_close(as_field<T>(jv.value, n), value, 0.0, "jvp value vs eval");

  auto jvp_expected = array<double>::from_shape({n});
  std::fill(jvp_expected.storage().begin(), jvp_expected.storage().end(), 0.0);

  [&]<std::size_t... J>(std::index_sequence<J...>) {
    auto one_input = [&]<std::size_t Jc>(std::integral_constant<std::size_t, Jc>) {
      INFO("derivative w.r.t. x" << Jc << ": " << to_string(derivative(f, arg<Jc>{})));
      const auto d = derivative(f, arg<Jc>{});
      const auto dv = as_field<T>(call(xs, [&](const auto&... x) { return eval(d, x...); }), n);
      const auto dref = as_field<T>(
          call(xs, [&](const auto&... x) { return detail::eval_with<detail::reference_policy>(d, x...); }),
          n);
      require_close(dv, dref, tol::same_math, "derivative: SIMD vs reference");

      if (opt.finite_differences) {
        auto plus = xd, minus = xd;
        auto h = array<double>::from_shape({n});
        for (std::size_t i = 0; i < n; ++i) {
          h.data()[i] = 1e-5 * std::max(1.0, std::abs(xd[Jc].data()[i]));
          plus[Jc].data()[i] += h.data()[i];
          minus[Jc].data()[i] -= h.data()[i];
        }
        const auto fp = as_field<double>(
            call(plus,
                 [&](const auto&... x) { return detail::eval_with<detail::reference_policy>(f, x...); }),
            n);
        const auto fm = as_field<double>(
            call(minus,
                 [&](const auto&... x) { return detail::eval_with<detail::reference_policy>(f, x...); }),
            n);
        auto fd = array<double>::from_shape({n});
        for (std::size_t i = 0; i < n; ++i) fd.data()[i] = (fp.data()[i] - fm.data()[i]) / (2 * h.data()[i]);
        require_close(dv, fd, tol::finite_diff, "derivative vs central finite differences");
      }

      require_close(std::get<Jc>(vg.grad), dv, tol::same_math, "grad(sum(f)) vs derivative");
      auto expected_vjp = array<double>::from_shape({n});
      for (std::size_t i = 0; i < n; ++i) {
        expected_vjp.data()[i] = double(cot.data()[i]) * double(dv.data()[i]);
        jvp_expected.data()[i] += double(dv.data()[i]) * double(tangents[Jc].data()[i]);
      }
      require_close(std::get<Jc>(vj), expected_vjp, tol::same_math * 4, "vjp vs cotangent * derivative");
    };
    (one_input(std::integral_constant<std::size_t, J>{}), ...);
  }
  (std::make_index_sequence<K>{});
  require_close(as_field<T>(jv.tangent, n), jvp_expected, tol::same_math * 4 * K,
                "jvp tangent vs derivatives");

  if (n == 0) {
    CHECK(vg.value == T(0));
    CHECK(value.size() == 0);
  }
  if (n >= 100000) {
    auto in_arena = [&](int threads) {
      tbb::task_arena arena(threads);
      return arena.execute(
          [&] { return call(xs, [&](const auto&... x) { return value_and_grad(sum(f), x...); }); });
    };
    const auto one_thread = in_arena(1);
    const auto two_threads = in_arena(2);
    CHECK(one_thread.value == two_threads.value);
    CHECK(one_thread.value == vg.value);
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      CHECK(((std::get<J>(one_thread.grad) == std::get<J>(two_threads.grad)) && ...));
    }
    (std::make_index_sequence<K>{});
  }
}

inline constexpr std::size_t sizes[] = {0, 1, 7, 8, 9, 1000, 100003};

// Checks f (an elementwise expression of K placeholders) in float and double at every size.
template <std::size_t K, class E>
void check_op(const std::string& name, const E& f, const std::array<domain, K>& domains, options opt = {}) {
  for (std::size_t n : sizes) {
    check_at<double>(name, f, domains, n, opt);
    check_at<float>(name, f, domains, n, opt);
  }
}

}  // namespace gradcheck
