// Reductions and scans beyond the five reduce_ ops (ad/ops/reductions.hpp): reduce_sum_squares,
// reduce_logsumexp, cumsum as cases of the op harness (values against a plain reference, vjp and
// jvp against central differences), plus log-sum-exp at the edges of the floating range, argmax and
// argmin (ties, NaN, integers), integer running sums that wrap, and the refusals.
#include "../op_harness.hpp"

#include <cmath>
#include <limits>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using T = EagerTensor;
const std::vector<DType>& R = real_dtypes;
const std::vector<DType>& RC = real_or_complex_dtypes;

DType real_of(DType d) { return d == DType::C32 ? DType::F32 : d == DType::C64 ? DType::F64 : d; }

// f over the elements of slot (i, k) of a [pre, n, post] column-major array, folding along n.
template <class F>
std::vector<C> along(const std::vector<C>& x, std::size_t pre, std::size_t n, std::size_t post, F f) {
  std::vector<C> out;
  for (std::size_t k = 0; k < post; ++k) {
    for (std::size_t i = 0; i < pre; ++i) {
      std::vector<C> slot(n);
      for (std::size_t j = 0; j < n; ++j) slot[j] = x[i + pre * (j + n * k)];
      out.push_back(f(slot));
    }
  }
  return out;
}

C sum_squares(const std::vector<C>& v) {
  C s = 0;
  for (const C z : v) s += std::norm(z);
  return s;
}
C logsumexp(const std::vector<C>& v) {
  C s = 0;
  for (const C z : v) s += std::exp(z);
  return std::log(s);
}

// Running sums along the middle axis of [pre, n, post].
Reference running(std::size_t pre, std::size_t n, std::size_t post) {
  return [=](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
    std::vector<C> r(in[0].size());
    for (std::size_t k = 0; k < post; ++k)
      for (std::size_t i = 0; i < pre; ++i) {
        C s = 0;
        for (std::size_t j = 0; j < n; ++j) r[i + pre * (j + n * k)] = s += in[0][i + pre * (j + n * k)];
      }
    return r;
  };
}

op_case taking_every_dtype(op_case c) {  // integer forms are checked exactly below
  c.refuses_others = false;
  return c;
}

std::vector<op_case> cases() {
  return {
      op_case{"reduce_sum_squares",
              [](const Inputs& x) { return x[0].reduce_sum_squares(); },
              {{3, 4}},
              {{}},
              RC,
              [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
                return std::vector<C>{sum_squares(in[0])};
              }}
          .giving(real_of),
      op_case{"reduce_sum_squares",
              [](const Inputs& x) { return x[0].reduce_sum_squares({1}); },
              {{3, 4}},
              {{}},
              RC,
              [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
                return along(in[0], 3, 4, 1, sum_squares);
              }}
          .giving(real_of),
      {"reduce_logsumexp",
       [](const Inputs& x) { return x[0].reduce_logsumexp(); },
       {{3, 4}},
       {{}},
       R,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         return std::vector<C>{logsumexp(in[0])};
       }},
      {"reduce_logsumexp",
       [](const Inputs& x) { return x[0].reduce_logsumexp({1}); },
       {{2, 5, 3}},
       {{}},
       R,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         return along(in[0], 2, 5, 3, logsumexp);
       }},
      {"reduce_logsumexp",
       [](const Inputs& x) {
         return x[0].reduce_logsumexp({0, 2}).sin();
       },
       {{2, 5, 3}},
       {{}},
       R,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         std::vector<C> r;
         for (std::size_t j = 0; j < 5; ++j) {
           C s = 0;
           for (std::size_t i = 0; i < 2; ++i)
             for (std::size_t k = 0; k < 3; ++k) s += std::exp(in[0][i + 2 * (j + 5 * k)]);
           r.push_back(std::sin(std::log(s)));
         }
         return r;
       }},
      {"cumsum", [](const Inputs& x) { return x[0].cumsum(1); }, {{3, 4, 2}}, {{}}, RC, running(3, 4, 2)},
      {"cumsum",
       [](const Inputs& x) { return x[0].cumsum(0).square(); },
       {{5, 2}},
       {{}},
       RC,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>& s) {
         auto r = running(1, 5, 2)(in, s);
         for (C& z : r) z *= z;
         return r;
       }},
  };
}

}  // namespace

TEST_CASE("reductions and scans: values, vjp and jvp of every case", "[harness]") {
  for (const auto& c : cases()) {
    INFO(c.op << " of shape " << format_shape(c.shapes[0]));
    run_case(taking_every_dtype(c));
  }
}

TEST_CASE("reduce_logsumexp is stable at the edges of the floating range, and its gradient is the softmax",
          "[reductions]") {
  auto ctx = EagerRuntime::create();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const auto x = T::requires_grad_in(Tensor::from_vec_col_major<double>({2}, {1000, 1000}), ctx);
  const auto l = x.reduce_logsumexp();
  CHECK(values_of<double>(l)[0] == Approx(1000 + std::log(2.0)).epsilon(1e-15));
  l.backward();
  CHECK(as_doubles(*x.grad()) == std::vector<double>{0.5, 0.5});
  // -1000 and 0 in f32: exp(-1000) underflows to 0 harmlessly.
  const auto f = T::from_tensor_in(Tensor::from_vec_col_major<float>({2}, {-1000.0f, 0.0f}), ctx);
  CHECK(values_of<float>(f.reduce_logsumexp()) == std::vector<float>{0.0f});
  // Rows [-inf, -inf], [inf, 1], [nan, 1] of a [3, 2] tensor (column-major).
  const auto e =
      T::from_tensor_in(Tensor::from_vec_col_major<double>({3, 2}, {-inf, inf, nan, -inf, 1, 1}), ctx);
  const auto r = values_of<double>(e.reduce_logsumexp({1}));
  CHECK(r[0] == -inf);
  CHECK(r[1] == inf);
  CHECK(std::isnan(r[2]));
  // An empty slot sums to 0: its log-sum-exp is -inf.
  CHECK(values_of<double>(T::from_tensor_in(Tensor::zeros({2, 0}), ctx).reduce_logsumexp({1})) ==
        std::vector<double>{-inf, -inf});
  // Softmax of [0, log 3] along the axis: [1/4, 3/4].
  const auto s = T::requires_grad_in(Tensor::from_vec_col_major<double>({2}, {0, std::log(3.0)}), ctx);
  const auto g = as_doubles(ctx->grad(s.reduce_logsumexp(), s).materialized());
  CHECK(g[0] == Approx(0.25).epsilon(1e-15));
  CHECK(g[1] == Approx(0.75).epsilon(1e-15));
  const auto i = T::from_vec_col_major_in<std::int64_t>({2}, {1, 2}, ctx);
  const std::string msg = message_of([&] { (void)i.reduce_logsumexp(); });
  CHECK(msg.rfind("Unsupported in reduce_logsumexp", 0) == 0);
  CHECK(msg.find("i64") != std::string::npos);
  CHECK(kind_of([&] { (void)x.reduce_logsumexp({1}); }) == ErrorKind::Validation);
}

TEST_CASE("argmax and argmin: i64 indices, the first on ties, NaN as the extremum, no gradient",
          "[reductions]") {
  auto ctx = EagerRuntime::create();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // [[1, 3, 3], [2, nan, 0]] column-major.
  const auto x = T::requires_grad_in(Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, nan, 3, 0}), ctx);
  const auto am = x.argmax(1);
  CHECK(am.dtype() == DType::I64);
  CHECK_FALSE(am.tracks_grad());
  CHECK(values_of<std::int64_t>(am) == std::vector<std::int64_t>{1, 1});
  CHECK(values_of<std::int64_t>(x.argmin(1)) == std::vector<std::int64_t>{0, 1});
  CHECK(values_of<std::int64_t>(x.argmax(0)) == std::vector<std::int64_t>{1, 1, 0});
  CHECK(values_of<std::int64_t>(x.argmin(0)) == std::vector<std::int64_t>{0, 1, 1});
  const std::int64_t lo = std::numeric_limits<std::int64_t>::lowest();
  const auto i = T::from_vec_col_major_in<std::int64_t>({4}, {5, lo, 9, lo}, ctx);
  CHECK(values_of<std::int64_t>(i.argmin(0)) == std::vector<std::int64_t>{1});
  CHECK(values_of<std::int64_t>(i.argmax(0)) == std::vector<std::int64_t>{2});
  const auto b = T::from_tensor_in(Tensor::from_vec_col_major<bool>({3}, {false, true, true}), ctx);
  CHECK(values_of<std::int64_t>(b.argmax(0)) == std::vector<std::int64_t>{1});
  // Refusals: the op, the axis or dtype, the shape.
  std::string msg = message_of([&] { (void)x.argmax(2); });
  CHECK(msg.rfind("Validation in argmax", 0) == 0);
  CHECK(msg.find("axis 2") != std::string::npos);
  CHECK(msg.find("[2, 3]") != std::string::npos);
  msg = message_of([&] { (void)T::from_tensor_in(Tensor::zeros({2}, DType::C64), ctx).argmin(0); });
  CHECK(msg.rfind("Unsupported in argmin", 0) == 0);
  CHECK(msg.find("c64") != std::string::npos);
  msg = message_of([&] { (void)T::from_tensor_in(Tensor::zeros({2, 0}), ctx).argmax(1); });
  CHECK(msg.rfind("InvalidArgument in argmax", 0) == 0);
  CHECK(msg.find("[2, 0]") != std::string::npos);
}

TEST_CASE("cumsum: integers wrap, bools count in i64, the cotangent sums the other way", "[reductions]") {
  auto ctx = EagerRuntime::create();
  const std::int32_t hi = std::numeric_limits<std::int32_t>::max(),
                     lo = std::numeric_limits<std::int32_t>::lowest();
  const auto i = T::from_vec_col_major_in<std::int32_t>({3}, {hi, 1, 1}, ctx);
  CHECK(values_of<std::int32_t>(i.cumsum(0)) == std::vector<std::int32_t>{hi, lo, lo + 1});
  const auto b = T::from_tensor_in(Tensor::from_vec_col_major<bool>({2, 2}, {true, true, false, true}), ctx);
  CHECK(values_of<std::int64_t>(b.cumsum(1)) == std::vector<std::int64_t>{1, 1, 1, 2});
  // L = sum(w * cumsum(x)): dL/dx_j = sum over i >= j of w_i.
  const auto x = T::requires_grad_in(Tensor::from_vec_col_major<double>({3}, {0.5, -1, 2}), ctx);
  const auto w = T::from_vec_col_major_in<double>({3}, {1, 2, 3}, ctx);
  const auto c = x.cumsum(0);
  CHECK(values_of<double>(c) == std::vector<double>{0.5, -0.5, 1.5});
  (c * w).reduce_sum().backward();
  CHECK(as_doubles(*x.grad()) == std::vector<double>{6, 5, 3});
  const std::string msg = message_of([&] { (void)x.cumsum(1); });
  CHECK(msg.rfind("Validation in cumsum", 0) == 0);
  CHECK(msg.find("[3]") != std::string::npos);
}
