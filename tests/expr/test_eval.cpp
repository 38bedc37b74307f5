// Evaluation with known numbers: reductions, gradients of scalar inputs, layouts,
// element types, errors, lifetimes, position independence and determinism.
#include <tenferro/expr.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include <tbb/task_arena.h>
#include "../errors.hpp"
#include "../settings.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

using namespace tenferro::expr;
using tenferro::column_major_array;
using tenferro::Error;
using tenferro::ErrorKind;

namespace {
const auto [x, y] = placeholders<2>();
using vec = column_major_array<double>;

vec linspace(double lo, double hi, std::size_t n) {
  auto v = vec::from_shape({n});
  for (std::size_t i = 0; i < n; ++i) v(i) = n == 1 ? lo : lo + (hi - lo) * double(i) / double(n - 1);
  return v;
}

// An expression built from temporaries inside a function, returned and evaluated later.
auto make_kept_expression() {
  auto [t] = placeholders<1>();
  auto scale = 2.0;
  return sin(t * scale) + std::exp(1.0) * square(t);
}
}  // namespace

TEST_CASE("sum, mean, dot and log_sum_exp with known numbers") {
  const vec a = {1.0, 2.0, 3.0, 4.0};
  const vec b = {0.5, -1.0, 2.0, 0.0};
  CHECK(eval(sum(x), a) == 10.0);
  CHECK(eval(mean(x), a) == 2.5);
  CHECK(eval(dot(x, y), a, b) == Approx(0.5 - 2.0 + 6.0));
  CHECK(eval(sum(square(x - mean(x))), a) == Approx(5.0));
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0));
  CHECK(eval(log_sum_exp(x), a) == Approx(lse).epsilon(1e-14));
  CHECK(eval(log(sum(exp(x))), a) == Approx(lse).epsilon(1e-14));
  // Stable where the naive form overflows.
  const vec big = {1000.0, 1000.0};
  CHECK(eval(log_sum_exp(x), big) == Approx(1000.0 + std::log(2.0)));
  CHECK(std::isinf(eval(log(sum(exp(x))), big)));
  // Empty inputs: a sum of 0, an empty elementwise result, lse of nothing is -inf.
  const vec none = vec::from_shape({0});
  CHECK(eval(sum(x), none) == 0.0);
  CHECK(eval(sin(x), none).size() == 0);
  CHECK(eval(log_sum_exp(x), none) == -INFINITY);
}

TEST_CASE("gradients of reductions match their analytic forms") {
  const vec a = {0.3, -1.2, 2.5, 0.7, 1.1};
  SECTION("sum(square(x - mean(x))) has gradient 2 (x - mean)") {
    auto [v, g] = value_and_grad(sum(square(x - mean(x))), a);
    const double m = (0.3 - 1.2 + 2.5 + 0.7 + 1.1) / 5;
    double expected = 0;
    for (double e : a) expected += (e - m) * (e - m);
    CHECK(v == Approx(expected));
    for (std::size_t i = 0; i < a.size(); ++i)
      CHECK(std::get<0>(g)(i) == Approx(2 * (a(i) - m)).margin(1e-14));
  }
  SECTION("log_sum_exp has gradient softmax") {
    const auto g = std::get<0>(grad(log_sum_exp(x), a));
    double z = 0;
    for (double e : a) z += std::exp(e);
    double total = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(g(i) == Approx(std::exp(a(i)) / z).epsilon(1e-13));
      total += g(i);
    }
    CHECK(total == Approx(1.0));
  }
  SECTION("a nested reduction inside an elementwise expression") {
    // f = sum(x * sum(x)) = S^2, df/dx_i = 2 S
    auto [v, g] = value_and_grad(sum(x * sum(x)), a);
    const double s = 0.3 - 1.2 + 2.5 + 0.7 + 1.1;
    CHECK(v == Approx(s * s));
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::get<0>(g)(i) == Approx(2 * s));
  }
}

TEST_CASE("normal log-pdf: gradients for an array and two scalars in one call") {
  auto [a, mu, sigma] = placeholders<3>();
  auto log_pdf = sum(-0.5 * square((a - mu) / sigma) - log(sigma));
  const vec data = linspace(-1.0, 2.0, 37);
  const double m = 0.25, s = 1.5;
  auto [v, g] = value_and_grad(log_pdf, data, m, s);
  auto [gx, gmu, gsigma] = g;
  STATIC_REQUIRE(std::is_same_v<decltype(gmu), double>);
  STATIC_REQUIRE(std::is_same_v<decltype(gx), vec>);
  double ev = 0, emu = 0, esigma = 0;
  for (double d : data) {
    const double z = (d - m) / s;
    ev += -0.5 * z * z - std::log(s);
    emu += z / s;
    esigma += z * z / s - 1.0 / s;
  }
  CHECK(v == Approx(ev));
  CHECK(gmu == Approx(emu));
  CHECK(gsigma == Approx(esigma));
  for (std::size_t i = 0; i < data.size(); ++i)
    CHECK(gx(i) == Approx(-(data(i) - m) / (s * s)).margin(1e-15));
}

TEST_CASE("a scalar expression's gradient with finite differences, element by element") {
  // Non-diagonal: every gradient element depends on every input.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  vec a = vec::from_shape({23}), b = vec::from_shape({23});
  for (auto& e : a.storage()) e = u(rng);
  for (auto& e : b.storage()) e = u(rng);
  auto f = log_sum_exp(x * y) + mean(square(x - mean(x))) * sum(sigmoid(y)) + sum(x) / (2.0 + dot(x, x));
  auto [v, g] = value_and_grad(f, a, b);
  for (std::size_t k = 0; k < 2; ++k) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      vec p = k == 0 ? a : b, m = k == 0 ? a : b;
      const double h = 1e-6;
      p(i) += h;
      m(i) -= h;
      const double fp = k == 0 ? eval(f, p, b) : eval(f, a, p);
      const double fm = k == 0 ? eval(f, m, b) : eval(f, a, m);
      const double analytic = k == 0 ? std::get<0>(g)(i) : std::get<1>(g)(i);
      CHECK(analytic == Approx((fp - fm) / (2 * h)).epsilon(1e-6).margin(1e-8));
    }
  }
  CHECK(v == Approx(eval(f, a, b)).epsilon(0));
}

TEST_CASE("vjp and jvp with known numbers") {
  const vec a = {2.0, 3.0};
  const vec ones = {1.0, 1.0};
  auto [ca] = vjp(x * x, ones, a);
  CHECK(ca(0) == 4.0);
  CHECK(ca(1) == 6.0);
  const vec t = {1.0, 0.5};
  auto [value, tangent] = jvp(x * x * x, std::tie(a), std::tie(t));
  CHECK(value(1) == 27.0);
  CHECK(tangent(0) == 12.0);                           // 3 x^2 t = 12
  CHECK(tangent(1) == 13.5);                           // 27 * 0.5
  auto s = jvp(sum(x * x), std::tie(a), std::tie(t));  // scalar: value 13, tangent 2 x . t = 4 + 3
  CHECK(s.value == 13.0);
  CHECK(s.tangent == 7.0);
  auto with_scalar = jvp(x * y, std::forward_as_tuple(a, 3.0), std::forward_as_tuple(ones, 1.0));
  CHECK(with_scalar.tangent(1) == 3.0 + 3.0);
}

TEST_CASE("inputs of any layout, element type and kind") {
  const xt::xarray<double, xt::layout_type::row_major> rm = {{1, 2, 3}, {4, 5, 6}};
  auto r = eval(x * 2.0, rm);
  STATIC_REQUIRE(std::is_same_v<decltype(r), column_major_array<double>>);
  CHECK(r(1, 0) == 8.0);
  CHECK(r(0, 2) == 6.0);
  const column_major_array<float> f = {1.0f, 2.0f};
  STATIC_REQUIRE(std::is_same_v<decltype(eval(x * 2.0, f)), column_major_array<float>>);
  STATIC_REQUIRE(std::is_same_v<decltype(eval(x * y, f, vec{1.0, 1.0})), column_major_array<double>>);
  CHECK(eval(x * y, f, vec{0.5, 0.25})(1) == 0.5);
  const xt::xtensor<double, 1> fixed_rank = {3.0, 4.0};
  CHECK(eval(sum(square(x)), fixed_rank) == 25.0);
  const auto typed = tenferro::TypedTensor<double>::from_vec_col_major({2, 2}, {1, 2, 3, 4});
  CHECK(eval(sum(x), typed) == 10.0);
  CHECK(std::get<0>(grad(sum(x * x), typed))(1, 1) == 8.0);
  std::vector<double> raw = {1, 2, 3, 4, 5};
  auto adapted = xt::adapt<xt::layout_type::column_major>(raw.data() + 1, 4, xt::no_ownership(),
                                                          std::vector<std::size_t>{4});
  CHECK(eval(sum(x), adapted) == 14.0);
  const auto all_scalars = eval(x * y, 2.0, 3);  // rank 0: the broadcast shape of no arrays
  CHECK(all_scalars.dimension() == 0);
  CHECK(all_scalars() == 6.0);
}

TEST_CASE("a broadcast shape of more than 2^63 - 1 elements is an error") {
  // Views that claim 2^40 elements; nothing is read before the shapes are checked.
  std::vector<double> one = {1.0};
  const std::size_t big = std::size_t(1) << 40;
  const auto tall = xt::adapt<xt::layout_type::column_major>(one.data(), big, xt::no_ownership(),
                                                             std::vector<std::size_t>{big, 1});
  const auto wide = xt::adapt<xt::layout_type::column_major>(one.data(), big, xt::no_ownership(),
                                                             std::vector<std::size_t>{1, big});
  const std::string text =
      tenferro::test::message_of([&] { (void)eval(sum(x + y), tall, wide); }, ErrorKind::InvalidArgument);
  CHECK(text.find("[1099511627776, 1099511627776]") != std::string::npos);
  CHECK(text.find("eval") != std::string::npos);
  CHECK(eval(sum(x + y), vec{1.0, 2.0}, 3.0) == 9.0);  // still usable
}

TEST_CASE("vjp and jvp reject a cotangent or tangent of the wrong shape") {
  const vec a = {1.0, 2.0, 3.0};
  const std::string v = tenferro::test::message_of(
      [&] {
        (void)vjp(x * x, vec{1.0, 1.0}, a);
      },
      ErrorKind::ShapeMismatch);
  CHECK(v.find("cotangent") != std::string::npos);
  CHECK(v.find("[2]") != std::string::npos);
  CHECK(v.find("[3]") != std::string::npos);
  const std::string j = tenferro::test::message_of(
      [&] { (void)jvp(x * x, std::tie(a), std::forward_as_tuple(vec{1.0})); }, ErrorKind::ShapeMismatch);
  CHECK(j.find("tangents") != std::string::npos);
  CHECK(j.find("[1]") != std::string::npos);
}

TEST_CASE("an expression kept in auto and evaluated later is safe") {
  const auto e = make_kept_expression();
  const vec a = {0.5, 1.0};
  auto r = eval(e, a);
  CHECK(r(1) == Approx(std::sin(2.0) + std::exp(1.0)));
}

TEST_CASE("results do not depend on an element's position or alignment") {
  // Elements 0..7 go through the SIMD body, element 8 through the padded tail, and the adapted
  // view starts one element into the buffer: the same input gives the same bits everywhere.
  std::vector<double> raw(20, 0.7390851332151607);
  auto at_offset = xt::adapt<xt::layout_type::column_major>(raw.data() + 1, 9, xt::no_ownership(),
                                                            std::vector<std::size_t>{9});
  auto f = exp(x) * sin(x) + log1p(x);
  auto r = eval(f, at_offset);
  auto g = std::get<0>(grad(sum(f), at_offset));
  for (std::size_t i = 1; i < 9; ++i) {
    CHECK(r(i) == r(0));
    CHECK(g(i) == g(0));
  }
}

TEST_CASE(
    "log_sum_exp's gradient, stored while its sum is taken and scaled after: softmax, for any threads") {
  // 300001 elements: the in-place scaling is split over threads from 131072 on.
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-20.0, 20.0);
  vec a = vec::from_shape({300001});
  for (auto& e : a.storage()) e = u(rng);
  auto run = [&](int threads, const auto& f, const auto&... in) {
    tbb::task_arena arena(threads);
    return arena.execute([&] { return value_and_grad(f, in...); });
  };
  const auto one = run(1, log_sum_exp(x), a), two = run(2, log_sum_exp(x), a);
  CHECK(one.value == two.value);
  CHECK((std::get<0>(one.grad) == std::get<0>(two.grad)));
  double total = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double softmax = std::exp(a(i) - one.value);
    CHECK(std::get<0>(one.grad)(i) == Approx(softmax).epsilon(1e-12).margin(1e-300));
    total += std::get<0>(one.grad)(i);
  }
  CHECK(total == Approx(1.0).epsilon(1e-12));
  // A one-element input's gradient is summed in the pass, then scaled: the softmax sums to 1.
  const vec shift = {0.25};
  const auto both = run(2, log_sum_exp(x + y), a, shift);
  CHECK(std::get<1>(both.grad)(0) == Approx(1.0).epsilon(1e-12));
  CHECK(both.value == Approx(one.value + 0.25).epsilon(1e-14));
  // A scale on the left and a division: (1 / sum(exp(x))) * exp(x) and exp(x) / sum(exp(x)).
  const vec small = {0.5, -1.0, 2.0, 0.0, 1.5};
  const double z = std::exp(0.5) + std::exp(-1.0) + std::exp(2.0) + 1.0 + std::exp(1.5);
  const auto left = eval((1.0 / sum(exp(x))) * exp(x), small);
  const auto divided = eval(exp(x) / sum(exp(x)), small);
  for (std::size_t i = 0; i < small.size(); ++i) {
    CHECK(left(i) == Approx(std::exp(small(i)) / z).epsilon(1e-14));
    CHECK(divided(i) == Approx(std::exp(small(i)) / z).epsilon(1e-14));
  }
}

TEST_CASE("reductions are bit-identical for 1 and 2 threads and from run to run") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  vec a = vec::from_shape({1000003});
  for (auto& e : a.storage()) e = u(rng);
  auto f = log_sum_exp(x) + sum(sin(x) * x);
  auto run = [&](int threads) {
    tbb::task_arena arena(threads);
    return arena.execute([&] { return value_and_grad(f, a); });
  };
  const auto one = run(1), two = run(2), again = run(2);
  CHECK(one.value == two.value);
  CHECK(two.value == again.value);
  CHECK((std::get<0>(one.grad) == std::get<0>(two.grad)));
  CHECK(eval(f, a) == one.value);

  // Cheap bodies (two accumulators per chunk), sizes a whole number of chunks or not, and a
  // duplicate reduction: the serial loop flushes each chunk's partial itself, threads get one
  // chunk per task; both sum the same partials in the same order. An elementwise result of many
  // chunks too.
  for (const std::size_t n : {std::size_t(4096 * 9), std::size_t(4096 * 9 + 5), std::size_t(4096 * 9 - 3)}) {
    INFO("n = " << n);
    vec b = vec::from_shape({n});
    for (auto& e : b.storage()) e = u(rng);
    auto g = sum(x * x) + sum(x) * sum(x * x);
    auto twice = [&](int threads) {
      tbb::task_arena arena(threads);
      return arena.execute([&] { return std::pair{value_and_grad(g, b), eval(exp(x) * 2.0, b)}; });
    };
    const auto [s1, e1] = twice(1);
    const auto [s2, e2] = twice(2);
    CHECK(s1.value == s2.value);
    CHECK((std::get<0>(s1.grad) == std::get<0>(s2.grad)));
    CHECK(e1 == e2);
    // Against a plain sum in chunk order (each chunk its own partial, combined in order).
    long double sq = 0, lin = 0;
    for (std::size_t i = 0; i < n; ++i) {
      sq += static_cast<long double>(b(i)) * b(i);
      lin += b(i);
    }
    CHECK(s1.value == Approx(static_cast<double>(sq + lin * sq)).epsilon(1e-12));
  }
}

TEST_CASE("the store rule: a cheap pass streams when the bytes it writes exceed the threshold, exactly") {
  // 2^17 + 5 doubles (a partial batch at the end), 1 and 2 threads: value, gradient, elementwise.
  const std::size_t n = (std::size_t(1) << 17) + 5, bytes = n * sizeof(double);
  vec a = vec::from_shape({n}), b = vec::from_shape({n});
  for (std::size_t i = 0; i < n; ++i) {
    a(i) = 0.001 * static_cast<double>(i % 1000) - 0.5;
    b(i) = 0.002 * static_cast<double>(i % 777) + 0.25;
  }
  auto streamed = [](auto&& f) {
    const auto before = tenferro::detail::streamed_passes().load();
    f();
    return tenferro::detail::streamed_passes().load() - before;
  };
  for (const int threads : {1, 2}) {
    tbb::task_arena arena(threads);
    // (threshold, whether the one-array passes stream, whether the two-array pass does)
    for (const auto& [threshold, one, two] : {std::tuple{bytes - 1, true, true}, std::tuple{bytes, false, true},
                                               std::tuple{2 * bytes, false, false}}) {
      INFO("threads " << threads << ", threshold " << threshold);
      const tenferro::test::store_threshold rule(threshold);
      arena.execute([&, one = one, two = two] {
        vec g, e, ga, gb;
        double value = 0;
        CHECK(streamed([&] {
                auto [v, grads] = value_and_grad(sum(square(x)), a);
                value = v;
                g = std::get<0>(grads);
              }) == (one ? 1u : 0u));
        CHECK(streamed([&] { e = eval(x * 3.0 - 1.0, a); }) == (one ? 1u : 0u));
        CHECK(streamed([&] {
                auto [v, grads] = value_and_grad(sum(square(x) + square(y)), a, b);
                (void)v;
                ga = std::get<0>(grads);
                gb = std::get<1>(grads);
              }) == (two ? 1u : 0u));
        REQUIRE(g.size() == n);
        for (std::size_t i = 0; i < n; ++i) {
          REQUIRE(g(i) == 2.0 * a(i));
          REQUIRE(e(i) == a(i) * 3.0 - 1.0);
          REQUIRE(ga(i) == 2.0 * a(i));
          REQUIRE(gb(i) == 2.0 * b(i));
        }
        CHECK(value == Approx(std::inner_product(a.begin(), a.end(), a.begin(), 0.0)).epsilon(1e-12));
      });
    }
  }
  {
    // A pass bound by its arithmetic keeps ordinary stores at any threshold.
    const tenferro::test::store_threshold zero(0);
    CHECK(streamed([&] { (void)value_and_grad(sum(sin(x) * y + exp(x * y)), a, b); }) == 0);
    // Floats: 2^18 + 3, streamed.
    using fvec = column_major_array<float>;
    fvec f = fvec::from_shape({(std::size_t(1) << 18) + 3});
    for (std::size_t i = 0; i < f.size(); ++i) f(i) = 0.25f * static_cast<float>(i % 7);
    fvec twice;
    CHECK(streamed([&] { twice = eval(x * 2.0f, f); }) == 1);
    for (std::size_t i = 0; i < f.size(); ++i) REQUIRE(twice(i) == 2.0f * f(i));
  }
}

TEST_CASE("subtrees of one type with different constants are not shared") {
  const vec a = {0.3, -0.7, 1.1};
  // exp(2 x) and exp(3 x) have the same type; sin(2 x) and cos(3 x) look like a sincos pair.
  auto r = eval(exp(2.0 * x) + exp(3.0 * x), a);
  auto [v, g] = value_and_grad(sum(sin(2.0 * x) * cos(3.0 * x)), a);
  double expected = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = a(i);
    CHECK(r(i) == Approx(std::exp(2 * e) + std::exp(3 * e)));
    expected += std::sin(2 * e) * std::cos(3 * e);
    CHECK(std::get<0>(g)(i) ==
          Approx(2 * std::cos(2 * e) * std::cos(3 * e) - 3 * std::sin(2 * e) * std::sin(3 * e)));
  }
  CHECK(v == Approx(expected));
}

TEST_CASE("sharing is decided per subtree: different constants switch off only their own subtree") {
  // exp(x * x) occurs four times with equal values; sin(2 x) and sin(3 x) have one type and
  // different constants. 1003 elements: SIMD body and padded tail.
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  vec a = vec::from_shape({1003});
  for (auto& e : a.storage()) e = u(rng);
  auto [v, g] = value_and_grad(sum(exp(x * x) * sin(2.0 * x) + exp(x * x) * sin(3.0 * x)), a);
  double expected = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = a(i), q = std::exp(e * e);
    expected += q * (std::sin(2 * e) + std::sin(3 * e));
    CHECK(std::get<0>(g)(i) == Approx(2 * e * q * (std::sin(2 * e) + std::sin(3 * e)) +
                                      q * (2 * std::cos(2 * e) + 3 * std::cos(3 * e))));
  }
  CHECK(v == Approx(expected));
}

TEST_CASE("regression: a sin shared for occurring twice, with no cos partner, compiles and evaluates") {
  // grad of mean(square(a sin(b t) - y)) w.r.t. a holds sin(b t) twice and cos(b t) not at all.
  auto [A, B, T, Y] = placeholders<4>();
  const vec t = {0.1, 0.5, 0.9}, yv = {0.2, -0.1, 0.4};
  auto [v, g] = value_and_grad(mean(square(A * sin(B * T) - Y)), 1.5, 0.8, t, yv);
  double expected = 0, da = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double r = 1.5 * std::sin(0.8 * t(i)) - yv(i);
    expected += r * r / 3;
    da += 2 * r * std::sin(0.8 * t(i)) / 3;
  }
  CHECK(v == Approx(expected));
  CHECK(std::get<0>(g) == Approx(da));
}

TEST_CASE("loop-invariant factors and addends leave the loop without changing results") {
  const vec a = {1.0, 2.0, 4.0};
  // sum(2 x) and sum(3 x) both keep sum(x) in the loop, with their own factor.
  CHECK(eval(sum(2.0 * x) + sum(3.0 * x), a) == Approx(35.0));
  CHECK(eval(sum(3.0 * x / y - 2.0), a, 0.5) == Approx(42.0 - 6.0));
  CHECK(eval(sum(-(x / y) + y), a, 4.0) == Approx(-7.0 / 4.0 + 12.0));
  auto [v, g] = value_and_grad(sum(square(x / y) - 1.0), a, 2.0);
  CHECK(v == Approx((1.0 + 4.0 + 16.0) / 4.0 - 3.0));
  CHECK(std::get<0>(g)(2) == Approx(2.0 * 4.0 / 4.0));
  CHECK(std::get<1>(g) == Approx(-2.0 * 21.0 / 8.0));
  const auto r = eval(-3.0 * (x / y), a, 2.0);
  CHECK(r(2) == Approx(-6.0));
}

TEST_CASE("max propagates NaN wherever it is, for 1 and 2 threads, and its gradient goes to the NaN") {
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  CHECK(std::isnan(eval(max(x), vec{qnan, 2.0, 3.0})));
  CHECK(std::isnan(eval(max(x), vec{1.0, 2.0, qnan})));
  vec many = vec::from_shape({20000});
  std::fill(many.storage().begin(), many.storage().end(), 1.0);
  for (const std::size_t at : {std::size_t(0), std::size_t(7), std::size_t(12345), std::size_t(19999)}) {
    INFO("NaN at " << at);
    vec v = many;
    v(at) = qnan;
    for (const int threads : {1, 2}) {
      tbb::task_arena arena(threads);
      const auto r = arena.execute([&] { return value_and_grad(max(x), v); });
      CHECK(std::isnan(r.value));
      const auto& g = std::get<0>(r.grad);
      CHECK(g(at) == 1.0);
      CHECK(std::accumulate(g.storage().begin(), g.storage().end(), 0.0) == 1.0);
    }
  }
  // Two NaNs share the cotangent, as tied maxima do.
  const auto g = std::get<0>(grad(max(x), vec{qnan, 5.0, qnan}));
  CHECK(g(0) == 0.5);
  CHECK(g(1) == 0.0);
  CHECK(g(2) == 0.5);
  CHECK(std::isnan(eval(log_sum_exp(x), vec{1.0, qnan})));
}

TEST_CASE("an empty max is -inf and an empty min +inf (the identities): log_sum_exp of nothing is -inf") {
  const vec empty = vec::from_shape({0});
  CHECK(eval(max(x), empty) == -std::numeric_limits<double>::infinity());
  CHECK(eval(min(x), empty) == std::numeric_limits<double>::infinity());
  CHECK(eval(log_sum_exp(x), empty) == -std::numeric_limits<double>::infinity());
  CHECK(eval(sum(x), empty) == 0.0);
  CHECK(eval(min(x), vec{3.0, -2.0, 5.0}) == -2.0);
  CHECK(std::isnan(eval(min(x), vec{3.0, std::numeric_limits<double>::quiet_NaN(), 5.0})));
}

TEST_CASE("a division by a number is the correctly rounded quotient, not a product with its reciprocal") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-100.0, 100.0);
  vec a = vec::from_shape({1003});
  for (auto& e : a.storage()) e = u(rng);
  for (const double s : {3.0, 7.0, 10.0, 0.1}) {
    const auto q = eval(x / s, a);
    std::size_t differs_from_product = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(q(i) == a(i) / s);
      differs_from_product += a(i) * (1.0 / s) != a(i) / s;
    }
    INFO("divisor " << s);
    CHECK(differs_from_product > 0);  // the check above would catch the product
  }
}
