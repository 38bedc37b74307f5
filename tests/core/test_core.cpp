// core/: DType, Shape helpers, Error; and the xtensor compatibility header.
#include <tenferro/core/detail/xtensor.hpp>  // first, like every xtensor include
#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>

#include <xtensor/xmath.hpp>

#include <catch2/catch.hpp>

#include <sstream>

using namespace tenferro;

TEST_CASE("dtype names, sizes and the element mapping") {
  CHECK(dtype_name(DType::F32) == "f32");
  CHECK(dtype_name(DType::F64) == "f64");
  CHECK(dtype_name(DType::I32) == "i32");
  CHECK(dtype_name(DType::I64) == "i64");
  CHECK(dtype_name(DType::Bool) == "bool");
  CHECK(dtype_name(DType::C32) == "c32");
  CHECK(dtype_name(DType::C64) == "c64");
  CHECK(dtype_size(DType::F32) == 4);
  CHECK(dtype_size(DType::F64) == 8);
  CHECK(dtype_size(DType::I32) == 4);
  CHECK(dtype_size(DType::I64) == 8);
  CHECK(dtype_size(DType::Bool) == 1);
  CHECK(dtype_size(DType::C32) == 8);
  CHECK(dtype_size(DType::C64) == 16);
  STATIC_REQUIRE(dtype_of<float> == DType::F32);
  STATIC_REQUIRE(dtype_of<double> == DType::F64);
  STATIC_REQUIRE(dtype_of<std::int32_t> == DType::I32);
  STATIC_REQUIRE(dtype_of<std::int64_t> == DType::I64);
  STATIC_REQUIRE(dtype_of<bool> == DType::Bool);
  STATIC_REQUIRE(dtype_of<std::complex<float>> == DType::C32);
  STATIC_REQUIRE(dtype_of<std::complex<double>> == DType::C64);
  STATIC_REQUIRE(!Element<char>);
  STATIC_REQUIRE(!Element<long double>);
  std::ostringstream os;
  os << DType::C64;
  CHECK(os.str() == "c64");
}

TEST_CASE("shapes print and count with overflow detection") {
  CHECK(format_shape(Shape{}) == "[]");
  CHECK(format_shape(Shape{2, 3}) == "[2, 3]");
  CHECK(checked_shape_size(Shape{}) == std::optional<std::size_t>(1));
  CHECK(checked_shape_size(Shape{2, 0, 5}) == std::optional<std::size_t>(0));
  CHECK(checked_shape_size(Shape{2, 3, 4}) == std::optional<std::size_t>(24));
  const std::size_t big = std::size_t(1) << 40;
  CHECK_FALSE(checked_shape_size(Shape{big, big}).has_value());
}

TEST_CASE("Error carries kind, op and detail and reads as prose") {
  const Error e(ErrorKind::ShapeMismatch, "add", "argument 'rhs' has shape [2] but 'lhs' has [3]");
  CHECK(e.kind() == ErrorKind::ShapeMismatch);
  CHECK(e.op() == "add");
  CHECK(std::string(e.what()) == "ShapeMismatch in add: argument 'rhs' has shape [2] but 'lhs' has [3]");
  CHECK(e.cause() == nullptr);
  CHECK(error_kind_name(ErrorKind::ContextMismatch) == "ContextMismatch");
  CHECK(error_kind_name(ErrorKind::Extension) == "Extension");
}

TEST_CASE("Error nests its cause") {
  try {
    try {
      throw std::out_of_range("slot 7");
    } catch (...) {
      Error::throw_with_cause(Error(ErrorKind::RuntimeState, "lookup", "cannot read the slot"));
    }
    FAIL("no exception");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::RuntimeState);
    REQUIRE(e.cause() != nullptr);
    CHECK_THROWS_WITH(std::rethrow_exception(e.cause()), "slot 7");
  }
}

// Regression: xtensor 0.24 + g++ 12 + C++20 gave xarray expressions an xtensor<T, 4> temporary.
TEST_CASE("xtensor compat: eval of an xarray expression keeps its rank and values") {
  xt::xarray<double> a = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
  auto twice = xt::eval(a + a);
  STATIC_REQUIRE(std::is_same_v<decltype(twice), xt::xarray<double>>);
  REQUIRE(twice.dimension() == 2);
  REQUIRE(twice.shape()[0] == 2);
  REQUIRE(twice.shape()[1] == 3);
  CHECK(twice(1, 2) == 12.0);
  CHECK(twice(0, 1) == 4.0);

  xt::xarray<double> v = {1.0, 2.0, 3.5};
  auto s = xt::sum(v, xt::evaluation_strategy::immediate);
  CHECK(s() == 6.5);
  auto col = xt::sum(a, {0}, xt::evaluation_strategy::immediate);
  REQUIRE(col.dimension() == 1);
  CHECK(col(2) == 9.0);
}
