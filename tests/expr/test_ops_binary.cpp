// Every binary op, and compositions, through the derivative-checking harness.
#include "gradcheck.hpp"

using namespace tenferro::expr;
using gradcheck::check_op;
using gradcheck::domain;

namespace {
const auto [x, y] = placeholders<2>();
constexpr domain anywhere{-3.0, 3.0};
constexpr domain positive{0.1, 3.0};
constexpr domain away_from_zero{0.5, 3.0, true};
}  // namespace

TEST_CASE("add") { check_op("add", x + y, std::array{anywhere, anywhere}); }
TEST_CASE("sub") { check_op("sub", x - y, std::array{anywhere, anywhere}); }
TEST_CASE("mul") { check_op("mul", x * y, std::array{anywhere, anywhere}); }
TEST_CASE("div") { check_op("div", x / y, std::array{anywhere, away_from_zero}); }
TEST_CASE("pow") { check_op("pow", pow(x, y), std::array{positive, domain{-2.0, 2.0}}); }
TEST_CASE("maximum") { check_op("maximum", maximum(x, y), std::array{anywhere, anywhere}); }
TEST_CASE("minimum") { check_op("minimum", minimum(x, y), std::array{anywhere, anywhere}); }
TEST_CASE("composition") {
  check_op("sin(x) * y + exp(x * y)", sin(x) * y + exp(x * y),
           std::array{domain{-1.0, 1.0}, domain{-1.0, 1.0}});
  check_op("sigmoid(x * y) / (1 + square(y))", sigmoid(x * y) / (1.0 + square(y)),
           std::array{anywhere, anywhere});
}
