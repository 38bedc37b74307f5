// expr/eval/into.hpp: eval_into, value_and_grad_into, vjp_into and jvp_into write what eval,
// value_and_grad, vjp and jvp return, bit for bit, into outputs the caller owns (arrays, adaptors
// of the caller's memory, TypedTensors, numbers); broadcast and one-element inputs; errors that
// leave every output as it was; no allocation when the inputs share one shape.
// This program replaces operator new with a counting malloc; g++ then takes the library's inlined
// deletes for frees of a mismatched allocation (they are not: both sides are replaced here).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <tenferro/expr.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include "../normal_logpdf.hpp"

#include "../errors.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace {
std::atomic<std::size_t> allocations{0};
}  // namespace

// Every operator new of this test program is counted (the allocation test reads the count). Every
// form but the aligned ones is replaced, so each delete meets the new that allocated its pointer
// (also under AddressSanitizer, which has its own).
namespace {
void* counted(std::size_t bytes) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(bytes == 0 ? 1 : bytes);
}
}  // namespace
void* operator new(std::size_t bytes) {
  if (void* p = counted(bytes)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t bytes) {
  if (void* p = counted(bytes)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept { return counted(bytes); }
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept { return counted(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace tenferro::expr;
using tenferro::column_major_array;
using tenferro::Error;
using tenferro::ErrorKind;
using tenferro::TypedTensor;

namespace {
const auto [x, y] = placeholders<2>();
using vec = column_major_array<double>;

vec wave(std::size_t n, double phase) {
  auto v = vec::from_shape({n});
  for (std::size_t i = 0; i < n; ++i) v(i) = std::sin(0.37 * double(i) + phase);
  return v;
}

template <class A, class B>
bool same_bits(const A& a, const B& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("value_and_grad_into writes what value_and_grad returns, bit for bit, into the caller's outputs") {
  const std::size_t n = 1003;  // whole SIMD batches and a tail
  const vec a = wave(n, 0.1), b = wave(n, 0.7);
  const auto f = sum(sin(x) * y + exp(x * y));
  const auto [value, grads] = value_and_grad(f, a, b);

  double v = 0;
  vec ga = vec::from_shape({n});
  std::vector<double> memory(n);
  auto gb = xt::adapt<xt::layout_type::column_major>(memory.data(), n, xt::no_ownership(),
                                                     std::vector<std::size_t>{n});
  value_and_grad_into(f, std::tie(v, ga, gb), a, b);
  CHECK(v == value);
  CHECK(same_bits(ga, std::get<0>(grads)));
  CHECK(same_bits(gb, std::get<1>(grads)));
  // Analytic: d/dx = cos(x) y + y exp(x y), d/dy = sin(x) + x exp(x y).
  CHECK(ga(5) == Approx(std::cos(a(5)) * b(5) + b(5) * std::exp(a(5) * b(5))));
  CHECK(gb(7) == Approx(std::sin(a(7)) + a(7) * std::exp(a(7) * b(7))));

  // TypedTensor outputs and inputs.
  const auto ta = TypedTensor<double>::from_vec_col_major({n}, std::vector<double>(a.begin(), a.end()));
  auto gt = TypedTensor<double>::from_vec_col_major({n}, std::vector<double>(n, 0.0));
  double vt = 0;
  value_and_grad_into(sum(square(x)), std::tie(vt, gt), ta);
  CHECK(vt == Approx(xt::sum(a * a)()));
  CHECK(gt(10) == 2.0 * a(10));
}

TEST_CASE("value_and_grad_into: scalar inputs take T& gradients (the normal log-density)") {
  const vec data = wave(1000, 0.3) * 2.0 + 0.5;
  const double mu = 0.4, sigma = 1.3;
  const auto [d, m, s] = placeholders<3>();
  const auto logpdf = sum(-0.5 * square((d - m) / s) - log(s));
  double v = 0, dm = 0, ds = 0;
  vec gd = vec::from_shape({1000});
  value_and_grad_into(logpdf, std::tie(v, gd, dm, ds), data, mu, sigma);
  const tenferro::test::normal_logpdf expected(data, mu, sigma);
  CHECK(v == Approx(expected.value).epsilon(1e-12));
  CHECK(dm == Approx(expected.dmu).epsilon(1e-12));
  CHECK(ds == Approx(expected.dsigma).epsilon(1e-12));
  const auto [value, grads] = value_and_grad(logpdf, data, mu, sigma);
  CHECK(v == value);
  CHECK(dm == std::get<1>(grads));
  CHECK(ds == std::get<2>(grads));
  CHECK(same_bits(gd, std::get<0>(grads)));
}

TEST_CASE("value_and_grad_into: a broadcast input's gradient is summed back, a one-element one summed") {
  vec col = vec::from_shape({3, 1});  // 3 x 1
  col(0, 0) = 1.0, col(1, 0) = 2.0, col(2, 0) = 3.0;
  const vec grid =
      column_major_array<double>(xt::xarray<double>{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}});
  const auto f = sum(x * y + square(y));
  double v = 0;
  vec gx = vec::from_shape({3, 1}), gy = vec::from_shape({3, 4});
  value_and_grad_into(f, std::tie(v, gx, gy), col, grid);
  CHECK(gx(0, 0) == 10.0);  // row sums of grid
  CHECK(gx(2, 0) == 42.0);
  CHECK(gy(1, 2) == 2.0 + 2.0 * 7.0);
  const auto [value, grads] = value_and_grad(f, col, grid);
  CHECK(v == value);
  CHECK(same_bits(gx, std::get<0>(grads)));
  CHECK(same_bits(gy, std::get<1>(grads)));

  const vec one = {2.5};
  vec g1 = vec::from_shape({1});
  vec g2 = vec::from_shape({3, 4});
  value_and_grad_into(sum(x * y), std::tie(v, g1, g2), one, grid);
  CHECK(g1(0) == 78.0);  // sum of grid
  CHECK(g2(2, 3) == 2.5);
  CHECK(v == 2.5 * 78.0);
}

TEST_CASE("eval_into, vjp_into and jvp_into with known numbers, bit for bit their allocating forms") {
  const vec a = {1.0, 2.0, 3.0}, b = {4.0, 5.0, 6.0}, g = {1.0, 0.5, 0.25};
  vec out = vec::from_shape({3});
  eval_into(sin(x) * 2.0, out, a);
  CHECK(same_bits(out, eval(sin(x) * 2.0, a)));
  CHECK(out(2) == Approx(2.0 * std::sin(3.0)));
  double total = 0;
  eval_into(sum(x * y), total, a, b);
  CHECK(total == 32.0);
  const vec m = column_major_array<double>(xt::xarray<double>{{1, 2, 3}, {4, 5, 6}});
  vec wide = vec::from_shape({2, 3});
  eval_into(x * y, wide, m, b);  // b broadcast along the rows
  CHECK(wide(1, 2) == 36.0);
  CHECK(wide(0, 1) == 10.0);

  vec ga = vec::from_shape({3}), gb = vec::from_shape({3});
  vjp_into(x * exp(y), g, std::tie(ga, gb), a, b);
  const auto expected = vjp(x * exp(y), g, a, b);
  CHECK(same_bits(ga, std::get<0>(expected)));
  CHECK(same_bits(gb, std::get<1>(expected)));
  CHECK(ga(1) == Approx(std::exp(5.0) * 0.5));
  CHECK(gb(2) == Approx(3.0 * std::exp(6.0) * 0.25));

  const vec t = {1.0, 0.5, 0.0};
  vec value = vec::from_shape({3}), tangent = vec::from_shape({3});
  jvp_into(x * x * x, std::tie(value, tangent), std::tie(a), std::tie(t));
  CHECK(value(1) == 8.0);
  CHECK(tangent(1) == 3.0 * 4.0 * 0.5);  // 3 x^2 t
  double sv = 0, st = 0;
  jvp_into(sum(x * x), std::tie(sv, st), std::tie(a), std::tie(t));
  CHECK(sv == 14.0);
  CHECK(st == 2.0 * 1.0 + 2.0 * 2.0 * 0.5);
}

TEST_CASE("_into errors name the op, the output and the shapes, and leave every output as it was") {
  const vec a = {1.0, 2.0, 3.0}, b = {4.0, 5.0, 6.0};
  const double sentinel = -7.0;
  double v = sentinel;
  vec ga = vec::from_shape({3}), short_g = vec::from_shape({2});
  ga.fill(sentinel);
  short_g.fill(sentinel);
  std::string text = tenferro::test::message_of(
      [&] { value_and_grad_into(sum(x * y), std::tie(v, ga, short_g), a, b); }, ErrorKind::ShapeMismatch);
  CHECK(has(text, "value_and_grad_into"));
  CHECK(has(text, "'outputs' 2"));
  CHECK(has(text, "[2]"));
  CHECK(has(text, "input 1 has shape [3]"));
  CHECK(v == sentinel);
  CHECK(ga(0) == sentinel);

  // A row-major 2 x 3 output is not column-major storage.
  const vec m = column_major_array<double>(xt::xarray<double>{{1, 2, 3}, {4, 5, 6}});
  xt::xarray<double, xt::layout_type::row_major> rows = xt::zeros<double>({2, 3});
  text = tenferro::test::message_of([&] { eval_into(x * 2.0, rows, m); }, ErrorKind::InvalidArgument);
  CHECK(has(text, "eval_into"));
  CHECK(has(text, "column-major"));
  CHECK(rows(1, 2) == 0.0);

  // An output over an input's memory, and two outputs over one array.
  vec c = a;
  text = tenferro::test::message_of([&] { eval_into(x * 2.0, c, c); }, ErrorKind::InvalidArgument);
  CHECK(has(text, "overlaps input 0"));
  CHECK(c(2) == 3.0);
  vec gb = vec::from_shape({3});
  gb.fill(sentinel);
  text = tenferro::test::message_of([&] { vjp_into(x * y, a, std::tie(gb, gb), a, b); },
                                    ErrorKind::InvalidArgument);
  CHECK(has(text, "'outputs' 0 and 1 overlap"));
  CHECK(gb(0) == sentinel);

  // eval_into's output must have the broadcast shape.
  vec wrong = vec::from_shape({3, 2});
  text = tenferro::test::message_of([&] { eval_into(x * y, wrong, m, b); }, ErrorKind::ShapeMismatch);
  CHECK(has(text, "[3, 2]"));
  CHECK(has(text, "[2, 3]"));
  // A cotangent of another shape, or with only numbers as inputs, is named as vjp names it.
  text = tenferro::test::message_of(
      [&] {
        vjp_into(x * y, vec{1.0, 2.0}, std::tie(ga, gb), a, b);
      },
      ErrorKind::ShapeMismatch);
  CHECK(has(text, "vjp_into"));
  CHECK(has(text, "'cotangent' has shape [2] but the output has shape [3]"));
  double s0 = 0, s1 = 0;
  text = tenferro::test::message_of([&] { vjp_into(x * y, a, std::tie(s0, s1), 2.0, 3.0); },
                                    ErrorKind::ShapeMismatch);
  CHECK(has(text, "'cotangent' has shape [3] but the output has shape []"));
  // A gradient over the cotangent's memory; the value inside a gradient; one number twice.
  vec cot = {1.0, 1.0, 1.0};
  text = tenferro::test::message_of([&] { vjp_into(x * y, cot, std::tie(cot, gb), a, b); },
                                    ErrorKind::InvalidArgument);
  CHECK(has(text, "overlaps the cotangent"));
  CHECK(cot(0) == 1.0);
  text = tenferro::test::message_of([&] { value_and_grad_into(sum(x * y), std::tie(ga(1), ga, gb), a, b); },
                                    ErrorKind::InvalidArgument);
  CHECK(has(text, "the value"));
  CHECK(ga(0) == sentinel);
  text = tenferro::test::message_of([&] { jvp_into(sum(x * x), std::tie(s0, s0), std::tie(a), std::tie(b)); },
                                    ErrorKind::InvalidArgument);
  CHECK(has(text, "same number"));
}

TEST_CASE("_into with inputs of one shape allocates nothing, up to 2^20 elements") {
  // 2^20 elements, the most whose chunks' partial sums a pass keeps on the stack; 8 MB arrays, of
  // a size the buffer cache counts.
  const std::size_t n = std::size_t(1) << 20;
  const vec a = wave(n, 0.2), b = wave(n, 0.9);
  vec ga = vec::from_shape({n}), gb = vec::from_shape({n}), out = vec::from_shape({n});
  vec tangent = vec::from_shape({n});
  double v = 0, jv = 0, jt = 0;
  const auto f = sum(sin(x) * y + exp(x * y));
  auto calls = [&] {
    value_and_grad_into(f, std::tie(v, ga, gb), a, b);
    vjp_into(x * exp(y), a, std::tie(ga, gb), a, b);
    eval_into(x * y + 1.0, out, a, b);
    jvp_into(x * exp(y), std::tie(out, tangent), std::tie(a, b), std::tie(b, a));
    jvp_into(f, std::tie(jv, jt), std::tie(a, b), std::tie(b, a));
  };
  calls();  // warm: thread-local state, and the store rule's threshold (read once per process)
  const auto before = tenferro::buffer_cache_stats();
  const std::size_t news = allocations.load();
  calls();
  const std::size_t made = allocations.load() - news;
  const auto after = tenferro::buffer_cache_stats();
  CHECK(made == 0);
  CHECK(after.hits + after.misses == before.hits + before.misses);
  CHECK(v == value_and_grad(f, a, b).value);
  CHECK(jt == jvp(f, std::tie(a, b), std::tie(b, a)).tangent);
}

TEST_CASE("value_and_grad, eval, vjp and jvp allocate their outputs and nothing else, rank 4 included") {
  // Shapes up to rank 4 live on the stack (xtensor's svector<4>); output buffers come from
  // tenferro's allocator (buffers of 64 KiB or more from the buffer cache, one request each),
  // never from operator new.
  using counts = std::pair<std::size_t, std::size_t>;  // (operator new, buffer cache requests)
  auto count = [](auto&& call) {
    const auto before = tenferro::buffer_cache_stats();
    const std::size_t news = allocations.load();
    call();
    const auto after = tenferro::buffer_cache_stats();
    return counts{allocations.load() - news, (after.hits + after.misses) - (before.hits + before.misses)};
  };
  const auto f = sum(sin(x) * y + exp(x * y));
  for (const std::size_t n : {std::size_t(1), std::size_t(16), std::size_t(1000), std::size_t(65536)}) {
    INFO("n = " << n);
    const vec a = wave(n, 0.2), b = wave(n, 0.9);
    (void)value_and_grad(f, a, b);  // warm
    (void)eval(x * y + 1.0, a, b);
    const std::size_t cached = n == 65536 ? 1 : 0;
    const counts grads = count([&] { (void)value_and_grad(f, a, b); });
    CHECK(grads.first == 0);
    CHECK(grads.second == 2 * cached);
    const counts values = count([&] { (void)eval(x * y + 1.0, a, b); });
    CHECK(values.first == 0);
    CHECK(values.second == cached);
    const counts cotangents = count([&] { (void)vjp(x * exp(y), a, a, b); });
    CHECK(cotangents.first == 0);
    CHECK(cotangents.second == 2 * cached);
    const counts tangents = count([&] { (void)jvp(x * exp(y), std::tie(a, b), std::tie(b, a)); });
    CHECK(tangents.first == 0);
    CHECK(tangents.second == 2 * cached);
  }
  vec c = vec::from_shape({8, 16, 16, 8});  // 128 KiB
  for (std::size_t i = 0; i < c.size(); ++i) c.data()[i] = 0.001 * static_cast<double>(i % 1000);
  (void)value_and_grad(sum(square(x)), c);
  const counts rank4 = count([&] { (void)value_and_grad(sum(square(x)), c); });
  CHECK(rank4.first == 0);
  CHECK(rank4.second == 1);
}
