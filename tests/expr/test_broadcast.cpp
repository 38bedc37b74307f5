// Broadcasting in the compile-time layer: NumPy's rule, gradients summed back to each input's
// shape, and inputs of one element read from a register with their gradients summed in the pass.
#include "../errors.hpp"
#include "../normal_logpdf.hpp"

#include <tenferro/expr.hpp>

#include <tbb/task_arena.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

using namespace tenferro::expr;
using tenferro::column_major_array;
using tenferro::ErrorKind;
using tenferro::test::kind_of;
using tenferro::test::message_of;

namespace {
const auto [x, y] = placeholders<2>();
using vec = column_major_array<double>;

vec linspace(double lo, double hi, std::size_t n) {
  auto v = vec::from_shape({n});
  for (std::size_t i = 0; i < n; ++i) v(i) = lo + (hi - lo) * double(i) / double(n - 1);
  return v;
}
}  // namespace

TEST_CASE("broadcasting NumPy-style, with gradients summed back") {
  // a: 2 x 3 (column-major), b: 3 (a row, aligned with the last axis)
  const vec a = column_major_array<double>(xt::xarray<double>{{1, 2, 3}, {4, 5, 6}});
  const vec b = {10.0, 20.0, 30.0};
  auto r = eval(x * y, a, b);
  REQUIRE(r.shape()[0] == 2);
  REQUIRE(r.shape()[1] == 3);
  CHECK(r(1, 2) == 180.0);
  CHECK(r(0, 1) == 40.0);
  auto [ga, gb] = grad(sum(x * y), a, b);
  REQUIRE(gb.size() == 3);
  CHECK(ga(1, 0) == 10.0);
  CHECK(gb(0) == 5.0);  // 1 + 4
  CHECK(gb(2) == 9.0);  // 3 + 6
  auto col = column_major_array<double>::from_shape({2, 1});
  col(0, 0) = 1.0;
  col(1, 0) = 2.0;
  auto gc = std::get<1>(grad(sum(x * y), a, col));
  REQUIRE(gc.shape()[0] == 2);
  REQUIRE(gc.shape()[1] == 1);
  CHECK(gc(1, 0) == 15.0);  // 4 + 5 + 6
  // Over no elements a partially broadcast input's gradient is zeros of its shape.
  const auto g0 = std::get<1>(grad(sum(x * y), vec::from_shape({0, 3}), b));
  REQUIRE(g0.size() == 3);
  CHECK(g0(0) == 0.0);
  CHECK(g0(2) == 0.0);
  CHECK(eval(x * y, vec::from_shape({0, 3}), b).size() == 0);
  CHECK(kind_of([&] { (void)eval(x + y, a, vec{1.0, 2.0}); }) == ErrorKind::ShapeMismatch);
  const std::string text = message_of([&] { (void)eval(x + y, a, vec{1.0, 2.0}); });
  CHECK(text.find("[2]") != std::string::npos);
  CHECK(text.find("[2, 3]") != std::string::npos);
  CHECK(text.find("eval") != std::string::npos);
  // Empty, but 2^80 elements counted over its non-zero extents: too many, whether the input is
  // read in place (one shape) or bound (two shapes).
  const vec huge = vec::from_shape({0, std::size_t(1) << 40, std::size_t(1) << 40});
  const std::string in_place = message_of([&] { (void)eval(x * 2.0, huge); }, ErrorKind::InvalidArgument);
  CHECK(in_place.find("too many elements") != std::string::npos);
  CHECK(in_place.find("[0, 1099511627776, 1099511627776]") != std::string::npos);
  CHECK(kind_of([&] { (void)eval(x * y, huge, vec{1.0}); }) == ErrorKind::InvalidArgument);
}

TEST_CASE("jvp through broadcasting: each tangent has its input's shape") {
  const vec a = column_major_array<double>(xt::xarray<double>{{1, 2, 3}, {4, 5, 6}});
  const vec b = {10.0, 20.0, 30.0};
  const vec da = column_major_array<double>(xt::xarray<double>{{0, 0, 0}, {0, 0, 0}});
  const vec db = {1.0, 0.0, 2.0};
  auto [value, tangent] = jvp(x * y, std::tie(a, b), std::tie(da, db));
  CHECK(value(1, 2) == 180.0);
  CHECK(tangent(1, 0) == 4.0);  // a(1, 0) * db(0)
  CHECK(tangent(0, 2) == 6.0);  // a(0, 2) * db(2)
  CHECK(tangent(1, 1) == 0.0);
}

TEST_CASE("an input of one element broadcasts from a register, its gradient summed in the pass") {
  // The normal log-density with mu and sigma as rank-0 arrays over 10003 elements (chunks and a
  // tail), against the analytic gradients and against mu and sigma given as numbers.
  const auto [z, m, s] = placeholders<3>();
  const auto f = sum(-0.5 * square((z - m) / s) - log(s));
  const vec data = linspace(-2.0, 3.0, 10003);
  vec mu = vec::from_shape({}), sigma = vec::from_shape({});
  mu() = 0.3;
  sigma() = 1.7;
  auto [v, g] = value_and_grad(f, data, mu, sigma);
  auto [gx, gmu, gsigma] = g;
  STATIC_REQUIRE(std::is_same_v<decltype(gmu), vec>);
  CHECK(gmu.dimension() == 0);
  CHECK(gsigma.dimension() == 0);
  REQUIRE(gx.size() == data.size());
  const tenferro::test::normal_logpdf want(data, 0.3, 1.7);
  CHECK(v == Approx(want.value).epsilon(1e-12));
  CHECK(gmu() == Approx(want.dmu).epsilon(1e-12));
  CHECK(gsigma() == Approx(want.dsigma).epsilon(1e-12));
  CHECK(gx(10002) == Approx(-(3.0 - 0.3) / (1.7 * 1.7)).epsilon(1e-14));
  auto [vs, gs] = value_and_grad(f, data, 0.3, 1.7);  // the same as numbers (hoisted)
  CHECK(vs == Approx(v).epsilon(1e-13));
  CHECK(std::get<1>(gs) == Approx(gmu()).epsilon(1e-12));
  CHECK(std::get<2>(gs) == Approx(gsigma()).epsilon(1e-12));
  // The same bit for bit on 1 and 2 threads (chunk partials combined in chunk order).
  auto on = [&](int threads) {
    tbb::task_arena arena(threads);
    return arena.execute([&] { return std::get<2>(grad(f, data, mu, sigma))(); });
  };
  CHECK(on(1) == on(2));
  // A gradient that is one number everywhere: d/dmu sum(x + mu) = n.
  CHECK(std::get<1>(grad(sum(x + y), data, mu))() == 10003.0);
  // A float element in a double evaluation; shape [1, 1] against [2, 3] keeps its shape.
  column_major_array<float> half = column_major_array<float>::from_shape({});
  half() = 0.5f;
  CHECK(eval(sum(x * y), data, half) == Approx(0.5 * 0.5 * 10003).epsilon(1e-12));
  const vec a = column_major_array<double>(xt::xarray<double>{{1, 2, 3}, {4, 5, 6}});
  auto one_one = vec::from_shape({1, 1});
  one_one(0, 0) = 2.0;
  const auto r = eval(x - y, a, one_one);
  CHECK(r(1, 2) == 4.0);
  auto g11 = std::get<1>(grad(sum(x * y), a, one_one));
  REQUIRE(g11.shape().size() == 2);
  CHECK(g11.size() == 1);
  CHECK(g11(0, 0) == 21.0);
  // vjp and jvp: the cotangent of the element sums cotangent * a; its tangent moves every output.
  const vec cot = column_major_array<double>(xt::xarray<double>{{1, 0, 0}, {0, 0, 2}});
  CHECK(std::get<1>(vjp(x * y, cot, a, one_one))(0, 0) == 1.0 + 12.0);
  auto t11 = vec::from_shape({1, 1});
  t11(0, 0) = 1.0;
  const vec zeros = xt::zeros<double>({2, 3});
  CHECK(jvp(x * y, std::tie(a, one_one), std::tie(zeros, t11)).tangent(1, 2) == 6.0);
  // Over no elements the summed gradient is 0.
  const vec empty = vec::from_shape({0});
  auto ge = std::get<1>(grad(sum(x * y), empty, mu));
  CHECK(ge.dimension() == 0);
  CHECK(ge() == 0.0);
  CHECK(std::get<1>(grad(sum(x + y), empty, mu))() == 0.0);
  // The oracle agrees.
  CHECK(detail::eval_with<detail::reference_policy>(sum(x * y), data, mu) ==
        Approx(eval(sum(x * y), data, mu)).epsilon(1e-12));
}
