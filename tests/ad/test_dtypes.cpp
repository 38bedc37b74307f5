// Dtypes through the eager ops: integer arithmetic against an exact reference (128-bit
// arithmetic wrapped to the dtype's width), comparisons and logical ops to Bool, reductions and
// conversions of integers and bools, promotion of every dtype pair, what tracks grad, and the
// errors of integer division and fractional numbers.
#include "../errors.hpp"

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

// Exact arithmetic for the references (a GCC and Clang extension).
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

// v modulo 2^bits of T, as a T.
template <class T>
T wrapped(i128 v) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<u128>(v)));
}

// The exact results of the integer ops, wrapped to T.
template <class T>
T reference(const std::string& op, T a, T b) {
  const i128 x = a, y = b;
  if (op == "add") return wrapped<T>(x + y);
  if (op == "sub") return wrapped<T>(x - y);
  if (op == "mul") return wrapped<T>(x * y);
  if (op == "div") return wrapped<T>(x / y);  // C++ truncates toward zero
  if (op == "rem") return wrapped<T>(x % y);
  if (op == "maximum") return a > b ? a : b;
  if (op == "minimum") return a < b ? a : b;
  if (op == "pow") {
    u128 r = 1;
    for (T k = 0; k < b; ++k) r = static_cast<u128>(wrapped<T>(static_cast<i128>(r) * x));
    return wrapped<T>(static_cast<i128>(r));
  }
  FAIL("no reference for " << op);
  return 0;
}
template <class T>
T reference(const std::string& op, T a) {
  const i128 x = a;
  if (op == "neg") return wrapped<T>(-x);
  if (op == "abs") return wrapped<T>(x < 0 ? -x : x);
  if (op == "sign") return a > 0 ? 1 : a < 0 ? -1 : 0;
  if (op == "square") return wrapped<T>(x * x);
  FAIL("no reference for " << op);
  return 0;
}

EagerTensor binary(const std::string& op, const EagerTensor& a, const EagerTensor& b) {
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div") return a / b;
  if (op == "rem") return a.rem(b);
  if (op == "pow") return a.pow(b);
  if (op == "maximum") return a.maximum(b);
  return a.minimum(b);
}
EagerTensor unary(const std::string& op, const EagerTensor& a) {
  if (op == "neg") return -a;
  if (op == "abs") return a.abs();
  if (op == "sign") return a.sign();
  return a.square();
}

// Operands with the edges of T (its extremes, -1, 0, 1) and random values; `b` avoids 0 (a
// divisor) and, for pow, is a small exponent.
template <class T>
std::pair<std::vector<T>, std::vector<T>> operands(const std::string& op, std::size_t n) {
  using lim = std::numeric_limits<T>;
  const std::vector<T> edges{lim::max(), lim::lowest(), T(-1), T(0), T(1), T(lim::max() - 1), T(7), T(-7)};
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<T> any(lim::lowest(), lim::max());
  std::uniform_int_distribution<T> small(0, 40);
  std::vector<T> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = i < edges.size() * edges.size() ? edges[i % edges.size()] : any(rng);
    b[i] = op == "pow" ? small(rng) : i < edges.size() * edges.size() ? edges[i / edges.size()] : any(rng);
    if (op != "pow" && b[i] == 0) b[i] = -1;
  }
  return {a, b};
}

template <class T>
void check_integer_family() {
  auto ctx = EagerRuntime::create();
  const std::size_t n = 1000;  // edges pairwise, then random; more than one SIMD batch and a tail
  for (const std::string op : {"add", "sub", "mul", "div", "rem", "pow", "maximum", "minimum"}) {
    INFO(op << " in " << dtype_name(dtype_of<T>));
    auto [a, b] = operands<T>(op, n);
    const auto x = EagerTensor::from_vec_col_major_in<T>({n}, a, ctx);
    const auto y = EagerTensor::from_vec_col_major_in<T>({n}, b, ctx);
    const EagerTensor r = binary(op, x, y);
    REQUIRE(r.dtype() == dtype_of<T>);
    const auto got = r.materialized().template as_slice<T>();
    for (std::size_t i = 0; i < n; ++i) {
      INFO("element " << i << ": " << a[i] << " " << op << " " << b[i]);
      REQUIRE(got[i] == reference<T>(op, a[i], b[i]));
    }
    // The second operand broadcast from rank 0 (read from a register).
    const auto s = EagerTensor::from_vec_col_major_in<T>({}, {b[3]}, ctx);
    const Tensor rb = binary(op, x, s).materialized();
    const auto got_b = rb.template as_slice<T>();
    for (std::size_t i = 0; i < n; ++i) {
      INFO("element " << i << ": " << a[i] << " " << op << " " << b[3]);
      REQUIRE(got_b[i] == reference<T>(op, a[i], b[3]));
    }
  }
  for (const std::string op : {"neg", "abs", "sign", "square"}) {
    INFO(op << " in " << dtype_name(dtype_of<T>));
    auto [a, b] = operands<T>(op, n);
    const auto got = unary(op, EagerTensor::from_vec_col_major_in<T>({n}, a, ctx)).materialized();
    REQUIRE(got.dtype() == dtype_of<T>);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(got.template as_slice<T>()[i] == reference<T>(op, a[i]));
  }
}

template <class T>
std::vector<T> values_of(const EagerTensor& t) {
  REQUIRE(t.dtype() == dtype_of<T>);
  const auto s = t.materialized().template as_slice<T>();
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("integer ops wrap and truncate and match an exact reference in i32 and i64", "[dtypes]") {
  check_integer_family<std::int32_t>();
  check_integer_family<std::int64_t>();
}

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
  // A bool divisor promotes to an integer division too; a floating one divides as IEEE does.
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

TEST_CASE("the result dtype of a binary op is promote_types for every pair of dtypes", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const DType all[] = {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::C32, DType::C64};
  for (const DType a : all) {
    for (const DType b : all) {
      INFO(dtype_name(a) << " + " << dtype_name(b));
      const auto x = EagerTensor::from_tensor_in(Tensor::full({3}, 1.0, a), ctx);
      const auto y = EagerTensor::from_tensor_in(Tensor::full({3}, 2.0, b), ctx);
      const EagerTensor r = x + y;
      REQUIRE(r.dtype() == promote_types(a, b));
      // 1 + 2, where a bool holds true (1); true + true is true.
      const double want = a == DType::Bool && b == DType::Bool ? 1.0 : 1.0 + (b == DType::Bool ? 1.0 : 2.0);
      const Tensor values = cpu::cast(r.materialized(), DType::F64);
      for (const double v : values.as_slice<double>()) CHECK(v == want);
    }
  }
}

TEST_CASE("integer and bool reductions: sums wrap, bools count in i64, max and min are exact", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const std::int32_t big = std::numeric_limits<std::int32_t>::max();
  const std::int32_t low = std::numeric_limits<std::int32_t>::lowest();
  const auto x = EagerTensor::from_vec_col_major_in<std::int32_t>({2, 3}, {big, 1, low, 5, -3, 2}, ctx);
  CHECK(values_of<std::int32_t>(x.reduce_sum()) == std::vector<std::int32_t>{4});  // big + low = -1
  const auto y = EagerTensor::from_vec_col_major_in<std::int32_t>({3}, {big, 1, 2}, ctx);
  CHECK(values_of<std::int32_t>(y.reduce_sum()) == std::vector<std::int32_t>{low + 2});  // wraps once
  CHECK(values_of<std::int32_t>(x.reduce_max()) == std::vector<std::int32_t>{big});
  CHECK(values_of<std::int32_t>(x.reduce_min()) == std::vector<std::int32_t>{low});
  CHECK(values_of<std::int32_t>(x.reduce_sum({0})) == std::vector<std::int32_t>{low, low + 5, -1});
  CHECK(values_of<std::int32_t>(x.reduce_min({1})) == std::vector<std::int32_t>{low, 1});
  CHECK(values_of<std::int32_t>(x.reduce_max({1})) == std::vector<std::int32_t>{big, 5});
  CHECK(values_of<std::int32_t>(x.reduce_prod({0})) == std::vector<std::int32_t>{big, low, -6});
  CHECK(kind_of([&] { (void)x.reduce_mean(); }) == ErrorKind::Unsupported);
  // Large enough for the fused SIMD sum and max.
  std::vector<std::int64_t> ramp(100003);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<std::int64_t>(i) * 1000003 - 7;
  const auto r = EagerTensor::from_vec_col_major_in<std::int64_t>({ramp.size()}, ramp, ctx);
  std::int64_t want = 0;
  for (const auto v : ramp) want += v;
  CHECK(values_of<std::int64_t>(r.reduce_sum()) == std::vector<std::int64_t>{want});
  CHECK(values_of<std::int64_t>(r.reduce_max()) == std::vector<std::int64_t>{ramp.back()});
  CHECK(values_of<std::int64_t>(r.reduce_min()) == std::vector<std::int64_t>{-7});
  const auto p =
      EagerTensor::from_tensor_in(Tensor::from_vec_col_major<bool>({4}, {true, false, true, true}), ctx);
  CHECK(values_of<std::int64_t>(p.reduce_sum()) == std::vector<std::int64_t>{3});
  CHECK(values_of<bool>(p.reduce_max()) == std::vector<bool>{true});
  CHECK(values_of<bool>(p.reduce_min()) == std::vector<bool>{false});
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
  CHECK(kind_of([&] { (void)x.matmul(x.reshape({2, 1}).transpose({1, 0})); }) == ErrorKind::Unsupported);
  // Structural ops move integers and bools as they are.
  CHECK(values_of<std::int32_t>(x.reshape({1, 2}).transpose({1, 0}).broadcast_to({2, 2})) ==
        std::vector<std::int32_t>{1, 2, 1, 2});
}
