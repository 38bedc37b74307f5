// Selection (ad/ops/selection.hpp): where and clamp as cases of the op harness (values against the
// definition, every Jacobian entry by gradcheck), plus the conventions a case cannot show (ties,
// NaN and the sign of zero, promotion, integer bounds) and the refusals.
#include "../op_harness.hpp"

#include <cmath>
#include <cstdint>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using T = EagerTensor;

// A fixed condition in the runtime of x.
T condition(const T& x, const Shape& s, std::vector<bool> v) {
  return T::from_tensor_in(Tensor::from_vec_col_major<bool>(s, std::move(v)), x.context());
}

std::vector<op_case> cases() {
  return {
      // [2, 3] against [3], chosen by a [2, 1] condition: row 0 from a, row 1 from b.
      {"where",
       [](const Inputs& x) {
         return where(condition(x[0], {2, 1}, {true, false}), x[0], x[1]);
       },
       {{2, 3}, {3}},
       {{}, {}},
       real_or_complex_dtypes,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         std::vector<C> r;
         for (std::size_t j = 0; j < 3; ++j) r.push_back(in[0][2 * j]), r.push_back(in[1][j]);
         return r;
       }},
      // The condition and b of shape [3] against a [2, 3]: a tangent of b alone is broadcast too.
      {"where",
       [](const Inputs& x) {
         return where(condition(x[0], {3}, {false, true, false}), x[0], x[1]);
       },
       {{2, 3}, {3}},
       {{}, {}},
       real_or_complex_dtypes,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         std::vector<C> r;
         for (std::size_t j = 0; j < 3; ++j) {
           for (std::size_t i = 0; i < 2; ++i) r.push_back(j == 1 ? in[0][i + 2 * j] : in[1][j]);
         }
         return r;
       }},
      // A rank-0 b (its gradient sums the elements it filled); the condition from the data.
      {"where",
       [](const Inputs& x) { return where(x[0].gt(x[1]), x[0], x[1]).square(); },
       {{2, 2}, {}},
       {{}, {}},
       real_dtypes,
       elementwise([](std::span<const C> a) {
         const C m = a[0].real() > a[1].real() ? a[0] : a[1];
         return m * m;
       })},
      {"clamp",
       [](const Inputs& x) { return x[0].clamp(x[1], x[2]); },
       {{2, 3}, {3}, {}},
       {{}, {-1, 0}, {0, 1}},
       real_dtypes,
       elementwise([](std::span<const C> a) {
         return C(std::min(std::max(a[0].real(), a[1].real()), a[2].real()));
       })},
      {"clamp",
       [](const Inputs& x) { return x[0].clamp(-0.5, 0.5); },
       {{4}},
       {{}},
       real_dtypes,
       elementwise([](std::span<const C> a) { return C(std::min(std::max(a[0].real(), -0.5), 0.5)); })},
  };
}

}  // namespace

TEST_CASE("selection: values, vjp and jvp of every case", "[harness]") {
  for (auto c : cases()) {
    INFO(c.op << " of shape " << format_shape(c.shapes[0]));
    c.refuses_others = false;  // other dtypes: below
    run_case(c);
  }
}

TEST_CASE("where selects: NaN, infinities and -0 come through, dtypes promote, integers and bools too",
          "[selection]") {
  auto ctx = EagerRuntime::create();
  const double nan = std::nan("");
  const auto c = T::from_tensor_in(Tensor::from_vec_col_major<bool>({3}, {true, true, false}), ctx);
  const auto a = T::from_vec_col_major_in<double>({3}, {-0.0, nan, nan}, ctx);
  const auto b = T::from_vec_col_major_in<double>({3}, {1, 2, INFINITY}, ctx);
  const auto r = values_of<double>(where(c, a, b));
  CHECK((r[0] == 0 && std::signbit(r[0])));
  CHECK(std::isnan(r[1]));
  CHECK(r[2] == INFINITY);
  const auto i = T::from_vec_col_major_in<std::int32_t>({3}, {1, 2, 3}, ctx);
  const auto l = T::from_vec_col_major_in<std::int64_t>({}, {INT64_MIN}, ctx);
  const T il = where(c, i, l);
  CHECK(il.dtype() == DType::I64);
  CHECK(values_of<std::int64_t>(il) == std::vector<std::int64_t>{1, 2, INT64_MIN});
  const T bb = where(c, c, c.logical_not());
  CHECK(bb.dtype() == DType::Bool);
  CHECK(values_of<bool>(bb) == std::vector<bool>{true, true, true});
  CHECK(where(c, i, b).dtype() == DType::F64);

  // Gradients go where each operand was chosen, summed over broadcasting, in each operand's dtype.
  const auto x = T::requires_grad_in(Tensor::from_vec_col_major<float>({3}, {1, 2, 3}), ctx);
  const auto s = T::requires_grad_in(Tensor::from_vec_col_major<double>({}, {10}), ctx);
  const auto w = T::from_vec_col_major_in<double>({3}, {1, 2, 4}, ctx);
  const T y = where(c, x, s);
  CHECK(y.dtype() == DType::F64);
  (y * w).reduce_sum().backward();
  CHECK(x.grad()->dtype() == DType::F32);
  CHECK(as_doubles(*x.grad()) == std::vector<double>{1, 2, 0});
  CHECK(as_doubles(*s.grad()) == std::vector<double>{4});
}

TEST_CASE("clamp: ties go to x, lo above hi gives hi, NaN propagates, integer bounds are whole",
          "[selection]") {
  auto ctx = EagerRuntime::create();
  const auto x = T::requires_grad_in(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}), ctx);
  const auto lo = T::requires_grad_in(Tensor::from_vec_col_major<double>({}, {2}), ctx);
  const auto hi = T::requires_grad_in(Tensor::from_vec_col_major<double>({}, {2.5}), ctx);
  const T y = x.clamp(lo, hi);
  CHECK(values_of<double>(y) == std::vector<double>{2, 2, 2.5});
  y.reduce_sum().backward();
  CHECK(as_doubles(*x.grad()) == std::vector<double>{0, 1, 0});  // x == lo at element 1: to x
  CHECK(as_doubles(*lo.grad()) == std::vector<double>{1});
  CHECK(as_doubles(*hi.grad()) == std::vector<double>{1});
  ctx->clear_grads();
  const T crossed = x.clamp(hi.scale(2), lo);  // lo = 5 > hi = 2
  CHECK(values_of<double>(crossed) == std::vector<double>{2, 2, 2});
  crossed.reduce_sum().backward();
  CHECK(as_doubles(*x.grad()) == std::vector<double>{0, 0, 0});
  CHECK(as_doubles(*lo.grad()) == std::vector<double>{3});  // hi's operand here
  CHECK(as_doubles(*hi.grad()) == std::vector<double>{0});
  const auto n = T::from_vec_col_major_in<double>({2}, {std::nan(""), -7}, ctx);
  const auto nv = values_of<double>(n.clamp(0, 1));
  CHECK(std::isnan(nv[0]));
  CHECK(nv[1] == 0);
  CHECK(std::isnan(values_of<double>(n.clamp(std::nan(""), 1))[1]));
  const auto k = T::from_vec_col_major_in<std::int32_t>({3}, {-5, 0, 7}, ctx);
  CHECK(values_of<std::int32_t>(k.clamp(-1, 3)) == std::vector<std::int32_t>{-1, 0, 3});
  CHECK(k.clamp(-1, 3).dtype() == DType::I32);
  check_refusal([&] { (void)k.clamp(0.5, 2); }, ErrorKind::InvalidArgument, "clamp",
                {"'lo' is 0.5", "i32", "[3]"});
  check_refusal([&] { (void)k.clamp(0, 3e9); }, ErrorKind::InvalidArgument, "clamp", {"'hi' is 3e+09"});
}

TEST_CASE("where refuses a non-bool condition, shapes that do not broadcast and a foreign runtime",
          "[selection][errors]") {
  auto ctx = EagerRuntime::create();
  const auto c = T::from_tensor_in(Tensor::from_vec_col_major<bool>({2}, {true, false}), ctx);
  const auto a = T::from_tensor_in(Tensor::ones({2, 3}), ctx);
  const auto b = T::from_tensor_in(Tensor::ones({3}), ctx);
  check_refusal([&] { (void)where(b, a, b); }, ErrorKind::Unsupported, "where", {"'cond'", "f64", "[3]"});
  check_refusal([&] { (void)where(c, a, b); }, ErrorKind::ShapeMismatch, "where", {"[2]", "[2, 3]"});
  auto other = EagerRuntime::create();
  const auto foreign = T::from_tensor_in(Tensor::ones({3}), other);
  CHECK(kind_of([&] { (void)where(c.reshape({2, 1}), a, foreign); }) == ErrorKind::ContextMismatch);
  CHECK(values_of<double>(where(c.reshape({2, 1}), a, b)) == std::vector<double>(6, 1.0));  // still usable
}
