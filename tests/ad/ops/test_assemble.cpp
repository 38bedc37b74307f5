// Assembling (ad/ops/assemble.hpp): concatenate, stack, broadcast_in_dim, extract_diag,
// embed_diag, tril, triu as cases of the op harness (values against the definition, every
// Jacobian entry by gradcheck, in f32, f64, c32 and c64), plus known values in other dtypes, the
// views they make, promotion, and the refusals.
#include "../op_harness.hpp"

#include <cstdint>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using T = EagerTensor;
const std::vector<DType>& RC = real_or_complex_dtypes;

using I = std::vector<std::size_t>;

std::vector<op_case> cases() {
  return {
      // Columns 0 | 1..3 | 4..5 of a [2, 6].
      {"concatenate",
       [](const Inputs& x) {
         return T::concatenate({x[0], x[1], x[2]}, 1);
       },
       {{2, 1}, {2, 3}, {2, 2}},
       {{}, {}, {}},
       RC,
       picked({2, 6},
              [](I o) -> Source {
                if (o[1] == 0) return std::pair{0, I{o[0], 0}};
                if (o[1] < 4) return std::pair{1, I{o[0], o[1] - 1}};
                return std::pair{2, I{o[0], o[1] - 4}};
              })},
      // Axis -2 is axis 0; an input used twice.
      {"concatenate",
       [](const Inputs& x) {
         return T::concatenate({x[0], x[1], x[0]}, -2).sin();
       },
       {{1, 3}, {2, 3}},
       {{}, {}},
       RC,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         std::vector<C> r;
         for (std::size_t j = 0; j < 3; ++j) {
           r.push_back(std::sin(in[0][j]));
           r.push_back(std::sin(in[1][2 * j]));
           r.push_back(std::sin(in[1][2 * j + 1]));
           r.push_back(std::sin(in[0][j]));
         }
         return r;
       }},
      {"stack",
       [](const Inputs& x) {
         return T::stack({x[0], x[1]}, 1);
       },
       {{2, 3}, {2, 3}},
       {{}, {}},
       RC,
       picked({2, 2, 3},
              [](I o) -> Source {
                return std::pair{o[1], I{o[0], o[2]}};
              })},
      {"stack",
       [](const Inputs& x) {
         return T::stack({x[0], x[1]}, -1);
       },
       {{2, 3}, {2, 3}},
       {{}, {}},
       RC,
       picked({2, 3, 2},
              [](I o) -> Source {
                return std::pair{o[2], I{o[0], o[1]}};
              })},
      // [3, 1] into [2, 3, 4]: axis 0 to 1, axis 1 (extent 1) broadcast along 2.
      {"broadcast_in_dim",
       [](const Inputs& x) {
         return x[0].broadcast_in_dim({2, 3, 4}, {1, 2});
       },
       {{3, 1}},
       {{}},
       RC,
       picked({2, 3, 4},
              [](I o) -> Source {
                return std::pair{0, I{o[1], 0}};
              })},
      // [3, 2] into [2, 5, 3] with the axes swapped: out(a, b, c) = x(c, a).
      {"broadcast_in_dim",
       [](const Inputs& x) {
         return x[0].broadcast_in_dim({2, 5, 3}, {2, 0});
       },
       {{3, 2}},
       {{}},
       RC,
       picked({2, 5, 3},
              [](I o) -> Source {
                return std::pair{0, I{o[2], o[0]}};
              })},
      {"extract_diag",
       [](const Inputs& x) { return x[0].extract_diag(); },
       {{3, 4}},
       {{}},
       RC,
       picked({3},
              [](I o) -> Source {
                return std::pair{0, I{o[0], o[0]}};
              })},
      // Of a transposed view, read downstream.
      {"extract_diag",
       [](const Inputs& x) {
         return x[0].transpose({1, 0}).extract_diag().exp();
       },
       {{2, 4}},
       {{}},
       RC,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         return std::vector<C>{std::exp(in[0][0]), std::exp(in[0][3])};
       }},
      {"embed_diag",
       [](const Inputs& x) { return x[0].embed_diag(); },
       {{3}},
       {{}},
       RC,
       picked({3, 3},
              [](I o) -> Source {
                if (o[0] != o[1]) return std::nullopt;
                return std::pair{0, I{o[0]}};
              })},
      {"tril",
       [](const Inputs& x) { return x[0].tril(); },
       {{3, 4}},
       {{}},
       RC,
       picked({3, 4},
              [](I o) -> Source {
                if (o[1] > o[0]) return std::nullopt;
                return std::pair{0, o};
              })},
      {"tril",
       [](const Inputs& x) { return x[0].tril(-1); },
       {{4, 3}},
       {{}},
       RC,
       picked({4, 3},
              [](I o) -> Source {
                if (o[1] + 1 > o[0]) return std::nullopt;
                return std::pair{0, o};
              })},
      // Batched: matrices over the last two axes of [2, 3, 3].
      {"triu",
       [](const Inputs& x) { return x[0].triu(1); },
       {{2, 3, 3}},
       {{}},
       RC,
       picked({2, 3, 3},
              [](I o) -> Source {
                if (o[2] < o[1] + 1) return std::nullopt;
                return std::pair{0, o};
              })},
      {"triu",
       [](const Inputs& x) { return x[0].triu(-1); },
       {{4, 3}},
       {{}},
       RC,
       picked({4, 3},
              [](I o) -> Source {
                if (o[1] + 1 < o[0]) return std::nullopt;
                return std::pair{0, o};
              })},
  };
}

}  // namespace

TEST_CASE("assembling: values, vjp and jvp of every case in f32, f64, c32 and c64", "[harness]") {
  for (auto c : cases()) {
    INFO(c.op << " of shape " << format_shape(c.shapes[0]));
    c.refuses_others = false;  // they move any dtype's elements (checked below)
    run_case(c);
  }
}

TEST_CASE("assembling moves the elements of every dtype, and extract_diag and broadcast_in_dim are views",
          "[assemble]") {
  auto ctx = EagerRuntime::create();
  const auto x =
      T::from_vec_col_major_in<std::int64_t>({2, 3}, {1, 2, 3, 4, 5, 6}, ctx);  // [[1, 3, 5], [2, 4, 6]]
  const auto y = T::from_vec_col_major_in<std::int64_t>({2, 1}, {7, 8}, ctx);
  CHECK(values_of<std::int64_t>(T::concatenate({x, y}, -1)) ==
        std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(values_of<std::int64_t>(T::concatenate({x, x}, 0)) ==
        std::vector<std::int64_t>{1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6});
  CHECK(values_of<std::int64_t>(T::concatenate({x}, 1)) == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  const T s = T::stack({x, x.neg()}, 0);
  CHECK(s.shape() == Shape{2, 2, 3});
  CHECK(values_of<std::int64_t>(s) == std::vector<std::int64_t>{1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6});
  CHECK(T::stack({x, x, x}, 2).shape() == Shape{2, 3, 3});
  CHECK(T::stack({x}, -3).shape() == Shape{1, 2, 3});

  const T d = x.extract_diag();
  CHECK(d.materialized().shares_storage_with(x.materialized()));
  CHECK(values_of<std::int64_t>(d) == std::vector<std::int64_t>{1, 4});
  CHECK(values_of<std::int64_t>(x.transpose({1, 0}).extract_diag()) == std::vector<std::int64_t>{1, 4});
  CHECK(values_of<std::int64_t>(d.embed_diag()) == std::vector<std::int64_t>{1, 0, 0, 4});
  const T b = y.reshape({2}).broadcast_in_dim({3, 2}, {1});
  CHECK(b.materialized().shares_storage_with(y.materialized()));
  CHECK(values_of<std::int64_t>(b) == std::vector<std::int64_t>{7, 7, 7, 8, 8, 8});
  // Of a transposed view, with the axes reordered: still a view.
  const T bt = x.transpose({1, 0}).broadcast_in_dim({2, 4, 3}, {2, 0});
  CHECK(bt.materialized().shares_storage_with(x.materialized()));
  CHECK(values_of<std::int64_t>(bt.slice({0, 0, 0}, {2, 1, 3}, {1, 1, 1})) ==
        std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});

  const auto m = T::from_vec_col_major_in<std::int32_t>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, ctx);
  CHECK(values_of<std::int32_t>(m.tril()) == std::vector<std::int32_t>{1, 2, 3, 0, 5, 6, 0, 0, 9});
  CHECK(values_of<std::int32_t>(m.triu()) == std::vector<std::int32_t>{1, 0, 0, 4, 5, 0, 7, 8, 9});
  CHECK(values_of<std::int32_t>(m.tril(1)) == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 0, 8, 9});
  CHECK(values_of<std::int32_t>(m.triu(5)) == std::vector<std::int32_t>(9, 0));
  CHECK(values_of<std::int32_t>(m.tril(INT64_MIN)) == std::vector<std::int32_t>(9, 0));
  CHECK(values_of<std::int32_t>(m.triu(INT64_MIN)) == values_of<std::int32_t>(m));
  const auto flags =
      T::from_tensor_in(Tensor::from_vec_col_major<bool>({2, 2}, {true, true, true, true}), ctx);
  CHECK(values_of<bool>(flags.triu()) == std::vector<bool>{true, false, true, true});
  CHECK(values_of<bool>(T::concatenate({flags.extract_diag(), flags.extract_diag()}, 0)) ==
        std::vector<bool>(4, true));
  // Empty extents.
  const auto e = T::from_tensor_in(Tensor::zeros({0, 3}), ctx);
  CHECK(T::concatenate({e, e}, 0).shape() == Shape{0, 3});
  CHECK(T::concatenate({e, x}, 0).shape() == Shape{2, 3});
  CHECK(e.extract_diag().shape() == Shape{0});
  CHECK(e.tril().shape() == Shape{0, 3});
}

TEST_CASE("concatenate promotes its inputs and sends each cotangent back in its input's dtype",
          "[assemble]") {
  auto ctx = EagerRuntime::create();
  const auto a = T::requires_grad_in(Tensor::from_vec_col_major<float>({2}, {1, 2}), ctx);
  const auto b = T::requires_grad_in(Tensor::from_vec_col_major<double>({1}, {3}), ctx);
  const auto n = T::from_vec_col_major_in<std::int32_t>({1}, {4}, ctx);
  const T c = T::concatenate({a, n, b}, 0);
  CHECK(c.dtype() == DType::F64);
  CHECK(values_of<double>(c) == std::vector<double>{1, 2, 4, 3});
  const auto w = T::from_vec_col_major_in<double>({4}, {10, 20, 30, 40}, ctx);
  (c * w).reduce_sum().backward();
  CHECK(a.grad()->dtype() == DType::F32);
  CHECK(as_doubles(*a.grad()) == std::vector<double>{10, 20});
  CHECK(as_doubles(*b.grad()) == std::vector<double>{40});
  // The gradient of a diagonal is the diagonal of the cotangent's embedding, of a triangle its mask.
  const auto m = T::requires_grad_in(Tensor::from_vec_col_major<double>({2, 3}, {1, 2, 3, 4, 5, 6}), ctx);
  const auto v = T::from_vec_col_major_in<double>({2}, {7, 8}, ctx);
  (m.extract_diag() * v).reduce_sum().backward();
  CHECK(as_doubles(*m.grad()) == std::vector<double>{7, 0, 0, 8, 0, 0});
  ctx->clear_grads();
  m.triu().reduce_sum().backward();
  CHECK(as_doubles(*m.grad()) == std::vector<double>{1, 0, 1, 1, 1, 1});
}

TEST_CASE("assembling refuses bad arguments, naming the op, what was wrong and the shapes",
          "[assemble][errors]") {
  auto ctx = EagerRuntime::create();
  const auto x = T::from_tensor_in(Tensor::ones({2, 3}), ctx);
  const auto v = T::from_tensor_in(Tensor::ones({3}), ctx);
  const auto r = T::from_tensor_in(Tensor::ones({2, 4}), ctx);
  check_refusal([&] { (void)T::concatenate({}, 0); }, ErrorKind::InvalidArgument, "concatenate", {"empty"});
  check_refusal([&] { (void)T::stack({}, 0); }, ErrorKind::InvalidArgument, "stack", {"empty"});
  check_refusal(
      [&] {
        (void)T::concatenate({x, v}, 0);
      },
      ErrorKind::Validation, "concatenate",
      {"rank mismatch", "input 1 has rank 1", "[3]", "expected rank 2", "[2, 3]"});
  check_refusal(
      [&] {
        (void)T::concatenate({x, r}, 0);
      },
      ErrorKind::ShapeMismatch, "concatenate",
      {"input 1 (shape [2, 4])", "input 0 (shape [2, 3])", "axis 1"});
  check_refusal(
      [&] {
        (void)T::concatenate({x, x}, 2);
      },
      ErrorKind::Validation, "concatenate", {"axis 2", "-2 to 1", "[2, 3]"});
  check_refusal([&] { (void)T::concatenate({x, x}, -3); }, ErrorKind::Validation, "concatenate", {"axis -3"});
  check_refusal([&] { (void)T::stack({x, r}, 0); }, ErrorKind::ShapeMismatch, "stack", {"[2, 4]", "[2, 3]"});
  check_refusal([&] { (void)T::stack({x, x}, 3); }, ErrorKind::Validation, "stack", {"axis 3", "-3 to 2"});
  auto other = EagerRuntime::create();
  const auto foreign = T::from_tensor_in(Tensor::ones({2, 3}), other);
  CHECK(kind_of([&] { (void)T::concatenate({x, foreign}, 0); }) == ErrorKind::ContextMismatch);
  check_refusal(
      [&] {
        (void)x.broadcast_in_dim({2, 3}, {0});
      },
      ErrorKind::Validation, "broadcast_in_dim", {"rank mismatch", "1 entries", "rank 2", "[2, 3]"});
  check_refusal(
      [&] {
        (void)x.broadcast_in_dim({2, 3}, {0, 2});
      },
      ErrorKind::Validation, "broadcast_in_dim", {"axis 2", "rank 2"});
  check_refusal(
      [&] {
        (void)x.broadcast_in_dim({2, 3, 4}, {1, 1});
      },
      ErrorKind::Validation, "broadcast_in_dim", {"axis 1", "listed twice"});
  check_refusal(
      [&] {
        (void)x.broadcast_in_dim({2, 4}, {0, 1});
      },
      ErrorKind::ShapeMismatch, "broadcast_in_dim", {"operand axis 1", "[2, 3]", "[2, 4]"});
  check_refusal([&] { (void)v.extract_diag(); }, ErrorKind::Validation, "extract_diag", {"rank 1", "[3]"});
  check_refusal([&] { (void)x.embed_diag(); }, ErrorKind::Validation, "embed_diag", {"rank 2", "[2, 3]"});
  check_refusal([&] { (void)v.tril(); }, ErrorKind::Validation, "tril", {"rank 1", "[3]"});
  check_refusal([&] { (void)v.triu(); }, ErrorKind::Validation, "triu", {"rank 1", "[3]"});
  CHECK(values_of<double>(T::concatenate({x, x}, 0)) == std::vector<double>(12, 1.0));  // still usable
}
