// tensor/tensor.hpp, views: as_strided, strides, offset, contiguity, compaction and copy-on-write.
#include <tenferro/expr.hpp>
#include <tenferro/tensor/io.hpp>
#include <tenferro/tensor/tensor.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include <catch2/catch.hpp>

#include "../errors.hpp"
#include "../printed.hpp"

#include <tbb/task_arena.h>

#include <cmath>
#include <complex>
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

TEST_CASE("compacting a transposed view walks tiles and gives every element in its place") {
  // [37, 70, 3] (partial tiles on both tiled axes, an outer axis) viewed as [70, 37, 3] (axes 0 and
  // 1 swapped: the view's contiguous axis is its second), also with axis 1 reversed.
  const Shape s{37, 70, 3};
  std::vector<double> v(37 * 70 * 3);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  const Tensor t = Tensor::from_vec_col_major<double>(s, v);
  const Tensor swapped = t.as_strided({70, 37, 3}, {37, 1, 37 * 70}, 0);
  const Tensor flipped = t.as_strided({70, 37, 3}, {37, -1, 37 * 70}, 36);
  const Tensor a = swapped.materialized(), b = flipped.materialized();
  // The same in f32 (its tiles go through the local array, f64's through registers with AVX-512).
  const Tensor f = Tensor::from_vec_col_major<float>(s, std::vector<float>(v.begin(), v.end()));
  const Tensor fa = f.as_strided({70, 37, 3}, {37, 1, 37 * 70}, 0).materialized();
  for (std::size_t k = 0; k < 3; ++k) {
    for (std::size_t j = 0; j < 37; ++j) {
      for (std::size_t i = 0; i < 70; ++i) {
        const std::size_t at = i + 70 * (j + 37 * k);
        INFO(i << ", " << j << ", " << k);
        REQUIRE(a.as_slice<double>()[at] == v[j + 37 * (i + 70 * k)]);
        REQUIRE(fa.as_slice<float>()[at] == static_cast<float>(v[j + 37 * (i + 70 * k)]));
        REQUIRE(b.as_slice<double>()[at] == v[(36 - j) + 37 * (i + 70 * k)]);
      }
    }
  }
}

TEST_CASE("compacting broadcasts and column slices copies whole runs, every element in its place") {
  // Axis 0 repeated (stride 0: a row broadcast down [5, 4, 3]), every axis repeated (one element
  // broadcast), and axis 0 contiguous with every other column skipped (a slice), also in complex.
  std::vector<double> v(8 * 4 * 3);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * static_cast<double>(i) - 7;
  const Tensor t = Tensor::from_vec_col_major<double>({8, 4, 3}, v);
  const Tensor rows = t.as_strided({5, 4, 3}, {0, 8, 32}, 2).materialized();
  const Tensor one = t.as_strided({6, 2}, {0, 0}, 9).materialized();
  const Tensor cols = t.as_strided({8, 2, 3}, {1, 16, 32}, 0).materialized();
  std::vector<std::complex<double>> z(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) z[i] = {v[i], -v[i]};
  const Tensor zt = Tensor::from_vec_col_major<std::complex<double>>({8, 4, 3}, z);
  const Tensor zrows = zt.as_strided({5, 4, 3}, {0, 8, 32}, 2).materialized();
  for (std::size_t k = 0; k < 3; ++k) {
    for (std::size_t j = 0; j < 4; ++j) {
      for (std::size_t i = 0; i < 5; ++i) {
        INFO(i << ", " << j << ", " << k);
        REQUIRE(rows.as_slice<double>()[i + 5 * (j + 4 * k)] == v[2 + 8 * j + 32 * k]);
        REQUIRE(zrows.as_slice<std::complex<double>>()[i + 5 * (j + 4 * k)] == z[2 + 8 * j + 32 * k]);
      }
    }
    for (std::size_t j = 0; j < 2; ++j) {
      for (std::size_t i = 0; i < 8; ++i) {
        REQUIRE(cols.as_slice<double>()[i + 8 * (j + 2 * k)] == v[i + 16 * j + 32 * k]);
      }
    }
  }
  CHECK(elements(one) == std::vector<double>(12, v[9]));
}

TEST_CASE("a view of the whole buffer in its own layout is the buffer itself: nothing to copy") {
  const Tensor t = two_by_three();
  const Tensor same = t.as_strided({2, 3}, {1, 2}, 0);
  CHECK_FALSE(same.is_view());
  CHECK(same.shares_storage_with(t));
  CHECK(same.materialized().shares_storage_with(t));
  CHECK(elements(same) == elements(t));
  // Through another view and back; an axis of extent 1 steps by any stride.
  const Tensor back = t.as_strided({6}, {1}, 0).as_strided({2, 3}, {1, 2}, 0);
  CHECK_FALSE(back.is_view());
  CHECK(elements(back) == elements(t));
  const Tensor unit = Tensor::from_vec_col_major<double>({3, 1}, {1, 2, 3}).as_strided({3, 1}, {1, 7}, 0);
  CHECK_FALSE(unit.is_view());
  CHECK(elements(unit) == std::vector<double>{1, 2, 3});
  // Not the whole buffer in its layout: still views.
  CHECK(t.as_strided({3, 2}, {2, 1}, 0).is_view());  // the transpose
  CHECK(t.as_strided({6}, {1}, 0).is_view());        // another shape
  CHECK(t.as_strided({2, 2}, {1, 2}, 2).is_view());  // an offset
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

TEST_CASE("the compile-time layer reads views: contiguous ones in place, others chunk by chunk") {
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

TEST_CASE(
    "strided views, partial broadcasts and converted inputs are gathered chunk by chunk, never copied "
    "whole") {
  // m x k, filled with distinct values; its transpose as a view and as a compact copy.
  const std::size_t m = 701, k = 613;  // 429713 elements: chunks of 4096 and a partial tail
  std::vector<double> v(m * k);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.001 * double(i)) + 1.5;
  const Tensor a = Tensor::from_vec_col_major<double>({m, k}, v);
  const Tensor at = a.as_strided({k, m}, {std::ptrdiff_t(m), 1}, 0);  // the transpose, a view
  const Tensor at_copy = at.materialized();
  REQUIRE(at.is_view());
  const Tensor b = Tensor::from_vec_col_major<double>({k, m}, std::vector<double>(v.rbegin(), v.rend()));
  // A reversed column (negative stride) broadcast along the second axis: [k, 1] against [k, m].
  const Tensor col = a.as_strided({k, 1}, {-1, 1}, std::ptrdiff_t(k - 1));
  const Tensor col_copy = col.materialized();
  std::vector<float> vf(k);
  for (std::size_t i = 0; i < k; ++i) vf[i] = float(i) * 0.25f;
  const Tensor f32_col = Tensor::from_vec_col_major<float>({k, 1}, vf);  // converted, broadcast
  const Tensor f32_col_as_f64 =
      Tensor::from_vec_col_major<double>({k, 1}, std::vector<double>(vf.begin(), vf.end()));

  const auto [x, y, z, w] = expr::placeholders<4>();
  const auto e = x * y + exp(-z) * w;
  const auto f = expr::sum(sin(x) * y + z * w);
  const auto bytes = m * k * sizeof(double);
  clear_buffer_cache();
  reset_buffer_peak();
  const std::size_t before = buffer_cache_stats().live_bytes;
  const auto r =
      expr::eval(e, at.typed<double>(), b.typed<double>(), col.typed<double>(), f32_col.typed<float>());
  // Only the result was allocated at full size (no copy of the view or of a broadcast input).
  CHECK(buffer_cache_stats().peak_live_bytes - before <= bytes + (std::size_t(1) << 20));
  const auto want = expr::eval(e, at_copy.typed<double>(), b.typed<double>(), col_copy.typed<double>(),
                               f32_col_as_f64.typed<double>());
  REQUIRE(r.size() == want.size());
  CHECK(std::equal(r.data(), r.data() + r.size(), want.data()));  // bit for bit
  CHECK(r(5, 7) == at_copy.typed<double>()(5, 7) * b.typed<double>()(5, 7) +
                       std::exp(-col_copy.typed<double>()(5, 0)) * double(vf[5]));
  // A reduction and gradients, on one thread and on two: the same bits, and the same as compact inputs.
  auto run = [&](int threads, const Tensor& xt, const Tensor& zt) {
    tbb::task_arena arena(threads);
    return arena.execute([&] {
      return expr::value_and_grad(f, xt.typed<double>(), b.typed<double>(), zt.typed<double>(), 2.0);
    });
  };
  const auto one = run(1, at, col);
  const auto two = run(2, at, col);
  const auto compact = run(2, at_copy, col_copy);
  CHECK(one.value == two.value);
  CHECK(one.value == compact.value);
  const auto& gx = std::get<0>(one.grad);
  const auto& gx_compact = std::get<0>(compact.grad);
  CHECK(std::equal(gx.data(), gx.data() + gx.size(), gx_compact.data()));
  const auto& gz = std::get<2>(two.grad);  // summed back to [k, 1]: 2 per column
  REQUIRE(gz.shape().size() == 2);
  CHECK(gz.shape()[0] == k);
  CHECK(gz.shape()[1] == 1);
  CHECK(gz(3, 0) == 2.0 * double(m));
  // A row [1, m] against [k, m]: its gradient sums each column of the field (a run along the
  // broadcast axis, summed with SIMD), against a plain loop.
  const Tensor row = Tensor::from_vec_col_major<double>({1, m}, std::vector<double>(m, 0.5));
  const auto grow = std::get<1>(expr::grad(expr::sum(x * y), at.typed<double>(), row.typed<double>()));
  REQUIRE(grow.size() == m);
  for (const std::size_t j : {std::size_t(0), std::size_t(17), m - 1}) {
    double want_j = 0;
    for (std::size_t i = 0; i < k; ++i) want_j += at_copy.typed<double>()(i, j);
    CHECK(grow(0, j) == Approx(want_j).epsilon(1e-12));
  }
  // The element-by-element oracle reads the gathers too.
  CHECK(
      expr::detail::eval_with<expr::detail::reference_policy>(expr::sum(x * y), at.typed<double>(),
                                                              col.typed<double>()) ==
      Approx(expr::eval(expr::sum(x * y), at_copy.typed<double>(), col_copy.typed<double>())).epsilon(1e-12));
}
