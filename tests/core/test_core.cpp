// core/: DType, Shape helpers, Error, the block pool, streaming stores and the store rule; and the
// xtensor compatibility header.
#include <tenferro/core/detail/block_pool.hpp>
#include <tenferro/core/streaming.hpp>
#include <tenferro/core/detail/xtensor.hpp>  // first, like every xtensor include
#include <tenferro/core/dtype.hpp>
#include <tenferro/core/error.hpp>
#include <tenferro/core/shape.hpp>

#include <xtensor/xmath.hpp>

#include <catch2/catch.hpp>

#include "../errors.hpp"
#include "../settings.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

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

TEST_CASE("shapes print and count with one size rule") {
  CHECK(format_shape(Shape{}) == "[]");
  CHECK(format_shape(Shape{2, 3}) == "[2, 3]");
  CHECK(format_shape(Shape{0, 10, 18446744073709551615u}) == "[0, 10, 18446744073709551615]");
  CHECK(checked_shape_size(Shape{}) == std::optional<std::size_t>(1));
  CHECK(checked_shape_size(Shape{2, 0, 5}) == std::optional<std::size_t>(0));
  CHECK(checked_shape_size(Shape{2, 3, 4}) == std::optional<std::size_t>(24));
  const std::size_t big = std::size_t(1) << 40;
  CHECK_FALSE(checked_shape_size(Shape{big, big}).has_value());
  // One rule whatever the order of the extents: the non-zero ones must multiply to at most 2^63 - 1.
  CHECK_FALSE(checked_shape_size(Shape{0, big, big}).has_value());
  CHECK_FALSE(checked_shape_size(Shape{big, 0, big}).has_value());
  CHECK_FALSE(checked_shape_size(Shape{big, big, 0}).has_value());
  CHECK_FALSE(checked_shape_size(Shape{std::size_t(1) << 63}).has_value());
  CHECK(checked_shape_size(Shape{(std::size_t(1) << 63) - 1}) == std::optional<std::size_t>(max_shape_size));
  CHECK(checked_shape_size(Shape{0, std::size_t(1) << 62}) == std::optional<std::size_t>(0));
}

TEST_CASE("promote_types: the table for every pair of dtypes, symmetric") {
  constexpr DType F32 = DType::F32, F64 = DType::F64, I32 = DType::I32, I64 = DType::I64, B = DType::Bool,
                  C32 = DType::C32, C64 = DType::C64;
  const std::array<DType, 7> all{F32, F64, I32, I64, B, C32, C64};
  // want[i][j] = promote_types(all[i], all[j]), written out (PyTorch 1.13's torch.promote_types).
  const std::array<std::array<DType, 7>, 7> want{{
      {F32, F64, F32, F32, F32, C32, C64},  // f32
      {F64, F64, F64, F64, F64, C64, C64},  // f64
      {F32, F64, I32, I64, I32, C32, C64},  // i32
      {F32, F64, I64, I64, I64, C32, C64},  // i64
      {F32, F64, I32, I64, B, C32, C64},    // bool
      {C32, C64, C32, C32, C32, C32, C64},  // c32
      {C64, C64, C64, C64, C64, C64, C64},  // c64
  }};
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (std::size_t j = 0; j < all.size(); ++j) {
      INFO(all[i] << " with " << all[j]);
      CHECK(promote_types(all[i], all[j]) == want[i][j]);
    }
  }
  // The examples, at compile time.
  STATIC_REQUIRE(promote_types(I64, F64) == F64);
  STATIC_REQUIRE(promote_types(I64, C64) == C64);
  STATIC_REQUIRE(promote_types(F32, F64) == F64);
  STATIC_REQUIRE(promote_types(I64, F32) == F32);
  STATIC_REQUIRE(promote_types(C32, F64) == C64);
}

TEST_CASE("broadcast_shapes: the one rule, with the axis of a conflict") {
  CHECK(broadcast_shapes(Shape{2, 3}, Shape{3}) == Shape{2, 3});
  CHECK(broadcast_shapes(Shape{}, Shape{4, 1}) == Shape{4, 1});
  CHECK(broadcast_shapes(Shape{4, 1}, Shape{1, 5}) == Shape{4, 5});
  CHECK(broadcast_shapes(Shape{0}, Shape{1}) == Shape{0});
  std::size_t axis = 99;
  CHECK_FALSE(broadcast_shapes(Shape{2, 3}, Shape{7, 2, 4}, &axis));
  CHECK(axis == 2);
  CHECK_FALSE(broadcast_shapes(Shape{0}, Shape{2}));
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

TEST_CASE("throw_error builds the message from texts and numbers and shapes") {
  const Shape shape{10, 0, 123};
  const std::string name = "'x'";
  try {
    throw_error(
        ErrorKind::Validation, std::string_view("reduce"),
        {"argument ", name, " (input ", std::size_t{12}, ") has shape ", shape, ", axis ", std::size_t{0},
         " of ", std::span<const std::size_t>(shape.data(), 1), "; rank-0: ", Shape{}});
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Validation);
    CHECK(e.op() == "reduce");
    CHECK(e.detail() == "argument 'x' (input 12) has shape [10, 0, 123], axis 0 of [10]; rank-0: []");
    CHECK(std::string(e.what()) ==
          "Validation in reduce: argument 'x' (input 12) has shape [10, 0, 123], axis 0 of [10]; rank-0: []");
  }
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

TEST_CASE("block_pool reuses a thread's freed blocks, caps its lists and survives cross-thread frees") {
  using detail::block_pool;
  const std::size_t before = block_pool::cached_blocks();
  std::vector<void*> blocks;
  for (int k = 0; k < 100; ++k) blocks.push_back(block_pool::allocate(200));
  const std::set<void*> first(blocks.begin(), blocks.end());
  REQUIRE(first.size() == 100);
  for (void* p : blocks) block_pool::deallocate(p, 200);
  if (TENFERRO_BLOCK_POOL) {
    CHECK(block_pool::cached_blocks() == before + 100);
    // The same size class (193 to 256 bytes) is served from the cache, most recent first.
    for (auto& p : blocks) p = block_pool::allocate(256);
    CHECK(std::set<void*>(blocks.begin(), blocks.end()) == first);
    CHECK(block_pool::cached_blocks() == before);
  } else {  // built with AddressSanitizer: every block goes back to operator delete
    CHECK(block_pool::cached_blocks() == 0);
    for (auto& p : blocks) p = block_pool::allocate(256);
  }
  for (void* p : blocks) block_pool::deallocate(p, 256);

  // A thread keeps at most `keep` blocks of a class.
  std::vector<void*> many;
  for (std::uint32_t k = 0; k < block_pool::keep + 500; ++k) many.push_back(block_pool::allocate(64));
  for (void* p : many) block_pool::deallocate(p, 64);
  CHECK(block_pool::cached_blocks() <= before + 100 + block_pool::keep);

  // Blocks allocated here and freed by a thread that then exits (its lists are released).
  std::vector<void*> moved;
  for (int k = 0; k < 50; ++k) moved.push_back(block_pool::allocate(300));
  std::size_t cached_there = 0;
  std::thread([&] {
    for (void* p : moved) block_pool::deallocate(p, 300);
    cached_there = block_pool::cached_blocks();
  }).join();
  CHECK(cached_there == (TENFERRO_BLOCK_POOL ? 50u : 0u));
  // Requests above the largest class bypass the lists.
  void* big = block_pool::allocate(4096);
  block_pool::deallocate(big, 4096);
  CHECK(block_pool::cached_blocks() <= before + 100 + block_pool::keep);
}

TEST_CASE("stream_copy copies any length to any address, streaming whole aligned lines") {
  // Source and destination at every offset within a cache line, lengths around whole lines.
  alignas(64) double src[64 + 16];
  for (std::size_t i = 0; i < std::size(src); ++i) src[i] = 0.5 + double(i);
  for (std::size_t from = 0; from < 8; ++from) {
    for (std::size_t to = 0; to < 8; ++to) {
      for (const std::size_t n : {0, 1, 7, 8, 9, 16, 63, 64}) {
        alignas(64) double dst[64 + 16];
        std::fill(std::begin(dst), std::end(dst), -1.0);
        tenferro::detail::stream_copy(dst + to, src + from, n);
        tenferro::detail::stream_fence();
        INFO("from " << from << " to " << to << " n " << n);
        for (std::size_t i = 0; i < std::size(dst); ++i) {
          const bool inside = i >= to && i < to + n;
          REQUIRE(dst[i] == (inside ? src[from + i - to] : -1.0));
        }
      }
    }
  }
  // Floats: 16 to a line.
  alignas(64) float f[32], g[32];
  for (std::size_t i = 0; i < 32; ++i) f[i] = float(i) * 0.25f;
  tenferro::detail::stream_copy(g, f, 32);
  tenferro::detail::stream_fence();
  CHECK(std::equal(f, f + 32, g));
}

TEST_CASE("the store rule: the last-level cache, the threshold's sources and the bytes compared") {
  using test::environment;
  using test::store_threshold;
  const std::size_t llc = last_level_cache_bytes();
  CHECK(llc >= (std::size_t(256) << 10));
  if (!std::filesystem::exists("/sys/devices/system/cpu/cpu0/cache/index0")) {
    CHECK(llc <= (std::size_t(32) << 20));  // a CPUID size, capped
  }
  {
    const environment unset("TENFERRO_STREAM_THRESHOLD", nullptr);
    const store_threshold fresh(std::nullopt);
    CHECK(streaming_store_threshold() == llc);
  }
  {
    const environment set("TENFERRO_STREAM_THRESHOLD", "1000");
    const store_threshold fresh(std::nullopt);
    CHECK(streaming_store_threshold() == 1000);
    set_streaming_store_threshold(77);  // a value set wins over the environment
    CHECK(streaming_store_threshold() == 77);
    set_streaming_store_threshold(0);
    CHECK(streaming_store_threshold() == 0);
  }
  for (const char* bad : {"", "abc", "-1", "1e6", " 5", "4M", "18446744073709551615"}) {
    INFO("TENFERRO_STREAM_THRESHOLD='" << bad << "'");
    const environment malformed("TENFERRO_STREAM_THRESHOLD", bad);
    const store_threshold fresh(std::nullopt);
    const std::string m = test::message_of([] { (void)streaming_store_threshold(); }, ErrorKind::InvalidArgument);
    CHECK_THAT(m, Catch::Matchers::Contains("streaming_store_threshold") &&
                      Catch::Matchers::Contains("TENFERRO_STREAM_THRESHOLD is '" + std::string(bad) + "'"));
  }
  const store_threshold hundred(100);
  // Streams when the bytes of all the arrays together exceed the threshold.
  CHECK_FALSE(detail::streams_outputs(100, 1));
  CHECK(detail::streams_outputs(101, 1));
  CHECK_FALSE(detail::streams_outputs(50, 2));
  CHECK(detail::streams_outputs(51, 2));
  CHECK_FALSE(detail::streams_outputs(1000, 0));
  CHECK(detail::streams_outputs(SIZE_MAX / 2 + 1, 2));  // more than SIZE_MAX bytes
}
