// ad/ at the edges, each with the values PyTorch 1.13 (float64) and IEEE 754 give: pow at a zero
// base, NaN through max/min and their reductions, empty and oversized shapes, allocation failure,
// leaves reached only through ops whose derivative is zero. In both sizes (below and above
// CpuBackend::fusion_elements: op by op and deferred), with fusion on and off, on 1 and 2 threads.
#include <tenferro/cpu/common.hpp>  // cpu::cast
#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include "../errors.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

// Under AddressSanitizer an impossible allocation must fail as it does without it (malloc returns
// null, the allocator throws bad_alloc) instead of aborting the test.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

using namespace tenferro;
using Catch::Matchers::Contains;
using tenferro::test::kind_of;
using tenferro::test::message_of;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t big = CpuBackend::fusion_elements + 3616;  // 20,000: deferred when fusion is on

std::vector<double> values(const Tensor& t) {
  const Tensor d = cpu::cast(t, DType::F64);
  auto s = d.as_slice<double>();
  return {s.begin(), s.end()};
}
std::vector<double> values(const EagerTensor& t) { return values(t.materialized()); }
double scalar(const EagerTensor& t) { return values(t).at(0); }

// Same value and, for zeros and infinities, the same sign; NaN equals NaN.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}
void require_same(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(same(got[i], want[i]));
  }
}

Tensor vec(std::vector<double> v) {
  const std::size_t n = v.size();
  return Tensor::from_vec_col_major<double>({n}, std::move(v));
}

// Runtimes of every configuration the edges must hold in.
struct config {
  const char* name;
  std::shared_ptr<EagerRuntime> ctx;
};
std::vector<config> configs() {
  return {{"fusion on, 1 thread", EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1))},
          {"fusion on, 2 threads", EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2))},
          {"fusion off, 2 threads",
           EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2).with_fusion(false))}};
}

}  // namespace

TEST_CASE("regression: pow with a zero base is 1 or inf, and its gradient -inf, not 0") {
  for (const auto& [name, ctx] : configs()) {
    INFO(name);
    auto a = ctx->variable_from(vec({0, 0, 0}));
    auto b = ctx->constant_from(vec({0, -1, -0.5}));
    auto p = a.pow(b);
    require_same(values(p), {1, inf, inf});
    p.reduce_sum().backward();
    require_same(values(*a.grad()), {0, -inf, -inf});
    // The smallest case: 0^-0 = 1.
    auto x = ctx->variable_from(vec({0.0}));
    auto c = ctx->constant_from(vec({-0.0}));
    CHECK(scalar(x.pow(c).reduce_sum()) == 1.0);
    // Deferred: the same values in a large tensor.
    std::vector<double> base(big, 0.0), exponent(big, -1.0);
    exponent[5] = 0.0;
    exponent[6] = 2.0;
    auto A = ctx->variable_from(vec(base));
    auto P = A.pow(ctx->constant_from(vec(exponent)));
    const auto pv = values(P);
    CHECK(same(pv[0], inf));
    CHECK(pv[5] == 1.0);
    CHECK(same(pv[6], 0.0));
    const auto g = values(ctx->grad(P.reduce_sum(), A));
    CHECK(same(g[0], -inf));
    CHECK(same(g[5], 0.0));
    CHECK(same(g[6], 0.0));
  }
}

TEST_CASE("NaN propagates through reduce_max, reduce_min, maximum and minimum wherever it is") {
  for (const auto& [name, ctx] : configs()) {
    INFO(name);
    CHECK(std::isnan(scalar(ctx->constant_from(vec({qnan, 2, 3})).reduce_max())));
    CHECK(std::isnan(scalar(ctx->constant_from(vec({1, 2, qnan})).reduce_max())));
    CHECK(std::isnan(scalar(ctx->constant_from(vec({qnan, 2, 3})).reduce_min())));
    CHECK(std::isnan(scalar(ctx->constant_from(vec({1, 2, qnan})).reduce_min())));
    const auto n0 = ctx->constant_from(Tensor::full({}, qnan));
    const auto z0 = ctx->constant_from(Tensor::zeros({}));
    CHECK(std::isnan(scalar(n0.maximum(z0))));
    CHECK(std::isnan(scalar(z0.maximum(n0))));
    CHECK(std::isnan(scalar(n0.minimum(z0))));
    CHECK(std::isnan(scalar(z0.minimum(n0))));
    for (const std::size_t at : {std::size_t(0), std::size_t(777), big - 1}) {
      INFO("one NaN among " << big << " ones, at " << at);
      std::vector<double> ones(big, 1.0);
      ones[at] = qnan;
      auto x = ctx->variable_from(vec(ones));
      CHECK(std::isnan(scalar(x.reduce_max())));
      CHECK(std::isnan(scalar(x.reduce_min())));
      CHECK(std::isnan(scalar(x.reduce_max({0}))));
      // Elementwise, deferred when fusion is on, against a vector of zeros, from either side.
      auto z = ctx->constant_from(Tensor::zeros({big}));
      CHECK(std::isnan(values(x.maximum(z))[at]));
      CHECK(std::isnan(values(z.maximum(x))[at]));
      CHECK(std::isnan(values(z.minimum(x))[at]));
      CHECK(values(z.maximum(x))[at == 0 ? 1 : 0] == 1.0);
      // The gradient goes to the NaN element (PyTorch's choice), op by op and fused.
      x.reduce_max().backward();
      auto g = values(*x.grad());
      CHECK(g[at] == 1.0);
      CHECK(g[at == 0 ? 1 : 0] == 0.0);
      x.clear_grad();
      z.maximum(x).reduce_sum().backward();
      g = values(*x.grad());
      CHECK(g[at] == 1.0);
      CHECK(g[at == 0 ? 1 : 0] == 1.0);  // 1 > 0
      x.clear_grad();
      x.minimum(z).reduce_sum().backward();
      g = values(*x.grad());
      CHECK(g[at] == 1.0);
      CHECK(g[at == 0 ? 1 : 0] == 0.0);  // 0 < 1
    }
  }
}

TEST_CASE("reduce_max and reduce_min over an axis of extent 0 throw, empty sums, products and means do not") {
  auto ctx = EagerRuntime::create();
  auto e = ctx->constant_from(Tensor::zeros({0, 3}));
  CHECK(kind_of([&] { (void)e.reduce_max(); }) == ErrorKind::InvalidArgument);
  CHECK(kind_of([&] { (void)e.reduce_min({0}); }) == ErrorKind::InvalidArgument);
  CHECK_THAT(message_of([&] { (void)e.reduce_max({0}); }),
             Contains("reduce_max") && Contains("axis 0") && Contains("[0, 3]"));
  CHECK(e.reduce_max({1}).shape() == Shape{0});  // the reduced axis has extent 3: no empty maximum
  CHECK(scalar(e.reduce_sum()) == 0.0);
  CHECK(scalar(e.reduce_prod()) == 1.0);
  CHECK(std::isnan(scalar(e.reduce_mean())));
  CHECK(values(e.reduce_sum({0})) == std::vector<double>{0, 0, 0});
}

TEST_CASE("one size rule for every shape: the product of the non-zero extents fits in ptrdiff_t") {
  const std::size_t t40 = std::size_t(1) << 40;
  for (const Shape& shape : {Shape{0, t40, t40}, Shape{t40, t40, 0}, Shape{t40, 0, t40}, Shape{t40, t40}}) {
    INFO(format_shape(shape));
    CHECK(!checked_shape_size(shape));
    CHECK(kind_of([&] { (void)Tensor::zeros(shape); }) == ErrorKind::InvalidArgument);
    CHECK_THAT(message_of([&] { (void)Tensor::zeros(shape); }),
               Contains("Tensor::full") && Contains(format_shape(shape)));
    CHECK(kind_of([&] { (void)Tensor::for_overwrite<float>(shape); }) == ErrorKind::InvalidArgument);
    CHECK(kind_of([&] { (void)Tensor::from_vec_col_major<double>(shape, {}); }) ==
          ErrorKind::InvalidArgument);
  }
  CHECK(checked_shape_size(Shape{0, std::size_t(1) << 31, std::size_t(1) << 31}) == std::size_t(0));
  CHECK(checked_shape_size(Shape{std::size_t(1) << 62, 1, 0}) == std::size_t(0));
  CHECK(checked_shape_size(Shape{std::size_t(1) << 62, 1}) == std::size_t(1) << 62);
  CHECK(!checked_shape_size(Shape{std::size_t(1) << 62, 2, 0}));  // 2^63 > 2^63 - 1
  // Ops that make shapes: an empty tensor reshaped or broadcast to an oversized shape.
  auto ctx = EagerRuntime::create();
  auto e = ctx->constant_from(Tensor::zeros({0}));
  CHECK(kind_of([&] { (void)e.reshape({t40, t40, 0}); }) == ErrorKind::InvalidArgument);
  auto one = ctx->constant_from(Tensor::zeros({1}));
  CHECK(kind_of([&] { (void)one.broadcast_to({t40, t40}); }) == ErrorKind::InvalidArgument);
  CHECK(values(one.add_scalar(2.0)) == std::vector<double>{2.0});  // still usable
}

TEST_CASE("a tensor that cannot be allocated is ResourceExhausted with the bytes, and nothing breaks") {
  const std::size_t t40 = std::size_t(1) << 40;  // 8 TiB of f64: more than this machine maps
  try {
    (void)Tensor::zeros({t40});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::ResourceExhausted);
    CHECK_THAT(std::string(e.what()),
               Contains("Tensor::full") && Contains("8796093022208 bytes") && Contains("[1099511627776]"));
    CHECK(e.cause() != nullptr);  // the allocator's std::bad_alloc
  }
  // A broadcast of one number to that shape is accepted (nothing is allocated: deferred with
  // fusion, else a view with stride 0) and fails when its elements are needed, leaving it as it
  // was, so asking again fails the same way.
  for (const bool fusion : {true, false}) {
    INFO("fusion " << fusion);
    auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::create().with_fusion(fusion));
    auto x = ctx->variable_from(Tensor::full({}, 2.0));
    auto done = ctx->variable_from(vec({1, 2, 3}));
    const auto before = values(done.mul(done));
    if (fusion) {
      auto huge = x.broadcast_to({t40});
      CHECK(huge.shape() == Shape{t40});
      CHECK(kind_of([&] { (void)huge.materialized(); }) == ErrorKind::ResourceExhausted);
      CHECK(kind_of([&] { (void)huge.materialized(); }) == ErrorKind::ResourceExhausted);
      CHECK(kind_of([&] { (void)huge.exp().reduce_max(); }) == ErrorKind::ResourceExhausted);
    } else {
      auto huge = x.broadcast_to({t40});
      const Tensor view = huge.materialized();
      CHECK(view.strides() == Strides{0});
      CHECK(view.shares_storage_with(x.materialized()));
      CHECK(kind_of([&] { (void)view.materialized(); }) == ErrorKind::ResourceExhausted);
      CHECK(kind_of([&] { (void)view.materialized(); }) == ErrorKind::ResourceExhausted);
      CHECK(kind_of([&] { (void)huge.exp(); }) == ErrorKind::ResourceExhausted);
    }
    CHECK(values(done.mul(done)) == before);
    (done * x).reduce_sum().backward();
    CHECK(values(*x.grad()) == std::vector<double>{6.0});
  }
}

TEST_CASE("regression: a leaf reached only through zero-derivative ops gets zeros, in every path") {
  for (const auto& [name, ctx] : configs()) {
    for (const std::size_t n : {std::size_t(100), big}) {
      INFO(name << ", n = " << n);
      auto x = ctx->variable_from(Tensor::full({n}, 1.5));
      auto loss = x.sign().reduce_sum();
      CHECK(loss.tracks_grad());
      const std::vector<double> zeros(n, 0.0);
      CHECK(values(ctx->grad(loss, x)) == zeros);
      CHECK(ctx->grad_optional(loss, x).has_value());
      {
        const auto no_grad = ctx->no_grad();
        CHECK(values(ctx->grad(loss, x)) == zeros);  // the kernel sweep
      }
      CHECK(values(ctx->vjp(x.sign(), x, ctx->constant_from(Tensor::ones({n})))) == zeros);
      CHECK(values(ctx->jvp(loss, x, ctx->constant_from(Tensor::ones({n})))) == std::vector<double>{0.0});
      loss.backward();
      REQUIRE(x.grad().has_value());
      CHECK(values(*x.grad()) == zeros);
      x.clear_grad();
      loss.backward({.create_graph = true});
      REQUIRE(x.grad().has_value());
      CHECK(values(*x.grad()) == zeros);
      // Behind the zero: a real path and a zero path to the same leaf add up; a second leaf only
      // behind sign gets zeros too.
      auto y = ctx->variable_from(Tensor::full({n}, 2.0));
      x.clear_grad();
      (x.mul(y).sign() + x).reduce_sum().backward();
      CHECK(values(*x.grad()) == std::vector<double>(n, 1.0));
      CHECK(values(*y.grad()) == zeros);
      // A leaf the loss does not reach stays without a gradient.
      auto unused = ctx->variable_from(Tensor::full({n}, 2.0));
      CHECK_FALSE(ctx->grad_optional(loss, unused).has_value());
    }
  }
}
