// tensor/: Tensor, TypedTensor, printing and the buffer cache behind them.
#include <tenferro/tensor/io.hpp>
#include <tenferro/tensor/tensor.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include <catch2/catch.hpp>

#include "../errors.hpp"
#include "../printed.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <vector>

using namespace tenferro;
using tenferro::test::kind_of;

using tenferro::test::printed;

TEST_CASE("from_vec_col_major stores column-major data") {
  const Tensor t = Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(t.dtype() == DType::F64);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.rank() == 2);
  CHECK(t.size() == 6);
  const auto s = t.as_slice<double>();
  CHECK(std::vector<double>(s.begin(), s.end()) == std::vector<double>{1, 2, 3, 4, 5, 6});
  const auto typed = t.typed<double>();
  CHECK(typed(0, 0) == 1.0);
  CHECK(typed(1, 0) == 2.0);  // first index varies fastest
  CHECK(typed(0, 1) == 3.0);
  CHECK(typed(1, 2) == 6.0);
  // The xtensor view agrees: (i, j) is the same element.
  CHECK(t.array<double>()(1, 2) == 6.0);
  CHECK(t.array<double>()(0, 1) == 3.0);
}

TEST_CASE("from_vec_col_major for every dtype") {
  CHECK(Tensor::from_vec_col_major<float>({2}, {1.5f, 2.5f}).as_slice<float>()[1] == 2.5f);
  CHECK(Tensor::from_vec_col_major<std::int32_t>({3}, {7, 8, 9}).as_slice<std::int32_t>()[2] == 9);
  CHECK(Tensor::from_vec_col_major<std::int64_t>({1}, {1LL << 40}).as_slice<std::int64_t>()[0] ==
        (1LL << 40));
  CHECK(Tensor::from_vec_col_major<bool>({2}, {true, false}).as_slice<bool>()[0]);
  const auto c = Tensor::from_vec_col_major<std::complex<double>>({1}, {{1.0, -2.0}});
  CHECK(c.dtype() == DType::C64);
  CHECK(c.as_slice<std::complex<double>>()[0] == std::complex<double>(1.0, -2.0));
  CHECK(Tensor::from_vec_col_major<std::complex<float>>({1}, {{3.0f, 4.0f}}).dtype() == DType::C32);
}

TEST_CASE("rank-0 scalars and empty tensors") {
  const Tensor s = Tensor::from_vec_col_major<double>({}, {4.25});
  CHECK(s.rank() == 0);
  CHECK(s.size() == 1);
  CHECK(s.shape().empty());
  CHECK(s.as_slice<double>()[0] == 4.25);
  const Tensor e = Tensor::from_vec_col_major<float>({0, 3}, std::vector<float>{});
  CHECK(e.size() == 0);
  CHECK(e.shape() == Shape{0, 3});
  CHECK(e.as_slice<float>().empty());
  const Tensor d;
  CHECK(d.dtype() == DType::F64);
  CHECK(d.shape() == Shape{0});
}

TEST_CASE("from_vec_col_major rejects a data size that differs from the shape") {
  try {
    Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, 4, 5});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::ShapeMismatch);
    CHECK(
        std::string(e.what()) ==
        "ShapeMismatch in Tensor::from_vec_col_major: argument 'data' has 5 elements, shape [2, 3] needs 6");
  }
  CHECK(kind_of([] { Tensor::from_vec_col_major<double>({}, {1.0, 2.0}); }) == ErrorKind::ShapeMismatch);
  const std::size_t big = std::size_t(1) << 40;
  CHECK(kind_of([&] { Tensor::zeros({big, big}); }) == ErrorKind::InvalidArgument);
}

TEST_CASE("zeros, ones and full in every dtype") {
  const Tensor z = Tensor::zeros({2, 2}, DType::F32);
  CHECK(z.dtype() == DType::F32);
  for (float v : z.as_slice<float>()) CHECK(v == 0.0f);
  const Tensor o = Tensor::ones({3}, DType::I32);
  for (std::int32_t v : o.as_slice<std::int32_t>()) CHECK(v == 1);
  const Tensor f = Tensor::full({2, 1, 2}, -2.5);
  CHECK(f.dtype() == DType::F64);
  CHECK(f.shape() == Shape{2, 1, 2});
  for (double v : f.as_slice<double>()) CHECK(v == -2.5);
  CHECK(Tensor::full({2}, 3.0, DType::I64).as_slice<std::int64_t>()[1] == 3);
  CHECK(Tensor::full({1}, 2.0, DType::Bool).as_slice<bool>()[0]);
  CHECK_FALSE(Tensor::zeros({1}, DType::Bool).as_slice<bool>()[0]);
  CHECK(Tensor::ones({1}, DType::C32).as_slice<std::complex<float>>()[0] == std::complex<float>(1, 0));
  CHECK(Tensor::full({}, 5.0, DType::C64).as_slice<std::complex<double>>()[0] == std::complex<double>(5, 0));
  CHECK(Tensor::zeros({}).rank() == 0);
}

TEST_CASE("as_slice, array and typed reject the wrong element type") {
  const Tensor t = Tensor::ones({2, 3}, DType::F32);
  try {
    (void)t.as_slice<double>();
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::DtypeMismatch);
    const std::string what = e.what();
    CHECK(what.find("f64") != std::string::npos);
    CHECK(what.find("f32") != std::string::npos);
    CHECK(what.find("[2, 3]") != std::string::npos);
  }
  CHECK(kind_of([&] { (void)t.array<std::int32_t>(); }) == ErrorKind::DtypeMismatch);
  CHECK(kind_of([&] { (void)t.typed<double>(); }) == ErrorKind::DtypeMismatch);
}

TEST_CASE("copies share the buffer, writes are copy-on-write, clone is deep") {
  Tensor a = Tensor::from_vec_col_major<double>({3}, {1, 2, 3});
  Tensor b = a;
  CHECK(b.shares_storage_with(a));
  CHECK(b.as_slice<double>().data() == a.as_slice<double>().data());
  b.mutable_array<double>()(0) = 10.0;
  CHECK(a.as_slice<double>()[0] == 1.0);
  CHECK(b.as_slice<double>()[0] == 10.0);
  CHECK_FALSE(b.shares_storage_with(a));
  // An unshared buffer is written in place.
  const double* before = b.as_slice<double>().data();
  b.mutable_array<double>()(1) = 20.0;
  CHECK(b.as_slice<double>().data() == before);
  const Tensor c = a.clone();
  CHECK_FALSE(c.shares_storage_with(a));
  CHECK(c.as_slice<double>()[2] == 3.0);
}

TEST_CASE("extents view the shape, and for_overwrite makes a tensor of any dtype and shape to fill") {
  const Tensor a = Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto e = a.extents();
  REQUIRE(e.size() == 2);
  CHECK(e[0] == 2);
  CHECK(e[1] == 3);
  CHECK(Tensor::from_vec_col_major<float>({}, {1.0f}).extents().empty());

  Tensor w = Tensor::for_overwrite<float>(e);
  CHECK(w.dtype() == DType::F32);
  CHECK(w.shape() == Shape{2, 3});
  CHECK(w.size() == 6);
  auto& arr = w.mutable_array<float>();
  for (std::size_t k = 0; k < arr.size(); ++k) arr.data()[k] = static_cast<float>(k);
  CHECK(w.typed<float>()(1, 2) == 5.0f);
  const Tensor v = Tensor::for_overwrite<std::int64_t>(std::vector<std::size_t>{4});
  CHECK(v.dtype() == DType::I64);
  CHECK(v.shape() == Shape{4});
  CHECK(Tensor::for_overwrite<double>(std::vector<std::size_t>{}).rank() == 0);
  const std::size_t huge = std::size_t(1) << 40;
  CHECK(kind_of([&] {
          (void)Tensor::for_overwrite<double>(std::vector<std::size_t>{huge, huge});
        }) == ErrorKind::InvalidArgument);
}

TEST_CASE("the typed view is the storage itself, no copy") {
  const Tensor t = Tensor::from_vec_col_major<float>({2, 2}, {1, 2, 3, 4});
  CHECK(t.array<float>().data() == t.as_slice<float>().data());
  const TypedTensor<float> typed = t.typed<float>();
  CHECK(typed.array().data() == t.as_slice<float>().data());
  CHECK(typed.tensor().shares_storage_with(t));
}

TEST_CASE("TypedTensor element access by multi-index") {
  auto t = TypedTensor<double>::from_vec_col_major({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(t.dtype() == DType::F64);
  CHECK(t.rank() == 3);
  // offset = i + 2 j + 6 k
  CHECK(t(1, 2, 1) == 11.0);
  CHECK(t(0, 1, 1) == 8.0);
  const std::size_t index[] = {1, 1, 0};
  CHECK(t.at(index) == 3.0);
  const Tensor shared = t.tensor();
  t.set(index, -1.0);
  CHECK(t(1, 1, 0) == -1.0);
  CHECK(shared.typed<double>()(1, 1, 0) == 3.0);  // copy-on-write
  try {
    (void)t(2, 0, 0);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Validation);
    CHECK(std::string(e.what()).find("index 2 on axis 0") != std::string::npos);
    CHECK(std::string(e.what()).find("[2, 3, 2]") != std::string::npos);
  }
  CHECK(kind_of([&] { (void)t(0, 0); }) == ErrorKind::Validation);
  auto s = TypedTensor<float>::from_vec_col_major({}, {7.0f});
  CHECK(s() == 7.0f);
}

TEST_CASE("printing shows dtype, shape and values by logical index") {
  CHECK(printed(Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, 4, 5, 6})) ==
        "Tensor(dtype=f64, shape=[2, 3], values=[[1, 3, 5], [2, 4, 6]])");
  CHECK(printed(Tensor::from_vec_col_major<float>({}, {2.5f})) == "Tensor(dtype=f32, shape=[], values=2.5)");
  CHECK(printed(Tensor::from_vec_col_major<bool>({2}, {true, false})) ==
        "Tensor(dtype=bool, shape=[2], values=[true, false])");
  CHECK(printed(Tensor::from_vec_col_major<std::complex<double>>({1}, {{1.0, -2.0}})) ==
        "Tensor(dtype=c64, shape=[1], values=[1-2i])");
  CHECK(printed(Tensor::zeros({0}, DType::I32)) == "Tensor(dtype=i32, shape=[0], values=[])");
  std::vector<std::int64_t> many(2000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<std::int64_t>(i);
  CHECK(printed(Tensor::from_vec_col_major<std::int64_t>({2000}, many)) ==
        "Tensor(dtype=i64, shape=[2000], values=[0, 1, 2, ..., 1997, 1998, 1999])");
  std::ostringstream os;
  os << TypedTensor<std::int32_t>::from_vec_col_major({1, 2}, {3, 4});
  CHECK(os.str() == "Tensor(dtype=i32, shape=[1, 2], values=[[3, 4]])");
}
