// Cutting and padding (ad/ops/slicing.hpp): slice, dynamic_slice, pad, reverse, squeeze, unsqueeze as cases
// of the op harness (values against the definition, vjp and jvp against central differences, in f32, f64, c32
// and c64), plus known values in every dtype, the views they make, and the refusals.
#include "../op_harness.hpp"

#include <cstdint>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using T = EagerTensor;
const std::vector<DType>& RC = real_or_complex_dtypes;

// out[o] = in[source(o)] over an output shape (nullopt: a zero).
template <class F>
Reference gathered(Shape out, F source) {
  return [=](const std::vector<std::vector<C>>& in, const std::vector<Shape>& s) {
    std::vector<C> r;
    for (std::size_t o = 0; o < checked_shape_size(out).value(); ++o) {
      const auto at = source(index_of(o, out));
      r.push_back(at ? in[0][position_of(*at, s[0])] : C(0));
    }
    return r;
  };
}

using Index = std::optional<std::vector<std::size_t>>;

std::vector<op_case> cases() {
  return {
      // [5, 4], rows 1, 3 and columns 0, 2.
      {"slice",
       [](const Inputs& x) {
         return x[0].slice({1, 0}, {5, 3}, {2, 2});
       },
       {{5, 4}},
       {{}},
       RC,
       gathered({2, 2},
                [](std::vector<std::size_t> o) -> Index {
                  return std::vector<std::size_t>{1 + 2 * o[0], 2 * o[1]};
                })},
      // A slice of a transposed view, read downstream.
      {"slice",
       [](const Inputs& x) {
         return x[0].transpose({1, 0}).slice({1, 1}, {3, 4}, {1, 2}).sin();
       },
       {{4, 3}},
       {{}},
       RC,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         // The view is [3, 4] (element (i, j) is input (j, i)); rows 1, 2 and columns 1, 3.
         std::vector<C> r;
         for (std::size_t jj = 0; jj < 2; ++jj)
           for (std::size_t ii = 0; ii < 2; ++ii) r.push_back(std::sin(in[0][(1 + 2 * jj) + 4 * (1 + ii)]));
         return r;
       }},
      // [3, 2]: axis 0 one zero before and one between elements (extent 6); axis 1 cropped by one at
      // the front, two zeros after (extent 3).
      {"pad",
       [](const Inputs& x) {
         return x[0].pad({1, -1}, {0, 2}, {1, 0});
       },
       {{3, 2}},
       {{}},
       RC,
       gathered({6, 3},
                [](std::vector<std::size_t> o) -> Index {
                  if (o[0] == 0 || o[0] % 2 == 0 || o[1] > 0) return std::nullopt;
                  return std::vector<std::size_t>{(o[0] - 1) / 2, o[1] + 1};
                })},
      {"reverse",
       [](const Inputs& x) { return x[0].reverse({1}).square(); },
       {{3, 4}},
       {{}},
       RC,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         std::vector<C> r;
         for (std::size_t j = 0; j < 4; ++j)
           for (std::size_t i = 0; i < 3; ++i) r.push_back(in[0][i + 3 * (3 - j)] * in[0][i + 3 * (3 - j)]);
         return r;
       }},
      {"reverse",
       [](const Inputs& x) {
         return x[0].reverse({0, 2});
       },
       {{2, 3, 2}},
       {{}},
       RC,
       gathered({2, 3, 2},
                [](std::vector<std::size_t> o) -> Index {
                  return std::vector<std::size_t>{1 - o[0], o[1], 1 - o[2]};
                })},
      // [5, 4]: starts 3 and -2 clamp to 2 and 0 (rows 2..4, columns 0..1).
      {"dynamic_slice",
       [](const Inputs& x) {
         return x[0].dynamic_slice({3, -2}, {3, 2});
       },
       {{5, 4}},
       {{}},
       RC,
       gathered({3, 2},
                [](std::vector<std::size_t> o) -> Index {
                  return std::vector<std::size_t>{2 + o[0], o[1]};
                })},
      {"squeeze",
       [](const Inputs& x) { return x[0].squeeze({1}).sin(); },
       {{3, 1, 2}},
       {{}},
       RC,
       elementwise([](std::span<const C> a) { return std::sin(a[0]); })},
      {"unsqueeze",
       [](const Inputs& x) {
         return x[0].unsqueeze(1).transpose({1, 2, 0});
       },
       {{3, 2}},
       {{}},
       RC,
       gathered({1, 2, 3},
                [](std::vector<std::size_t> o) -> Index {
                  return std::vector<std::size_t>{o[2], o[1]};
                })},
  };
}

op_case every_dtype(op_case c) {  // they move any dtype's elements (checked below)
  c.refuses_others = false;
  return c;
}

}  // namespace

TEST_CASE("slicing: values, vjp and jvp of every case in f32, f64, c32 and c64", "[harness]") {
  for (const auto& c : cases()) {
    INFO(c.op << " of shape " << format_shape(c.shapes[0]));
    run_case(every_dtype(c));
  }
}

TEST_CASE("slice, dynamic_slice, reverse, squeeze and unsqueeze are views: nothing is copied", "[slicing]") {
  auto ctx = EagerRuntime::create();
  const auto x =
      T::from_vec_col_major_in<std::int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}, ctx);  // [[1, 3, 5], [2, 4, 6]]
  const Tensor base = x.materialized();
  for (const T& v : {x.slice({0, 1}, {2, 3}, {1, 1}), x.reverse({0, 1}), x.unsqueeze(0).squeeze({0})}) {
    CHECK(v.materialized().shares_storage_with(base));
  }
  CHECK(values_of<std::int32_t>(x.slice({0, 1}, {2, 3}, {1, 1})) == std::vector<std::int32_t>{3, 4, 5, 6});
  CHECK(values_of<std::int32_t>(x.reverse({0, 1})) == std::vector<std::int32_t>{6, 5, 4, 3, 2, 1});
  CHECK(values_of<std::int32_t>(x.reverse({1}).slice({1, 0}, {2, 3}, {1, 2})) ==
        std::vector<std::int32_t>{6, 2});
  CHECK(values_of<std::int32_t>(x.pad({0, 1}, {1, -2}, {0, 0})) ==
        std::vector<std::int32_t>{0, 0, 0, 1, 2, 0});
  const auto b = T::from_tensor_in(Tensor::from_vec_col_major<bool>({3}, {true, false, true}), ctx);
  CHECK(values_of<bool>(b.pad({1}, {0}, {1})) == std::vector<bool>{false, true, false, false, false, true});
  const auto z = T::from_vec_col_major_in<std::complex<double>>({2}, {{1, 2}, {3, 4}}, ctx);
  CHECK(values_of<std::complex<double>>(z.reverse({0})) == std::vector<std::complex<double>>{{3, 4}, {1, 2}});
  // dynamic_slice clamps its starts into range (XLA): a view like slice.
  const T d = x.dynamic_slice({INT64_MIN, INT64_MAX}, {1, 2});
  CHECK(d.materialized().shares_storage_with(base));
  CHECK(values_of<std::int32_t>(d) == std::vector<std::int32_t>{3, 5});
  CHECK(values_of<std::int32_t>(x.dynamic_slice({1, 1}, {1, 2})) == std::vector<std::int32_t>{4, 6});
  CHECK(x.dynamic_slice({5, 5}, {0, 0}).shape() == Shape{0, 0});
  CHECK(x.unsqueeze(2).shape() == Shape{2, 3, 1});
  CHECK(x.slice({2, 0}, {2, 3}, {1, 1}).shape() == Shape{0, 3});  // an empty slice
  CHECK(x.pad({-2, 0}, {0, 0}, {0, 0}).shape() == Shape{0, 3});   // cropped away
}

TEST_CASE("the gradient of a slice is padded back, of a pad cut back, of a reverse reversed", "[slicing]") {
  auto ctx = EagerRuntime::create();
  const auto x = T::requires_grad_in(Tensor::from_vec_col_major<double>({5}, {1, 2, 3, 4, 5}), ctx);
  const auto w = T::from_vec_col_major_in<double>({2}, {10, 20}, ctx);
  (x.slice({1}, {5}, {2}) * w).reduce_sum().backward();  // elements 1 and 3
  CHECK(as_doubles(*x.grad()) == std::vector<double>{0, 10, 0, 20, 0});
  ctx->clear_grads();
  const auto v = T::from_vec_col_major_in<double>({6}, {1, 2, 3, 4, 5, 6}, ctx);
  (x.pad({-1}, {2}, {0}) * v).reduce_sum().backward();  // [2, 3, 4, 5, 0, 0]: x1..x4 at 0..3
  CHECK(as_doubles(*x.grad()) == std::vector<double>{0, 1, 2, 3, 4});
  ctx->clear_grads();
  const auto u = T::from_vec_col_major_in<double>({5}, {1, 2, 3, 4, 5}, ctx);
  (x.reverse({0}) * u).reduce_sum().backward();
  CHECK(as_doubles(*x.grad()) == std::vector<double>{5, 4, 3, 2, 1});
  // Everything cut away: a zero gradient of the input's shape.
  ctx->clear_grads();
  x.slice({5}, {5}, {1}).reduce_sum().backward();
  CHECK(as_doubles(*x.grad()) == std::vector<double>(5, 0.0));
}

TEST_CASE("slicing refuses bad arguments, naming the op, the axis and the shape", "[slicing][errors]") {
  auto ctx = EagerRuntime::create();
  const auto x = T::from_tensor_in(Tensor::ones({2, 3}), ctx);
  auto check = [&](auto f, ErrorKind kind, std::string_view op, std::vector<std::string> parts) {
    parts.push_back("[2, 3]");  // every message names the input's shape
    check_refusal(f, kind, op, parts);
  };
  check([&] { (void)x.slice({0}, {2}, {1}); }, ErrorKind::Validation, "slice", {"'starts' has 1 entries"});
  check(
      [&] {
        (void)x.slice({0, 2}, {2, 4}, {1, 1});
      },
      ErrorKind::Validation, "slice", {"axis 1", "limit 4"});
  check(
      [&] {
        (void)x.slice({1, 0}, {0, 3}, {1, 1});
      },
      ErrorKind::Validation, "slice", {"axis 0", "start 1"});
  check([&] { (void)x.slice({0, 0}, {2, 3}, {1, 0}); }, ErrorKind::Validation, "slice", {"stride 0"});
  check(
      [&] {
        (void)x.pad({0, 0}, {0, 0}, {0, -1});
      },
      ErrorKind::Validation, "pad", {"axis 1", "interior -1"});
  check([&] { (void)x.pad({-2, 0}, {-1, 0}, {0, 0}); }, ErrorKind::Validation, "pad", {"axis 0", "low -2"});
  check(
      [&] {
        (void)x.dynamic_slice({0, 0}, {3, 1});
      },
      ErrorKind::Validation, "dynamic_slice", {"axis 0", "size 3 exceeds the extent 2"});
  check(
      [&] {
        (void)x.dynamic_slice({0}, {1, 1});
      },
      ErrorKind::Validation, "dynamic_slice", {"'starts' has 1 entries"});
  check([&] { (void)x.reverse({2}); }, ErrorKind::Validation, "reverse", {"axis 2"});
  check([&] { (void)x.squeeze({1}); }, ErrorKind::ShapeMismatch, "squeeze", {"axis 1", "extent 3"});
  check([&] { (void)x.unsqueeze(3); }, ErrorKind::Validation, "unsqueeze", {"axis 3"});
  CHECK(values_of<double>(x.slice({0, 0}, {2, 3}, {1, 1})) == std::vector<double>(6, 1.0));  // still usable
  // Extreme arguments: checked arithmetic, no overflow.
  const auto v = T::requires_grad_in(Tensor::from_vec_col_major<double>({5}, {1, 2, 3, 4, 5}), ctx);
  const auto first = v.slice({1}, {5}, {SIZE_MAX});  // one element: the step never applies
  CHECK(values_of<double>(first) == std::vector<double>{2});
  first.reduce_sum().backward();
  CHECK(as_doubles(*v.grad()) == std::vector<double>{0, 1, 0, 0, 0});
  check(
      [&] {
        (void)x.pad({0, 0}, {0, 0}, {0, std::int64_t{1} << 62});
      },
      ErrorKind::Validation, "pad",
      {"axis 1", "interior 4611686018427387904"});  // 2 gaps of 2^62: beyond int64
  check(
      [&] {
        (void)x.pad({0, 0}, {0, 0}, {std::int64_t{1} << 62, 0});
      },
      ErrorKind::InvalidArgument, "pad", {"too many elements"});  // an extent of 2^62 + 2, times 3
  const auto one = T::from_tensor_in(Tensor::ones({1}), ctx);
  CHECK(values_of<double>(one.pad({1}, {0}, {INT64_MAX})) == std::vector<double>{0, 1});
  check([&] { (void)x.pad({INT64_MAX, 0}, {1, 0}, {0, 0}); }, ErrorKind::Validation, "pad", {"axis 0"});
}
