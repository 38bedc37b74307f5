// tensor/tensor.hpp, views: as_strided, strides, offset, contiguity, compaction and copy-on-write.
#include <tenferro/expr.hpp>
#include <tenferro/tensor/io.hpp>
#include <tenferro/tensor/tensor.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include <catch2/catch.hpp>

#include "../errors.hpp"
#include "../printed.hpp"

#include <thread>
#include <vector>

using namespace tenferro;
using tenferro::test::kind_of;
using tenferro::test::message_of;
using tenferro::test::printed;

namespace {

// [[1, 2, 3], [4, 5, 6]] in column-major order.
Tensor two_by_three() { return Tensor::from_vec_col_major<double>({2, 3}, {1, 4, 2, 5, 3, 6}); }

std::vector<double> elements(const Tensor& t) {
  const auto s = t.as_slice<double>();
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("a compact tensor has column-major strides, offset 0 and is contiguous") {
  const Tensor t = two_by_three();
  CHECK_FALSE(t.is_view());
  CHECK(t.is_contiguous());
  CHECK(t.strides() == Strides{1, 2});
  CHECK(t.offset() == 0);
  CHECK(Tensor::zeros({}).strides().empty());
}

TEST_CASE("as_strided makes a view of the same buffer, copying nothing") {
  const Tensor t = two_by_three();
  const Tensor tr = t.as_strided({3, 2}, {2, 1}, 0);  // the transpose
  CHECK(tr.is_view());
  CHECK(tr.shares_storage_with(t));
  CHECK(tr.shape() == Shape{3, 2});
  CHECK(tr.strides() == Strides{2, 1});
  CHECK_FALSE(tr.is_contiguous());
  CHECK(tr.data<double>() == t.data<double>());
  CHECK(tr.typed<double>()(2, 0) == 3);
  CHECK(tr.typed<double>()(0, 1) == 4);
  CHECK(elements(tr) == std::vector<double>{1, 2, 3, 4, 5, 6});

  const Tensor row = t.as_strided({3}, {2}, 1);  // the second row
  CHECK(elements(row) == std::vector<double>{4, 5, 6});
  const Tensor column = t.as_strided({2}, {1}, 4);  // the last column: contiguous, read in place
  CHECK(column.is_contiguous());
  CHECK(column.as_slice<double>().data() == t.data<double>() + 4);
  CHECK(elements(column) == std::vector<double>{3, 6});
  const Tensor repeated = t.as_strided({2, 4}, {0, 1}, 2);  // broadcast: stride 0
  CHECK(elements(repeated) == std::vector<double>{2, 2, 5, 5, 3, 3, 6, 6});
  CHECK(repeated.size() == 8);
}

TEST_CASE("a view of a view counts offsets in the whole buffer") {
  const Tensor t = two_by_three();
  const Tensor row = t.as_strided({3}, {2}, 1);
  const Tensor tail = row.as_strided({2}, {2}, 3);
  CHECK(tail.shares_storage_with(t));
  CHECK(elements(tail) == std::vector<double>{5, 6});
}

TEST_CASE("a view compacts once, on first need, and materialized() is compact") {
  const Tensor tr = two_by_three().as_strided({3, 2}, {2, 1}, 0);
  const auto& a = tr.array<double>();
  CHECK(&a == &tr.array<double>());  // kept with the view
  CHECK(a.shape()[0] == 3);
  CHECK(std::vector<double>(a.data(), a.data() + a.size()) == std::vector<double>{1, 2, 3, 4, 5, 6});
  const Tensor m = tr.materialized();
  CHECK_FALSE(m.is_view());
  CHECK_FALSE(m.shares_storage_with(tr));
  CHECK(m.shape() == Shape{3, 2});
  CHECK(elements(m) == elements(tr));
  const Tensor compact = two_by_three();
  CHECK(compact.materialized().shares_storage_with(compact));
}

TEST_CASE("threads compacting one view at once get the one copy") {
  const Tensor base = Tensor::from_vec_col_major<double>({64, 64}, std::vector<double>(4096, 1.5));
  const Tensor tr = base.as_strided({64, 64}, {64, 1}, 0);
  std::vector<const double*> seen(8);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < seen.size(); ++k) {
    threads.emplace_back([&, k] {
      const Tensor mine = tr;  // copies share the view and its compact copy
      seen[k] = mine.array<double>().data();
    });
  }
  for (auto& th : threads) th.join();
  for (const double* p : seen) CHECK(p == seen[0]);
}

TEST_CASE("writing through a view gives it a buffer of its own, the viewed tensor is unchanged") {
  const Tensor t = two_by_three();
  Tensor tr = t.as_strided({3, 2}, {2, 1}, 0);
  auto typed = tr.typed<double>();
  typed.set(std::array<std::size_t, 2>{2, 1}, 60.0);
  CHECK_FALSE(typed.tensor().is_view());
  CHECK_FALSE(typed.tensor().shares_storage_with(t));
  CHECK(elements(typed.tensor()) == std::vector<double>{1, 2, 3, 4, 5, 60});
  CHECK(elements(t) == std::vector<double>{1, 4, 2, 5, 3, 6});
  tr.mutable_array<double>().data()[0] = -1;
  CHECK(elements(tr) == std::vector<double>{-1, 2, 3, 4, 5, 6});
  CHECK(elements(t) == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("clone of a view is compact and deep, printing shows the view's logical order") {
  const Tensor tr = two_by_three().as_strided({3, 2}, {2, 1}, 0);
  const Tensor c = tr.clone();
  CHECK_FALSE(c.is_view());
  CHECK(elements(c) == elements(tr));
  CHECK(printed(tr) == printed(c));
  CHECK(printed(tr) == "Tensor(dtype=f64, shape=[3, 2], values=[[1, 4], [2, 5], [3, 6]])");
}

TEST_CASE("as_strided refuses views outside the buffer, ranks that differ and oversized shapes") {
  const Tensor t = two_by_three();
  auto refused = [&](Shape shape, Strides strides, std::ptrdiff_t offset) {
    try {
      (void)t.as_strided(std::move(shape), std::move(strides), offset);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      return std::string(e.what());
    }
    FAIL("no error");
    return std::string();
  };
  CHECK_THAT(refused({3, 2}, {2, 1}, 1),
             Catch::Contains("Tensor::as_strided") &&
                 Catch::Contains("shape [3, 2] with strides [2, 1] and offset 1") &&
                 Catch::Contains("outside the buffer") && Catch::Contains("6 elements"));
  CHECK_THAT(refused({2}, {-1}, 0), Catch::Contains("outside the buffer"));
  CHECK_THAT(refused({2}, {1}, -1), Catch::Contains("outside the buffer"));
  CHECK_THAT(refused({2, 2}, {1}, 0), Catch::Contains("differ in rank"));
  CHECK_THAT(refused({std::size_t(1) << 40, std::size_t(1) << 40}, {0, 0}, 0), Catch::Contains("too many"));
  CHECK_THAT(refused({3}, {PTRDIFF_MAX / 2}, 0), Catch::Contains("outside the buffer"));
  CHECK_THAT(refused({}, {}, 6), Catch::Contains("outside the buffer"));  // rank 0: the offset alone
  CHECK_THAT(refused({}, {}, -1), Catch::Contains("outside the buffer"));
  CHECK_THAT(refused({2}, {1}, PTRDIFF_MAX), Catch::Contains("outside the buffer"));
  CHECK_THAT(refused({2}, {-1}, PTRDIFF_MIN), Catch::Contains("outside the buffer"));
  CHECK_THAT(refused({0, 4}, {100, 100}, 7), Catch::Contains("outside the buffer"));
  CHECK(t.as_strided({}, {}, 5).typed<double>()() == 6);
  // Valid edge cases: a negative stride ending at element 0, and an empty view anywhere.
  CHECK(elements(t.as_strided({6}, {-1}, 5)) == std::vector<double>{6, 3, 5, 2, 4, 1});
  CHECK(t.as_strided({0, 4}, {100, 100}, 6).size() == 0);       // an empty view may start at the end
  CHECK(elements(t) == std::vector<double>{1, 4, 2, 5, 3, 6});  // unchanged by the refusals
}

TEST_CASE("the compile-time layer reads views: contiguous ones in place, others through one copy") {
  const Tensor t = two_by_three();
  const auto tr = t.as_strided({3, 2}, {2, 1}, 0).typed<double>();
  const auto row = t.as_strided({3}, {2}, 1).typed<double>();
  const auto column = t.as_strided({2}, {1}, 4).typed<double>();
  using expr::arg;
  const auto x = arg<0>{};
  const auto y = arg<1>{};
  const auto r = expr::eval(x * y + 1.0, tr, tr);
  CHECK(std::vector<double>(r.data(), r.data() + r.size()) == std::vector<double>{2, 5, 10, 17, 26, 37});
  const auto s = expr::eval(x - y, row, t.as_strided({3}, {2}, 0).typed<double>());
  CHECK(std::vector<double>(s.data(), s.data() + s.size()) == std::vector<double>{3, 3, 3});
  CHECK(expr::eval(expr::sum(x), column) == 9.0);
  const auto g = std::get<0>(expr::grad(expr::sum(x * x), tr));
  CHECK(std::vector<double>(g.data(), g.data() + g.size()) == std::vector<double>{2, 4, 6, 8, 10, 12});
}
