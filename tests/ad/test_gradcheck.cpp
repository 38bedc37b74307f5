// tenferro::gradcheck (ad/gradcheck.hpp): it passes correct derivatives entry by entry, finds and
// names a wrong entry (real and complex), reads integer inputs as constants, and refuses what it
// cannot check. (Every op's test runs it too, through the op harness.)
#include "../errors.hpp"
#include "eager_testing.hpp"

#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <sstream>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using T = EagerTensor;
using V = std::vector<EagerTensor>;
using C = std::complex<double>;

std::string text(const GradcheckReport& r) {
  std::ostringstream os;
  os << r;
  return os.str();
}

}  // namespace

TEST_CASE("gradcheck passes correct derivatives and counts every Jacobian entry", "[gradcheck]") {
  auto ctx = EagerRuntime::create();
  const auto x =
      ctx->constant_from(Tensor::from_vec_col_major<double>({2, 3}, {0.5, -1, 2, 0.25, 1.5, -0.75}));
  const auto y = ctx->constant_from(Tensor::from_vec_col_major<double>({3}, {0.3, -0.2, 1.1}));
  // f(x, y)[i] = sum_j x[i, j] sin(y[j]): 2 outputs, 6 + 3 input elements.
  auto f = [](const V& in) { return (in[0] * in[1].sin().reshape({1, 3})).reduce_sum({1}); };
  const GradcheckReport r = gradcheck(f, {x, y});
  INFO(r);
  CHECK(r.passed);
  CHECK(static_cast<bool>(r));
  // (6 + 3) input elements x 2 outputs, for vjp and jvp, in both rule forms.
  CHECK(r.entries == 9 * 2 * 2 * 2);
  CHECK(r.worst.excess <= 1);
  CHECK(text(r).find("gradcheck passed: 72 entries") == 0);

  GradcheckOptions vjp_only;
  vjp_only.check_jvp = false;
  vjp_only.kernel_rules = false;
  CHECK(gradcheck(f, {x, y}, vjp_only).entries == 9 * 2);
}

TEST_CASE("gradcheck finds and names a wrong derivative", "[gradcheck]") {
  auto ctx = EagerRuntime::create();
  const auto x = ctx->constant_from(Tensor::from_vec_col_major<double>({2, 2}, {0.5, -3, 2, 1}));
  // x * detach(x): the runtime's derivative is x (the detached factor is a constant), the true one 2x.
  auto f = [](const V& in) { return in[0] * in[0].detach(); };
  const GradcheckReport r = gradcheck(f, {x});
  INFO(r);
  CHECK_FALSE(r.passed);
  CHECK_FALSE(static_cast<bool>(r));
  // The worst entry is on the diagonal, at the largest |x|: element [1, 0] (-3), first found by the
  // recorded jvp.
  CHECK(r.worst.transform == "jvp");
  CHECK(r.worst.input == 0);
  CHECK(r.worst.index == std::vector<std::size_t>{1, 0});
  CHECK(r.worst.output_index == std::vector<std::size_t>{1, 0});
  CHECK(r.worst.analytic == Approx(-3).epsilon(1e-12));
  CHECK(r.worst.numeric == Approx(-6).epsilon(1e-8));
  CHECK(r.worst.excess == Approx(3 / (1e-6 + 6e-6)).epsilon(1e-4));
  const std::string t = text(r);
  INFO(t);
  CHECK(t.find("gradcheck FAILED: 64 entries; worst: jvp, input 0 element [1, 0], output element [1, 0]: "
               "analytic -3, numeric -6") == 0);
}

TEST_CASE("gradcheck moves complex inputs along both parts and reads both parts of the output",
          "[gradcheck]") {
  auto ctx = EagerRuntime::create();
  const auto z =
      ctx->constant_from(Tensor::from_vec_col_major<C>({3}, {C(0.5, -1), C(2, 0.25), C(-1.5, 0.75)}));
  // |z|^2 summed (real output; gradient 2z) and z^2 (complex output, holomorphic): both correct.
  for (const auto& f : std::vector<GradcheckFn>{
           [](const V& in) { return (in[0] * in[0].conj()).real().reduce_sum(); },
           [](const V& in) { return in[0] * in[0]; },
       }) {
    const GradcheckReport r = gradcheck(f, {z});
    INFO(r);
    CHECK(r.passed);
  }
  CHECK(gradcheck([](const V& in) { return in[0] * in[0]; }, {z}).entries == (3 * 2) * (3 * 2) * 4);

  // Re z + detach(Im z): the imaginary part's derivative is missing.
  const GradcheckReport r = gradcheck([](const V& in) { return in[0].real() + in[0].imag().detach(); }, {z});
  INFO(r);
  CHECK_FALSE(r.passed);
  CHECK(r.worst.input_imag);
  CHECK_FALSE(r.worst.output_imag);
  CHECK(r.worst.index == r.worst.output_index);
  CHECK(r.worst.analytic == 0);
  CHECK(r.worst.numeric == Approx(1).epsilon(1e-8));
  // (Every element's imaginary part is as wrong; the differences' rounding picks the worst.)
  CHECK(text(r).find("(imaginary part), output element [" + std::to_string(r.worst.index[0]) +
                     "]: analytic 0, numeric 1") != std::string::npos);
}

TEST_CASE("gradcheck checks f32 functions against f64 differences and passes integers through",
          "[gradcheck]") {
  auto ctx = EagerRuntime::create();
  const auto x = ctx->constant_from(Tensor::from_vec_col_major<float>({4}, {0.5F, -1.25F, 2, 0.75F}));
  const auto n = ctx->constant_from(Tensor::from_vec_col_major<std::int64_t>({4}, {3, -2, 0, 7}));
  // tanh(x) * n: n is read as it is (an integer input is not differentiated).
  auto f = [](const V& in) { return in[0].tanh() * in[1].to(in[0].dtype()); };
  const GradcheckReport r = gradcheck(f, {x, n});
  INFO(r);
  CHECK(r.passed);
  CHECK(r.entries == 4 * 4 * 4);  // x's entries only
  // The same in the inputs' own dtype needs a step f32 can resolve.
  GradcheckOptions own;
  own.wide_differences = false;
  own.step = 1e-2;
  own.atol = own.rtol = 1e-2;
  CHECK(gradcheck(f, {x, n}, own).passed);
  // A rank-0 input and output.
  const auto s = ctx->constant_from(Tensor::from_vec_col_major<double>({}, {0.7}));
  CHECK(gradcheck([](const V& in) { return in[0].exp().sin(); }, {s}).entries == 4);
}

TEST_CASE("gradcheck refuses what it cannot check, and the runtime stays usable", "[gradcheck]") {
  auto ctx = EagerRuntime::create();
  auto other = EagerRuntime::create();
  const auto x = ctx->constant_from(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}));
  const auto y = other->constant_from(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}));
  auto sum = [](const V& in) { return in[0].reduce_sum(); };
  CHECK(kind_of([&] { gradcheck(sum, {}); }) == ErrorKind::InvalidArgument);
  CHECK(message_of([&] { gradcheck(sum, {}); }).find("gradcheck") != std::string::npos);
  const std::string integer =
      message_of([&] { gradcheck([](const V& in) { return in[0].argmax(0); }, {x}); });
  CHECK(integer.find("gradcheck") != std::string::npos);
  CHECK(integer.find("i64") != std::string::npos);
  CHECK(kind_of([&] { gradcheck(sum, {x, y}); }) == ErrorKind::ContextMismatch);
  {
    NoGradGuard guard;
    CHECK(message_of([&] { gradcheck(sum, {x}); }).find("no_grad") != std::string::npos);
  }
  for (const double step : {0.0, -1e-6, std::nan("")}) {
    GradcheckOptions bad;
    bad.step = step;
    CHECK(message_of([&] { gradcheck(sum, {x}, bad); }).find("'step'") != std::string::npos);
  }
  // A function whose output changes shape when its input moves is not one function of it.
  const std::string changing = message_of([&] {
    gradcheck(
        [](const V& in) {
          return in[0].dtype() == DType::F64 ? in[0] : in[0].reshape({1, 3});
        },
        {ctx->constant_from(Tensor::from_vec_col_major<float>({3}, {1, 2, 3}))});
  });
  CHECK(changing.find("[1, 3]") != std::string::npos);
  // An exception of the function propagates unchanged.
  CHECK(kind_of([&] { gradcheck([](const V& in) { return in[0].reshape({2}); }, {x}); }) ==
        ErrorKind::ShapeMismatch);
  CHECK(gradcheck(sum, {x}).passed);
}
