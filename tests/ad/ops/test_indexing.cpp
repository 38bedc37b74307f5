// Indexing (ad/ops/indexing.hpp): index_select, take_rows / take_cols / take_block, gather and
// scatter_add as cases of the op harness (values against the definition, every Jacobian entry by
// gradcheck, in f32, f64, c32 and c64; repeated indices, negative ones), plus integer and bool
// values, wrapping, and the refusals naming the index, its position and the bound.
#include "../op_harness.hpp"

#include <cstdint>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using T = EagerTensor;
using I = std::vector<std::size_t>;
const std::vector<DType>& RC = real_or_complex_dtypes;

T indices(const T& like, const Shape& s, std::vector<std::int64_t> v) {
  return T::from_tensor_in(Tensor::from_vec_col_major<std::int64_t>(s, std::move(v)), like.context());
}

// The index tensor [4, 2] of the scatter_add case (column-major), and its updates' targets.
const std::vector<std::int64_t> scatter_rows{0, 2, 0, -1, 1, 1, 1, 0};

std::vector<op_case> cases() {
  return {
      // Rows 2, 3 (as -1), 0, 2 of a [4, 3]: row 2 twice, so its gradient adds.
      {"index_select",
       [](const Inputs& x) {
         return x[0].index_select(0, {2, -1, 0, 2});
       },
       {{4, 3}},
       {{}},
       RC,
       picked({4, 3},
              [](I o) -> Source {
                const std::size_t row[] = {2, 3, 0, 2};
                return std::pair{0, I{row[o[0]], o[1]}};
              })},
      {"index_select",
       [](const Inputs& x) { return x[0].index_select(1, indices(x[0], {1}, {1})).sin(); },
       {{2, 3, 2}},
       {{}},
       RC,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         std::vector<C> r;
         for (std::size_t k = 0; k < 2; ++k)
           for (std::size_t i = 0; i < 2; ++i) r.push_back(std::sin(in[0][i + 2 * 1 + 6 * k]));
         return r;
       }},
      {"take_block",
       [](const Inputs& x) {
         return x[0].take_block({0, 2}, {1, -1});
       },
       {{3, 3}},
       {{}},
       RC,
       picked({2, 2},
              [](I o) -> Source {
                return std::pair{0, I{2 * o[0], 1 + o[1]}};
              })},
      // gather along axis 1 of [2, 4]: out(i, j) = x(i, idx(i, j)).
      {"gather",
       [](const Inputs& x) {
         return x[0].gather(1, indices(x[0], {2, 3}, {3, 0, -1, 1, 0, 0}));
       },
       {{2, 4}},
       {{}},
       RC,
       picked({2, 3},
              [](I o) -> Source {
                const std::size_t idx[2][3] = {{3, 3, 0}, {0, 1, 0}};
                return std::pair{0, I{o[0], idx[o[0]][o[1]]}};
              })},
      // x [3, 2] plus updates [4, 2] added at rows scatter_rows (row 0 and row 1 hit twice).
      {"scatter_add",
       [](const Inputs& x) {
         return x[0].scatter_add(0, indices(x[0], {4, 2}, scatter_rows), x[1]);
       },
       {{3, 2}, {4, 2}},
       {{}, {}},
       RC,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         std::vector<C> r = in[0];
         for (std::size_t k = 0; k < 8; ++k) {
           const std::int64_t row = scatter_rows[k] < 0 ? scatter_rows[k] + 3 : scatter_rows[k];
           r[static_cast<std::size_t>(row) + 3 * (k / 4)] += in[1][k];
         }
         return r;
       }},
  };
}

}  // namespace

TEST_CASE("indexing: values, vjp and jvp of every case in f32, f64, c32 and c64", "[harness]") {
  for (auto c : cases()) {
    INFO(c.op << " of shape " << format_shape(c.shapes[0]));
    c.refuses_others = false;  // other dtypes: below
    run_case(c);
  }
}

TEST_CASE("indexing moves integers and bools, scatter_add wraps and adds repeats", "[indexing]") {
  auto ctx = EagerRuntime::create();
  const auto x =
      T::from_vec_col_major_in<std::int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}, ctx);  // [[1, 3, 5], [2, 4, 6]]
  CHECK(values_of<std::int32_t>(x.take_rows({1})) == std::vector<std::int32_t>{2, 4, 6});
  CHECK(values_of<std::int32_t>(x.take_cols({-1, 0, 0})) == std::vector<std::int32_t>{5, 6, 1, 2, 1, 2});
  CHECK(values_of<std::int32_t>(x.take_block({1, 0}, {2})) == std::vector<std::int32_t>{6, 5});
  CHECK(x.index_select(1, std::vector<std::int64_t>{}).shape() == Shape{2, 0});
  const auto g = x.gather(0, T::from_vec_col_major_in<std::int64_t>({1, 3}, {1, 0, 1}, ctx));
  CHECK(values_of<std::int32_t>(g) == std::vector<std::int32_t>{2, 3, 6});
  const auto big = T::from_vec_col_major_in<std::int32_t>({2}, {INT32_MAX, 0}, ctx);
  const auto at = T::from_vec_col_major_in<std::int64_t>({3}, {0, 1, 0}, ctx);
  const auto ones = T::from_vec_col_major_in<std::int32_t>({3}, {1, 7, 1}, ctx);
  CHECK(values_of<std::int32_t>(big.scatter_add(0, at, ones)) == std::vector<std::int32_t>{INT32_MIN + 1, 7});
  CHECK(values_of<std::int32_t>(big) == std::vector<std::int32_t>{INT32_MAX, 0});  // unchanged
  const auto flags = T::from_tensor_in(Tensor::from_vec_col_major<bool>({3}, {true, false, true}), ctx);
  CHECK(values_of<bool>(flags.index_select(0, {1, 2})) == std::vector<bool>{false, true});
  // scatter_add promotes: an f64 update of an i32 tensor gives f64.
  const auto half = T::from_vec_col_major_in<double>({3}, {0.5, 0.25, 0.5}, ctx);
  CHECK(values_of<double>(big.scatter_add(0, at, half)) == std::vector<double>{2147483648.0, 0.25});
  // The gradient of index_select adds over repeats; of scatter_add's updates it gathers.
  const auto w = T::requires_grad_in(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}), ctx);
  const auto c = T::from_vec_col_major_in<double>({4}, {10, 20, 30, 40}, ctx);
  (w.index_select(0, {2, 0, 2, -3}) * c).reduce_sum().backward();
  CHECK(as_doubles(*w.grad()) == std::vector<double>{60, 0, 40});
  const auto u = T::requires_grad_in(Tensor::from_vec_col_major<double>({3}, {1, 1, 1}), ctx);
  (w.detach().scatter_add(0, at, u) * c.slice({0}, {3}, {1})).reduce_sum().backward();
  CHECK(as_doubles(*u.grad()) == std::vector<double>{10, 20, 10});
}

TEST_CASE("indexing refuses bad indices and shapes, naming the index, its position and the bound",
          "[indexing][errors]") {
  auto ctx = EagerRuntime::create();
  const auto x = T::from_tensor_in(Tensor::ones({2, 3}), ctx);
  auto idx = [&](const Shape& s, std::vector<std::int64_t> v) {
    return T::from_tensor_in(Tensor::from_vec_col_major<std::int64_t>(s, std::move(v)), ctx);
  };
  check_refusal(
      [&] {
        (void)x.index_select(1, {0, 3});
      },
      ErrorKind::Validation, "index_select",
      {"index 3 at position 1", "axis 1 of extent 3", "-3 to 2", "[2, 3]"});
  check_refusal([&] { (void)x.take_rows({-3}); }, ErrorKind::Validation, "index_select",
                {"index -3 at position 0", "extent 2"});
  check_refusal([&] { (void)x.index_select(2, {0}); }, ErrorKind::Validation, "index_select",
                {"axis 2", "rank 2"});
  check_refusal(
      [&] {
        (void)x.index_select(0, idx({1, 1}, {0}));
      },
      ErrorKind::Validation, "index_select", {"rank mismatch", "[1, 1]"});
  const auto i32 = T::from_vec_col_major_in<std::int32_t>({1}, {0}, ctx);
  check_refusal([&] { (void)x.index_select(0, i32); }, ErrorKind::Validation, "index_select", {"i32", "i64"});
  check_refusal(
      [&] {
        (void)x.gather(1, idx({2, 2}, {0, 1, 2, 5}));
      },
      ErrorKind::Validation, "gather", {"index 5 at position [1, 1]", "extent 3"});
  check_refusal(
      [&] {
        (void)x.gather(0, idx({2}, {0, 1}));
      },
      ErrorKind::Validation, "gather", {"rank mismatch", "[2]", "[2, 3]"});
  check_refusal(
      [&] {
        (void)x.gather(0, idx({1, 2}, {0, 1}));
      },
      ErrorKind::ShapeMismatch, "gather", {"[1, 2]", "[2, 3]", "axis 1"});
  const auto up = T::from_tensor_in(Tensor::ones({1, 2}), ctx);
  check_refusal(
      [&] {
        (void)x.scatter_add(0, idx({1, 3}, {0, 1, 0}), up);
      },
      ErrorKind::ShapeMismatch, "scatter_add", {"'updates' (shape [1, 2]", "[1, 3]"});
  check_refusal(
      [&] {
        (void)x.scatter_add(0, idx({1, 3}, {0, 2, 0}), T::from_tensor_in(Tensor::ones({1, 3}), ctx));
      },
      ErrorKind::Validation, "scatter_add", {"index 2 at position [0, 1]", "extent 2"});
  const auto flags = T::from_tensor_in(Tensor::from_vec_col_major<bool>({2}, {true, false}), ctx);
  check_refusal([&] { (void)flags.scatter_add(0, idx({1}, {0}), flags.slice({0}, {1}, {1})); },
                ErrorKind::Unsupported, "scatter_add", {"bool"});
  auto other = EagerRuntime::create();
  CHECK(kind_of([&] {
          (void)x.gather(0, T::from_vec_col_major_in<std::int64_t>({1, 3}, {0, 0, 0}, other));
        }) == ErrorKind::ContextMismatch);
  CHECK(values_of<double>(x.take_rows({1})) == std::vector<double>(3, 1.0));  // still usable
}
