// Every unary op through the derivative-checking harness.
#include "gradcheck.hpp"

using namespace tenferro::expr;
using gradcheck::check_op;
using gradcheck::domain;

namespace {
const auto [x] = placeholders<1>();
constexpr domain anywhere{-3.0, 3.0};
constexpr domain positive{0.1, 4.0};
constexpr domain away_from_zero{0.05, 3.0, true};
}  // namespace

TEST_CASE("neg") { check_op("neg", -x, std::array{anywhere}); }
TEST_CASE("exp") { check_op("exp", exp(x), std::array{anywhere}); }
TEST_CASE("log") { check_op("log", log(x), std::array{positive}); }
TEST_CASE("sqrt") { check_op("sqrt", sqrt(x), std::array{positive}); }
TEST_CASE("rsqrt") { check_op("rsqrt", rsqrt(x), std::array{positive}); }
TEST_CASE("sin") { check_op("sin", sin(x), std::array{anywhere}); }
TEST_CASE("cos") { check_op("cos", cos(x), std::array{anywhere}); }
TEST_CASE("tan") { check_op("tan", tan(x), std::array{domain{-1.2, 1.2}}); }
TEST_CASE("tanh") { check_op("tanh", tanh(x), std::array{anywhere}); }
TEST_CASE("sinh") { check_op("sinh", sinh(x), std::array{anywhere}); }
TEST_CASE("cosh") { check_op("cosh", cosh(x), std::array{anywhere}); }
TEST_CASE("abs") { check_op("abs", abs(x), std::array{away_from_zero}); }
TEST_CASE("sign") { check_op("sign", sign(x), std::array{away_from_zero}); }
TEST_CASE("square") { check_op("square", square(x), std::array{anywhere}); }
TEST_CASE("log1p") { check_op("log1p", log1p(x), std::array{domain{-0.9, 3.0}}); }
TEST_CASE("expm1") { check_op("expm1", expm1(x), std::array{anywhere}); }
TEST_CASE("sigmoid") { check_op("sigmoid", sigmoid(x), std::array{domain{-6.0, 6.0}}); }
TEST_CASE("pow with a constant exponent") { check_op("pow(x, 2.5)", pow(x, 2.5), std::array{positive}); }
TEST_CASE("scalar mixes") { check_op("2 * x / 3 - 1", 2.0 * x / 3 - 1, std::array{anywhere}); }
TEST_CASE("stop_gradient: the value flows, the derivative is 0") {
  check_op("stop_gradient", stop_gradient(x) * x, std::array{anywhere}, {.finite_differences = false});
  STATIC_REQUIRE(std::is_same_v<decltype(derivative(stop_gradient(x), x)), zero>);
}
