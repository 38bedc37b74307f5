// Expressions as types: derivatives built and simplified at compile time, printing, traits.
#include <tenferro/expr.hpp>

#include <catch2/catch.hpp>

using namespace tenferro::expr;

namespace {
const auto [x, y] = placeholders<2>();
using X = arg<0>;
using Y = arg<1>;
}  // namespace

TEST_CASE("placeholders are distinct types") {
  STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(x)>, X>);
  STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(y)>, Y>);
  STATIC_REQUIRE(Expression<X>);
  STATIC_REQUIRE(!Expression<double>);
}

TEST_CASE("an expression is a type, building it does no work") {
  auto f = sin(x) * y + exp(x * y);
  STATIC_REQUIRE(std::is_same_v<decltype(f), binary<ops::add, binary<ops::mul, unary<ops::sin, X>, Y>,
                                                    unary<ops::exp, binary<ops::mul, X, Y>>>>);
  STATIC_REQUIRE(std::is_empty_v<decltype(x * y)>);  // placeholders carry no data
  STATIC_REQUIRE(sizeof(2.0 * x) == sizeof(double));
  CHECK(to_string(f) == "sin(x0) * x1 + exp(x0 * x1)");
}

TEST_CASE("only subtrees with constants can differ between occurrences of one type") {
  // The fused loop looks at run time only whether such subtrees agree (eval/kernel.hpp).
  STATIC_REQUIRE(!holds_values<std::remove_cvref_t<decltype(sin(x))>>);
  STATIC_REQUIRE(!holds_values<std::remove_cvref_t<decltype(exp(x * y) * cos(x))>>);
  STATIC_REQUIRE(holds_values<std::remove_cvref_t<decltype(sin(2.0 * x))>>);
  STATIC_REQUIRE(holds_values<std::remove_cvref_t<decltype(exp(x * y) + 1.0)>>);
}

TEST_CASE("derivatives are simplified types") {
  auto f = sin(x) * y + exp(x * y);
  CHECK(to_string(derivative(f, x)) == "cos(x0) * x1 + exp(x0 * x1) * x1");
  CHECK(to_string(derivative(f, y)) == "sin(x0) + exp(x0 * x1) * x0");
  STATIC_REQUIRE(std::is_same_v<decltype(derivative(y * y, x)), zero>);
  STATIC_REQUIRE(std::is_same_v<decltype(derivative(x, x)), one>);
  STATIC_REQUIRE(std::is_same_v<decltype(derivative(x + y, x)), one>);
  STATIC_REQUIRE(std::is_same_v<decltype(derivative(x * y, x)), Y>);
  STATIC_REQUIRE(std::is_same_v<decltype(derivative(sum(x), x)), one>);
  STATIC_REQUIRE(std::is_same_v<decltype(derivative(stop_gradient(x) * 3.0, x)), zero>);
  STATIC_REQUIRE(std::is_same_v<decltype(derivative(sign(x), x)), zero>);
  CHECK(to_string(derivative(x - y, y)) == "-1");
  CHECK(to_string(derivative(-x, x)) == "-1");
  CHECK(to_string(derivative(x / y, y)) == "-(x0 / x1 / x1)");
  CHECK(to_string(derivative(maximum(x, y), x)) == "[x0 >= x1]");
  CHECK(to_string(derivative(minimum(x, y), y)) == "[x0 > x1]");
  CHECK(to_string(derivative(log(x), x)) == "1 / x0");
}

TEST_CASE("derivatives of derivatives") {
  auto d2 = derivative(derivative(x * x * x, x), x);
  CHECK(to_string(d2) == "x0 + x0 + x0 + x0 + x0 + x0");
  STATIC_REQUIRE(std::is_same_v<decltype(derivative(derivative(x * y, x), x)), zero>);
  CHECK(to_string(derivative(derivative(sin(x), x), x)) == "-sin(x0)");
  CHECK(to_string(derivative(derivative(exp(2.0 * x), x), x)) == "4 * exp(2 * x0)");  // constants folded
}

TEST_CASE("reductions are scalar subexpressions") {
  auto lse = log_sum_exp(x);
  CHECK(to_string(lse) == "log(sum(exp(x0 - stop_gradient(max(x0))))) + stop_gradient(max(x0))");
  CHECK(to_string(derivative(lse, x)) ==
        "exp(x0 - stop_gradient(max(x0))) * 1 / sum(exp(x0 - stop_gradient(max(x0))))");
  CHECK(to_string(mean(x)) == "sum(x0) / n");
  CHECK(to_string(dot(x, y)) == "sum(x0 * x1)");
  // d/dx_i of sum_j x_j * sum(x) = 2 sum(x): the broadcast scalar receives the summed cotangent.
  CHECK(to_string(derivative(sum(x * sum(x)), x)) == "sum(x0) + sum(x0)");
  STATIC_REQUIRE(is_scalar<decltype(lse)>);
  STATIC_REQUIRE(!is_scalar<decltype(x * sum(x))>);
  STATIC_REQUIRE(level<decltype(x)> == 0);
  STATIC_REQUIRE(level<decltype(sum(x))> == 1);
  STATIC_REQUIRE(level<decltype(sum(square(x - mean(x))))> == 2);
  STATIC_REQUIRE(level<decltype(lse)> == 2);
  STATIC_REQUIRE(reduction_count<decltype(lse)> == 3);
  STATIC_REQUIRE(arity<decltype(x * 2.0)> == 1);
  STATIC_REQUIRE(arity<decltype(y * 2.0)> == 2);
}

TEST_CASE("the evaluation plan is known at compile time") {
  auto [a, mu, sigma] = placeholders<3>();
  auto normal_log_pdf = sum(-0.5 * square((a - mu) / sigma) - log(sigma));
  STATIC_REQUIRE(value_and_grad_passes<decltype(sum(square(a))), 1> == 1);
  STATIC_REQUIRE(value_and_grad_passes<decltype(sum(sin(x) * y + exp(x * y))), 2> == 1);
  STATIC_REQUIRE(value_and_grad_passes<decltype(normal_log_pdf), 3> == 1);
  // max; sum while the gradient's exp(x - m) is stored (then scaled in place, reading no input)
  STATIC_REQUIRE(value_and_grad_passes<decltype(log_sum_exp(x)), 1> == 2);
  STATIC_REQUIRE(value_and_grad_passes<decltype(sum(square(x - mean(x)))), 1> ==
                 3);  // sum(x); two sums of it; the field
}

TEST_CASE("to_string parenthesizes by precedence") {
  CHECK(to_string(x - (y + 1.0)) == "x0 - (x1 + 1)");
  CHECK(to_string((x - y) * 2.5) == "(x0 - x1) * 2.5");
  CHECK(to_string(x / (y * x)) == "x0 / (x1 * x0)");
  CHECK(to_string(x * -y) == "x0 * (-x1)");
  CHECK(to_string(-(x + y)) == "-(x0 + x1)");
  CHECK(to_string(pow(x, 2)) == "pow(x0, 2)");
}

TEST_CASE("the value and the gradients share their costly subtrees") {
  using namespace tenferro::expr::detail;
  auto f = sin(x) * y + exp(x * y);
  using shared = shared_subtrees_t<decltype(f), decltype(derivative(f, x)), decltype(derivative(f, y))>;
  // sin(x) (value and d/dy), cos(x) (paired with sin: one sincos), exp(x * y) (all three)
  STATIC_REQUIRE(std::is_same_v<shared, type_list<unary<ops::sin, X>, unary<ops::cos, X>,
                                                  unary<ops::exp, binary<ops::mul, X, Y>>>>);
  STATIC_REQUIRE(std::is_same_v<shared_subtrees_t<decltype(x * y + 1.0)>, type_list<>>);
}
