// Dtype semantics beyond what the op harness checks (ops/test_elementwise.cpp): numbers meeting
// integers, integer division by zero, IEEE comparisons with NaN, truthiness of logical operands,
// conversions, what tracks grad, real operands of complex computations, and the refusals.
#include "../../errors.hpp"
#include "../eager_testing.hpp"

#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace tenferro;
using namespace tenferro::test;

namespace {

EagerTensor binary(const std::string& op, const EagerTensor& a, const EagerTensor& b) {
  return op == "div" ? a / b : a.rem(b);
}

}  // namespace

TEST_CASE("integers with numbers: whole numbers keep the dtype, fractions are refused", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const auto x = EagerTensor::from_vec_col_major_in<std::int32_t>({4}, {7, -7, 2147483647, 0}, ctx);
  CHECK(values_of<std::int32_t>(x * 2.0) == std::vector<std::int32_t>{14, -14, -2, 0});
  CHECK(values_of<std::int32_t>(x + 1.0) == std::vector<std::int32_t>{8, -6, -2147483647 - 1, 1});
  CHECK(values_of<std::int32_t>(x / 2.0) == std::vector<std::int32_t>{3, -3, 1073741823, 0});
  CHECK(values_of<std::int32_t>(10.0 - x) == std::vector<std::int32_t>{3, 17, -2147483637, 10});
  const std::string msg = message_of([&] { (void)(x * 2.5); });
  CHECK(msg.find("scale") != std::string::npos);
  CHECK(msg.find("2.5") != std::string::npos);
  CHECK(msg.find("i32") != std::string::npos);
  CHECK(kind_of([&] { (void)(x * 1e10); }) == ErrorKind::InvalidArgument);  // beyond i32
  // The runtime stays usable.
  CHECK(values_of<std::int32_t>(x - x) == std::vector<std::int32_t>{0, 0, 0, 0});
}

TEST_CASE("integer division by zero and negative integer exponents throw, naming the op", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const auto x = EagerTensor::from_vec_col_major_in<std::int64_t>({3}, {6, -6, 5}, ctx);
  const auto z = EagerTensor::from_vec_col_major_in<std::int64_t>({3}, {2, 0, 1}, ctx);
  const auto e = EagerTensor::from_vec_col_major_in<std::int64_t>({3}, {2, -1, 1}, ctx);
  for (const std::string op : {"div", "rem"}) {
    const std::string msg = message_of([&] { (void)binary(op, x, z); });
    INFO(msg);
    CHECK(msg.rfind("InvalidArgument in " + op, 0) == 0);
    CHECK(msg.find("argument 1") != std::string::npos);
    CHECK(msg.find("[3]") != std::string::npos);
  }
  CHECK(message_of([&] { (void)x.pow(e); }).find("negative exponent") != std::string::npos);
  CHECK(message_of([&] { (void)x.div_scalar(0); }).find("div_scalar") != std::string::npos);
  CHECK(values_of<std::int64_t>(x.rdiv_scalar(12)) == std::vector<std::int64_t>{2, -2, 2});
  CHECK(kind_of([&] { (void)z.rdiv_scalar(12); }) == ErrorKind::InvalidArgument);
  // A bool divisor promotes to an integer division too (false is a zero divisor); a floating one
  // divides as IEEE does.
  const auto t = EagerTensor::from_tensor_in(Tensor::from_vec_col_major<bool>({3}, {true, false, true}), ctx);
  CHECK(message_of([&] { (void)(x / t); }).rfind("InvalidArgument in div", 0) == 0);
  CHECK(values_of<std::int64_t>(x / t.logical_or(t.logical_not())) == std::vector<std::int64_t>{6, -6, 5});
  const auto f = EagerTensor::from_vec_col_major_in<double>({3}, {2, 0, 1}, ctx);
  const auto q = values_of<double>(x / f);
  CHECK(q[0] == 3);
  CHECK(q[1] == -std::numeric_limits<double>::infinity());
  CHECK(values_of<std::int64_t>(x / e) == std::vector<std::int64_t>{3, 6, 5});
}

TEST_CASE("comparisons give Bool with IEEE NaN semantics and promote their operands", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto a = EagerTensor::from_vec_col_major_in<double>({4}, {1, 2, nan, nan}, ctx);
  const auto b = EagerTensor::from_vec_col_major_in<double>({4}, {2, 2, 1, nan}, ctx);
  using B = std::vector<bool>;
  auto bools = [](const EagerTensor& t) {
    REQUIRE(t.dtype() == DType::Bool);
    REQUIRE_FALSE(t.tracks_grad());
    const auto s = t.materialized().as_slice<bool>();
    return B(s.begin(), s.end());
  };
  CHECK(bools(a.lt(b)) == B{true, false, false, false});
  CHECK(bools(a.le(b)) == B{true, true, false, false});
  CHECK(bools(a.gt(b)) == B{false, false, false, false});
  CHECK(bools(a.ge(b)) == B{false, true, false, false});
  CHECK(bools(a.eq(b)) == B{false, true, false, false});
  CHECK(bools(a.ne(b)) == B{true, false, true, true});
  // Tracked operands: the result still does not track.
  const auto t = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({4}, {1, 2, 3, 4}), ctx);
  CHECK(bools(t.gt(a)) == B{false, false, false, false});
  // i32 against f64 compares in f64; i64 extremes compare exactly.
  const auto i = EagerTensor::from_vec_col_major_in<std::int32_t>({4}, {1, 3, -5, 0}, ctx);
  CHECK(bools(i.ge(b)) == B{false, true, false, false});
  const auto big =
      EagerTensor::from_vec_col_major_in<std::int64_t>({2}, {(std::int64_t(1) << 62) + 1, 5}, ctx);
  const auto big2 = EagerTensor::from_vec_col_major_in<std::int64_t>({2}, {std::int64_t(1) << 62, 5}, ctx);
  CHECK(bools(big.gt(big2)) == B{true, false});
  // Broadcasting: a rank-0 threshold.
  const auto zero = EagerTensor::from_vec_col_major_in<std::int32_t>({}, {0}, ctx);
  CHECK(bools(i.gt(zero)) == B{true, true, false, false});
  // Large (several chunks, two threads), with a rank-0 operand, a number and a transposed view:
  // each element against the scalar comparison.
  auto two = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2));
  const std::size_t rows = 130, cols = 101;  // 13130 elements: three chunks and a tail
  std::vector<double> v(rows * cols);
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = std::sin(0.37 * double(k)) * 2.0;
  v[17] = nan;
  const auto x = EagerTensor::from_vec_col_major_in<double>({rows, cols}, v, two);
  const auto xt = x.transpose({1, 0});
  const auto half = EagerTensor::from_vec_col_major_in<double>({}, {0.5}, two);
  const auto none = EagerTensor::from_vec_col_major_in<std::int32_t>({}, {0}, two);
  for (const auto& [name, got, want] :
       {std::tuple{"x < 0.5 (rank 0)", bools(x.lt(half)),
                   std::function<bool(std::size_t)>([&](std::size_t k) { return v[k] < 0.5; })},
        std::tuple{"0.5 >= x (rank 0)", bools(half.ge(x)),
                   std::function<bool(std::size_t)>([&](std::size_t k) { return 0.5 >= v[k]; })},
        std::tuple{"x != x", bools(x.ne(x)),
                   std::function<bool(std::size_t)>([&](std::size_t k) { return v[k] != v[k]; })},
        std::tuple{"x^T > 0 (view)", bools(xt.gt(none)), std::function<bool(std::size_t)>([&](std::size_t k) {
                     return v[(k / cols) + (k % cols) * rows] > 0;  // element (k % cols, k / cols) of x^T
                   })},
        std::tuple{"x^T < 0.5 (strided view, same dtype)", bools(xt.lt(half)),
                   std::function<bool(std::size_t)>(
                       [&](std::size_t k) { return v[(k / cols) + (k % cols) * rows] < 0.5; })},
        std::tuple{"reshaped x < 0.5 (contiguous view: the one-pass kernel)",
                   bools(x.reshape({cols, rows}).lt(half)),
                   std::function<bool(std::size_t)>([&](std::size_t k) { return v[k] < 0.5; })}}) {
    INFO(name);
    REQUIRE(got.size() == v.size());
    for (std::size_t k = 0; k < v.size(); ++k) REQUIRE(got[k] == want(k));
  }
}

TEST_CASE("logical ops take any real dtype, nonzero (and NaN) being true", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto p =
      EagerTensor::from_tensor_in(Tensor::from_vec_col_major<bool>({4}, {true, true, false, false}), ctx);
  const auto q =
      EagerTensor::from_tensor_in(Tensor::from_vec_col_major<bool>({4}, {true, false, true, false}), ctx);
  const auto f = EagerTensor::from_vec_col_major_in<double>({4}, {nan, -0.0, 3, 0}, ctx);
  using B = std::vector<bool>;
  auto bools = [](const EagerTensor& t) {
    REQUIRE(t.dtype() == DType::Bool);
    const auto s = t.materialized().as_slice<bool>();
    return B(s.begin(), s.end());
  };
  CHECK(bools(p.logical_and(q)) == B{true, false, false, false});
  CHECK(bools(p.logical_or(q)) == B{true, true, true, false});
  CHECK(bools(p.logical_xor(q)) == B{false, true, true, false});
  CHECK(bools(p.logical_not()) == B{false, false, true, true});
  CHECK(bools(f.logical_not()) == B{false, true, false, true});
  CHECK(bools(f.logical_and(p)) == B{true, false, false, false});
  // Arithmetic on two bools computes in i32 and converts back: + is or, * is and.
  CHECK(bools(p + q) == B{true, true, true, false});
  CHECK(bools(p * q) == B{true, false, false, false});
}

TEST_CASE("to converts between dtypes: truncation, saturation, NaN to 0, nonzero to true", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto x = EagerTensor::requires_grad_in(
      Tensor::from_vec_col_major<double>({6}, {1.7, -2.8, nan, 1e20, -1e20, -0.0}), ctx);
  const EagerTensor i = x.to(DType::I32);
  CHECK(values_of<std::int32_t>(i) == std::vector<std::int32_t>{1, -2, 0, 2147483647, -2147483647 - 1, 0});
  CHECK_FALSE(i.tracks_grad());
  CHECK(values_of<bool>(x.to(DType::Bool)) == std::vector<bool>{true, true, true, true, true, false});
  CHECK(values_of<float>(i.to(DType::F32)) == std::vector<float>{1, -2, 0, 2147483647.0f, -2147483648.0f, 0});
  const EagerTensor c = x.to(DType::C64);  // complex: the value as the real part; back: the real part
  CHECK(cpu::cast(c.materialized(), DType::F64).as_slice<double>()[0] == 1.7);
  CHECK(c.materialized().as_slice<std::complex<double>>()[1] == std::complex<double>(-2.8, 0));
  CHECK(values_of<float>(c.to(DType::F32))[0] == 1.7f);
}

TEST_CASE("cast is to, and convert only widens as promote_types does, keeping gradients", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({2}, {1.2, -2.8}), ctx);
  CHECK(values_of<std::int32_t>(x.cast(DType::I32)) == std::vector<std::int32_t>{1, -2});
  const auto z = x.convert(DType::C64);
  CHECK(values_of<std::complex<double>>(z) == std::vector<std::complex<double>>{{1.2, 0}, {-2.8, 0}});
  (z.real() * z.real()).reduce_sum().backward();  // d/dx sum(x^2) = 2x
  CHECK(as_doubles(*x.grad()) == std::vector<double>{2.4, -5.6});
  const auto f = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<float>({1}, {3.0f}), ctx);
  const auto g = ctx->grad(f.convert(DType::F64).square().reduce_sum(), f);
  CHECK(g.dtype() == DType::F32);
  CHECK(values_of<float>(g) == std::vector<float>{6.0f});
  // Every pair of dtypes: allowed exactly where promote_types(from, to) is `to`.
  const std::vector<DType> all{DType::F32,  DType::F64, DType::I32, DType::I64,
                               DType::Bool, DType::C32, DType::C64};
  for (const DType from : all) {
    for (const DType to : all) {
      INFO(dtype_name(from) << " to " << dtype_name(to));
      const auto t = EagerTensor::from_tensor_in(Tensor::ones({3}, from), ctx);
      if (promote_types(from, to) == to) {
        const auto r = t.convert(to);
        CHECK(r.dtype() == to);
        CHECK(as_doubles(cpu::cast(r.materialized(), DType::F64)) == std::vector<double>(3, 1.0));
        continue;
      }
      const std::string msg = message_of([&] { (void)t.convert(to); });
      INFO(msg);
      CHECK(msg.rfind("Unsupported in convert", 0) == 0);
      CHECK(msg.find("unsupported dtype conversion from " + std::string(dtype_name(from)) + " to " +
                     std::string(dtype_name(to))) != std::string::npos);
      CHECK(msg.find("[3]") != std::string::npos);
    }
  }
}

TEST_CASE("integer tensors never track grad through ops and an integer leaf's backward accumulates",
          "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const auto n = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<std::int64_t>({}, {5}), ctx);
  REQUIRE(n.tracks_grad());
  n.backward();
  CHECK(values_of<std::int64_t>(EagerTensor::from_tensor_in(*n.grad(), ctx)) == std::vector<std::int64_t>{1});
  n.backward();
  CHECK(values_of<std::int64_t>(EagerTensor::from_tensor_in(*n.grad(), ctx)) == std::vector<std::int64_t>{2});
  CHECK_FALSE((n * n).tracks_grad());
  // A floating leaf meets an integer one: the gradient flows to the floating leaf only.
  const auto w = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({}, {1.5}), ctx);
  const EagerTensor loss = (w * n).square();  // (w n)^2, d/dw = 2 w n^2 = 75
  REQUIRE(loss.dtype() == DType::F64);
  loss.backward();
  CHECK(w.grad()->as_slice<double>()[0] == 75.0);
  CHECK(values_of<std::int64_t>(EagerTensor::from_tensor_in(*n.grad(), ctx)) == std::vector<std::int64_t>{2});
  CHECK(ctx->grad(loss, w).materialized().as_slice<double>()[0] == 75.0);
}

TEST_CASE("ops without an integer form refuse integer inputs, naming the op and the dtype", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const auto x = EagerTensor::from_vec_col_major_in<std::int32_t>({2}, {1, 2}, ctx);
  const std::string msg = message_of([&] { (void)x.exp(); });
  CHECK(msg.rfind("Unsupported in exp", 0) == 0);
  CHECK(msg.find("i32") != std::string::npos);
  CHECK(msg.find("[2]") != std::string::npos);
  // Structural ops move integers and bools as they are.
  CHECK(values_of<std::int32_t>(x.reshape({1, 2}).transpose({1, 0}).broadcast_to({2, 2})) ==
        std::vector<std::int32_t>{1, 2, 1, 2});
}

TEST_CASE("a real leaf in a complex computation gets a real gradient", "[complex]") {
  using C = std::complex<double>;
  auto ctx = EagerRuntime::create();
  const std::vector<C> z0{{0.5, -1}, {1.5, 0.25}, {-0.75, 2}, {1, 1}, {-2, -0.5}};
  // A real leaf in a complex computation gets a real gradient: d/dx sum(real(x z)) = real(z).
  const auto xl =
      EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({5}, {1, 2, 3, 4, 5}), ctx);
  const auto zc = EagerTensor::from_vec_col_major_in<C>({5}, z0, ctx);
  (xl * zc).real().reduce_sum().backward();
  REQUIRE(xl.grad()->dtype() == DType::F64);
  for (std::size_t k = 0; k < 5; ++k) CHECK(xl.grad()->as_slice<double>()[k] == Approx(z0[k].real()));
  // A real leaf made complex with to(): the gradient comes back as the real part.
  const auto xr = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({2}, {3, -4}), ctx);
  const auto i = EagerTensor::from_tensor_in(Tensor::from_vec_col_major<C>({}, {C(0, 1)}), ctx);
  (xr.to(DType::C64) * i).imag().reduce_sum().backward();  // imag(i x) = x
  CHECK(xr.grad()->as_slice<double>()[0] == 1.0);
  CHECK(xr.grad()->as_slice<double>()[1] == 1.0);
}

TEST_CASE("complex pow differentiates in both operands, as PyTorch", "[complex]") {
  // L = Re(z^w) at z = 1 + i, w = 2: dL/dz = conj(w z^(w-1)) = 2 - 2i and
  // dL/dw = conj(z^w log z) = conj(2i (log(2) / 2 + i pi / 4)) = -pi / 2 - i log(2).
  using C = std::complex<double>;
  auto ctx = EagerRuntime::create();
  const auto z = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<C>({}, {C(1, 1)}), ctx);
  const auto w = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<C>({}, {C(2, 0)}), ctx);
  z.pow(w).real().backward();
  const C gz = z.grad()->as_slice<C>()[0], gw = w.grad()->as_slice<C>()[0];
  CHECK(std::abs(gz - C(2, -2)) < 1e-14);
  CHECK(std::abs(gw - C(-M_PI / 2, -std::log(2.0))) < 1e-14);
}

TEST_CASE("complex abs is hypot: within an ulp, exact where squares overflow or underflow, inf beats NaN",
          "[complex]") {
  // Batches mixing ordinary values with edges take the scaled path; others the fast one.
  auto check = [&]<class R>(R) {
    using C = std::complex<R>;
    constexpr R inf = std::numeric_limits<R>::infinity(), nan = std::numeric_limits<R>::quiet_NaN();
    constexpr R big = std::numeric_limits<R>::max() / 4, tiny = std::numeric_limits<R>::denorm_min();
    std::vector<C> z{{3, 4}, {0, 0}, {-0.0f, 0}, {big, big}, {tiny, tiny}, {inf, nan}, {nan, 1}, {-5, 12}};
    std::mt19937 rng(7);
    std::uniform_real_distribution<R> u(-10, 10);
    for (int k = 0; k < 1000; ++k) z.emplace_back(u(rng), u(rng));
    auto ctx = EagerRuntime::create();
    const auto a = EagerTensor::from_vec_col_major_in<C>({z.size()}, z, ctx).abs().materialized();
    REQUIRE(a.dtype() == dtype_of<R>);
    const auto got = a.template as_slice<R>();
    CHECK(got[0] == R(5));
    CHECK(got[1] == R(0));
    CHECK(got[3] == std::abs(C(big, big)));  // no overflow: big * sqrt(2)
    CHECK(std::isfinite(got[3]));
    CHECK(got[4] == std::abs(C(tiny, tiny)));  // no underflow to 0
    CHECK(got[5] == inf);
    CHECK(std::isnan(got[6]));
    CHECK(got[7] == R(13));
    for (std::size_t k = 8; k < z.size(); ++k) {
      const R want = std::abs(z[k]);
      CHECK(std::abs(got[k] - want) <= std::numeric_limits<R>::epsilon() * want);
    }
  };
  check(0.0f);
  check(0.0);
}

TEST_CASE("complex reduce_prod: the cotangent is conj of the product of the others, at a zero too",
          "[complex]") {
  // L = Re(z1 z2): dL/dz1 = conj(z2), dL/dz2 = conj(z1) (PyTorch's convention).
  using C = std::complex<double>;
  auto ctx = EagerRuntime::create();
  for (const std::vector<C>& v : {std::vector<C>{{1, 1}, {2, -1}}, std::vector<C>{{0, 0}, {2, -1}}}) {
    const auto z = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<C>({2}, v), ctx);
    const auto p = z.reduce_prod();
    CHECK(p.materialized().as_slice<C>()[0] == v[0] * v[1]);
    p.real().backward();
    const auto g = z.grad()->as_slice<C>();
    CHECK(g[0] == std::conj(v[1]));
    CHECK(g[1] == std::conj(v[0]));
    // The recorded (differentiable) rule gives the same.
    const auto traced = ctx->grad(p.real(), z);
    CHECK(traced.materialized().as_slice<C>()[0] == std::conj(v[1]));
  }
}

TEST_CASE("complex refusals: a complex loss, ops without complex kernels, imag of a real tensor",
          "[complex]") {
  auto ctx = EagerRuntime::create();
  const auto z = EagerTensor::requires_grad_in(
      Tensor::from_vec_col_major<std::complex<double>>({3}, {{0.5, -1}, {1.5, 0.25}, {-0.75, 2}}), ctx);
  const std::string msg = message_of([&] { z.reduce_sum().backward(); });
  CHECK(msg.rfind("DtypeMismatch in backward", 0) == 0);
  CHECK(msg.find("real loss") != std::string::npos);
  CHECK(message_of([&] { (void)z.maximum(z); }).rfind("Unsupported in maximum", 0) == 0);
  CHECK(message_of([&] { (void)z.reduce_max(); }).find("c64") != std::string::npos);
  CHECK(kind_of([&] { (void)z.sigmoid(); }) == ErrorKind::Unsupported);
  const auto x = EagerTensor::from_vec_col_major_in<double>({2}, {1, 2}, ctx);
  CHECK(kind_of([&] { (void)x.imag(); }) == ErrorKind::Unsupported);
  CHECK(x.real().materialized().shares_storage_with(x.materialized()));
  // The runtime stays usable.
  (z * z).abs().reduce_sum().backward();
  CHECK(z.grad()->dtype() == DType::C64);
}
