// Contractions: dot_general (with and without conjugation), matmul (vectors, matrices, broadcast
// batches), outer and dot — each a case of the op harness in f32, f64, c32 and c64 (values against
// the definition, vjp and jvp against central differences), plus known values, integers that
// wrap, operands read in place (transposed and broadcast views), threads, and every refusal.
#include "../op_harness.hpp"

#include <numeric>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using T = EagerTensor;
const std::vector<DType>& RC = real_or_complex_dtypes;

std::size_t count(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::size_t{1}, std::multiplies<>());
}

// Advances a column-major multi-index over shape s; false after the last.
bool next(std::vector<std::size_t>& at, const Shape& s) {
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (++at[d] < s[d]) return true;
    at[d] = 0;
  }
  return false;
}

// dot_general by its definition, written out: the result [batch..., lhs free..., rhs free...]
// sums op(a) op(b) over the contracted index pairs (op: conj when the flag is set).
Reference contraction(DotGeneralConfig c, bool conj_a = false, bool conj_b = false) {
  return [=](const std::vector<std::vector<C>>& in, const std::vector<Shape>& s) {
    const Shape &sa = s[0], &sb = s[1];
    auto free_axes = [](const Shape& shape, const Axes& x, const Axes& y) {
      Axes f;
      for (std::size_t d = 0; d < shape.size(); ++d) {
        if (std::find(x.begin(), x.end(), d) == x.end() && std::find(y.begin(), y.end(), d) == y.end())
          f.push_back(d);
      }
      return f;
    };
    const Axes fa = free_axes(sa, c.lhs_contracting, c.lhs_batch),
               fb = free_axes(sb, c.rhs_contracting, c.rhs_batch);
    Shape out, summed;
    for (const auto d : c.lhs_batch) out.push_back(sa[d]);
    for (const auto d : fa) out.push_back(sa[d]);
    for (const auto d : fb) out.push_back(sb[d]);
    for (const auto d : c.lhs_contracting) summed.push_back(sa[d]);
    std::vector<C> r(count(out));
    if (r.empty()) return r;
    std::vector<std::size_t> at(out.size(), 0);
    do {
      std::vector<std::size_t> ia(sa.size()), ib(sb.size());
      std::size_t o = 0;
      for (std::size_t i = 0; i < c.lhs_batch.size(); ++i, ++o)
        ia[c.lhs_batch[i]] = ib[c.rhs_batch[i]] = at[o];
      for (const auto d : fa) ia[d] = at[o++];
      for (const auto d : fb) ib[d] = at[o++];
      C sum = 0;
      std::vector<std::size_t> k(summed.size(), 0);
      if (count(summed) > 0) {
        do {
          for (std::size_t i = 0; i < k.size(); ++i)
            ia[c.lhs_contracting[i]] = ib[c.rhs_contracting[i]] = k[i];
          const C x = in[0][position_of(ia, sa)], y = in[1][position_of(ib, sb)];
          sum += (conj_a ? std::conj(x) : x) * (conj_b ? std::conj(y) : y);
        } while (next(k, summed));
      }
      r[position_of(at, out)] = sum;
    } while (next(at, out));
    return r;
  };
}

// A harness case of an op that also takes integers (checked exactly below, not by the harness).
op_case accepting_integers(op_case c) {
  c.refuses_others = false;
  return c;
}

std::vector<op_case> cases() {
  const DotGeneralConfig mat{{1}, {0}, {}, {}};
  // a [3, 2, 4]: free 3, batch 2, contracted 4; b [4, 5, 2]: contracted, free 5, batch.
  const DotGeneralConfig batched{{2}, {0}, {1}, {2}};
  // Two contracted pairs, listed in another order than the axes: a [2, 3, 4] x b [4, 2, 5] -> [3, 5].
  const DotGeneralConfig two{{0, 2}, {1, 0}, {}, {}};
  return {
      {"dot_general",
       [=](const Inputs& x) { return x[0].dot_general(x[1], mat); },
       {{3, 2}, {2, 4}},
       {{}, {}},
       RC,
       contraction(mat)},
      {"dot_general",
       [=](const Inputs& x) { return x[0].dot_general(x[1], batched); },
       {{3, 2, 4}, {4, 5, 2}},
       {{}, {}},
       RC,
       contraction(batched)},
      {"dot_general",
       [=](const Inputs& x) { return x[0].dot_general(x[1], two); },
       {{2, 3, 4}, {4, 2, 5}},
       {{}, {}},
       RC,
       contraction(two)},
      {"dot_general_with_conj",
       [=](const Inputs& x) { return x[0].dot_general_with_conj(x[1], batched, true, false); },
       {{3, 2, 4}, {4, 5, 2}},
       {{}, {}},
       RC,
       contraction(batched, true, false)},
      {"dot_general_with_conj",
       [=](const Inputs& x) { return x[0].dot_general_with_conj(x[1], mat, false, true); },
       {{3, 2}, {2, 4}},
       {{}, {}},
       RC,
       contraction(mat, false, true)},
      {"dot_general_with_conj",
       [=](const Inputs& x) { return x[0].dot_general_with_conj(x[1], two, true, true); },
       {{2, 3, 4}, {4, 2, 5}},
       {{}, {}},
       RC,
       contraction(two, true, true)},
      // The first operand a transposed view (BLAS reads it in place, transposed).
      {"dot_general",
       [=](const Inputs& x) {
         return x[0].transpose({1, 0}).dot_general(x[1], mat);
       },
       {{2, 3}, {2, 4}},
       {{}, {}},
       RC,
       contraction({{0}, {0}, {}, {}})},
      {"matmul",
       [](const Inputs& x) { return x[0].matmul(x[1]); },
       {{3, 2}, {2, 4}},
       {{}, {}},
       RC,
       contraction(mat)},
      {"matmul",
       [](const Inputs& x) { return x[0].matmul(x[1]); },
       {{4}, {4, 3}},
       {{}, {}},
       RC,
       contraction({{0}, {0}, {}, {}})},
      {"matmul",
       [](const Inputs& x) { return x[0].matmul(x[1]); },
       {{2, 4}, {4}},
       {{}, {}},
       RC,
       contraction(mat)},
      {"matmul",
       [](const Inputs& x) { return x[0].matmul(x[1]); },
       {{5}, {5}},
       {{}, {}},
       RC,
       contraction({{0}, {0}, {}, {}})},
      // Batches: [2, 3, 4] x [4, 5] (the rhs broadcast over the batch) -> [2, 3, 5]: the batch
      // axis is the lhs's first, and its free axes [3] come after it.
      {"matmul",
       [](const Inputs& x) { return x[0].matmul(x[1]); },
       {{2, 3, 4}, {4, 5}},
       {{}, {}},
       RC,
       contraction({{2}, {0}, {}, {}})},
      // [1, 3, 2] x [2, 2, 4] -> [2, 3, 4]: the lhs broadcast along the batch axis.
      {"matmul",
       [](const Inputs& x) { return x[0].matmul(x[1]); },
       {{1, 3, 2}, {2, 2, 4}},
       {{}, {}},
       RC,
       [](const std::vector<std::vector<C>>& in, const std::vector<Shape>&) {
         std::vector<C> r(24);
         for (std::size_t b = 0; b < 2; ++b)
           for (std::size_t i = 0; i < 3; ++i)
             for (std::size_t j = 0; j < 4; ++j)
               for (std::size_t k = 0; k < 2; ++k)
                 r[b + 2 * (i + 3 * j)] += in[0][3 * k + i] * in[1][b + 2 * (k + 2 * j)];
         return r;
       }},
      {"outer",
       [](const Inputs& x) { return x[0].outer(x[1]); },
       {{3}, {4}},
       {{}, {}},
       RC,
       contraction({{}, {}, {}, {}})},
      {"dot",
       [](const Inputs& x) { return x[0].dot(x[1]); },
       {{6}, {6}},
       {{}, {}},
       RC,
       contraction({{0}, {0}, {}, {}})},
  };
}

}  // namespace

TEST_CASE("contractions: values, vjp and jvp of every case in f32, f64, c32 and c64", "[harness]") {
  for (const auto& c : cases()) {
    INFO(c.op << " of shapes " << format_shape(c.shapes[0]) << " and " << format_shape(c.shapes[1]));
    run_case(accepting_integers(c));
  }
}

TEST_CASE("matmul of known matrices, and the gradient of their sum", "[contraction]") {
  auto ctx = EagerRuntime::create();
  // [[1, 2], [3, 4]] and [[5, 6], [7, 8]], column-major.
  const auto a = T::requires_grad_in(Tensor::from_vec_col_major<double>({2, 2}, {1, 3, 2, 4}), ctx);
  const auto b = T::requires_grad_in(Tensor::from_vec_col_major<double>({2, 2}, {5, 7, 6, 8}), ctx);
  const auto c = a.matmul(b);
  CHECK(values_of<double>(c) == std::vector<double>{19, 43, 22, 50});
  CHECK(c.node_key()->op == "dot_general");
  c.reduce_sum().backward();
  // d sum(AB) / dA = 1 Bᵀ: each row holds B's row sums [11, 15]; d / dB = Aᵀ 1: row p holds A's
  // column sum p (4, 6).
  CHECK(as_doubles(*a.grad()) == std::vector<double>{11, 11, 15, 15});
  CHECK(as_doubles(*b.grad()) == std::vector<double>{4, 6, 4, 6});
  CHECK(values_of<double>(a.reshape({4}).dot(b.reshape({4}))) == std::vector<double>{70});
  CHECK(values_of<double>(a.reshape({4}).outer(b.reshape({4}))).size() == 16);
  // Complex: (1 + i)(2 - i) = 3 + i, no conjugation; with the lhs conjugated (1 - i)(2 - i) = 1 - 3i.
  using Z = std::complex<double>;
  const auto z = T::from_vec_col_major_in<Z>({1, 1}, {Z(1, 1)}, ctx);
  const auto w = T::from_vec_col_major_in<Z>({1, 1}, {Z(2, -1)}, ctx);
  CHECK(values_of<Z>(z.matmul(w)) == std::vector<Z>{Z(3, 1)});
  CHECK(values_of<Z>(z.dot_general_with_conj(w, {{1}, {0}, {}, {}}, true, false)) ==
        std::vector<Z>{Z(1, -3)});
  // A real matrix times a complex one is complex; the real operand's gradient is real.
  const auto r = T::requires_grad_in(Tensor::from_vec_col_major<double>({1, 1}, {2}), ctx);
  const auto zr = r.matmul(w);
  CHECK(zr.dtype() == DType::C64);
  zr.real().reduce_sum().backward();
  CHECK(r.grad()->dtype() == DType::F64);
  CHECK(as_doubles(*r.grad()) == std::vector<double>{2});  // d Re(2 w) / d r = Re w
}

TEST_CASE("integer contractions are exact and wrap, and bools alone are refused", "[contraction][dtypes]") {
  auto ctx = EagerRuntime::create();
  const std::int64_t big = std::int64_t{1} << 62;
  // [[big, 1], [3, 4]] x [[4, 5], [6, 7]]: big * 4 wraps to 0.
  const auto a = T::from_vec_col_major_in<std::int64_t>({2, 2}, {big, 3, 1, 4}, ctx);
  const auto b = T::from_vec_col_major_in<std::int64_t>({2, 2}, {4, 6, 5, 7}, ctx);
  const auto c = a.matmul(b);
  REQUIRE(c.dtype() == DType::I64);
  const auto wrap = [](i128 v) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(static_cast<u128>(v)));
  };
  CHECK(values_of<std::int64_t>(c) == std::vector<std::int64_t>{wrap(i128(big) * 4 + 6), 3 * 4 + 4 * 6,
                                                                wrap(i128(big) * 5 + 7), 3 * 5 + 4 * 7});
  CHECK_FALSE(c.tracks_grad());
  // i32 batches against the definition, with int32 extremes.
  const std::int32_t hi = std::numeric_limits<std::int32_t>::max(),
                     lo = std::numeric_limits<std::int32_t>::lowest();
  std::vector<std::int32_t> av{hi, lo, -1, 7, 0, hi, 3, lo, 5, -7, 2, 1},
      bv{lo, 2, hi, -3, 1, 1, 9, hi, -1, 4, 0, lo};
  const auto x = T::from_vec_col_major_in<std::int32_t>({2, 3, 2}, av, ctx);  // batch 2, [3, 2]
  const auto y = T::from_vec_col_major_in<std::int32_t>({2, 2, 3}, bv, ctx);  // batch 2, [2, 3]
  const auto got = values_of<std::int32_t>(x.matmul(y));
  REQUIRE(got.size() == 18);
  for (std::size_t bt = 0; bt < 2; ++bt)
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 3; ++j) {
        i128 s = 0;
        for (std::size_t k = 0; k < 2; ++k)
          s += i128(av[bt + 2 * (i + 3 * k)]) * i128(bv[bt + 2 * (k + 2 * j)]);
        CHECK(got[bt + 2 * (i + 3 * j)] ==
              static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<u128>(s))));
      }
  // Bool with a number dtype promotes; bools alone are refused, naming the op and both shapes.
  const auto p = T::from_tensor_in(Tensor::from_vec_col_major<bool>({2}, {true, false}), ctx);
  const auto v = T::from_vec_col_major_in<double>({2}, {3, 4}, ctx);
  CHECK(values_of<double>(p.dot(v)) == std::vector<double>{3});
  const std::string msg = message_of([&] { (void)p.dot(p); });
  CHECK(msg.rfind("Unsupported in dot", 0) == 0);
  CHECK(msg.find("[2]") != std::string::npos);
}

TEST_CASE("contraction operands are read in place: transposed and broadcast views equal their copies",
          "[contraction]") {
  auto ctx = EagerRuntime::create();
  std::mt19937 rng(7);
  const Shape s{37, 29};
  const auto a = T::from_tensor_in(make(s, random_values(count(s), {}, rng), DType::F64), ctx);
  const auto b = T::from_tensor_in(make({37, 23}, random_values(37 * 23, {}, rng), DType::F64), ctx);
  const auto at = a.transpose({1, 0});  // [29, 37], a view
  REQUIRE(at.materialized().is_view());
  const auto copy = T::from_tensor_in(at.materialized().materialized(), ctx);
  REQUIRE_FALSE(copy.materialized().is_view());
  CHECK(values_of<double>(at.matmul(b)) == values_of<double>(copy.matmul(b)));
  CHECK(
      values_of<double>(b.transpose({1, 0}).matmul(a)) ==
      values_of<double>(T::from_tensor_in(b.transpose({1, 0}).materialized().materialized(), ctx).matmul(a)));
  // A batch of 3 sharing one matrix (stride 0) against 3 matrices: each batch equals the plain product.
  const auto m = T::from_tensor_in(make({3, 37, 23}, random_values(3 * 37 * 23, {}, rng), DType::F64), ctx);
  const auto batched = copy.matmul(m);  // [29, 37] broadcast over [3]
  REQUIRE(batched.shape() == Shape{3, 29, 23});
  for (std::size_t k = 0; k < 3; ++k) {
    const Tensor mk = m.transpose({1, 2, 0}).materialized().materialized();  // [37, 23, 3], compact
    const auto one =
        T::from_tensor_in(mk.as_strided({37, 23}, {1, 37}, static_cast<std::ptrdiff_t>(k * 37 * 23)), ctx);
    const auto want = values_of<double>(copy.matmul(one));
    const auto all = values_of<double>(batched);
    for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(all[k + 3 * i] == want[i]);
  }
}

TEST_CASE("a large product is the same on 1 and 2 threads", "[contraction][threads]") {
  // 300 x 280 x 260 multiply-adds: above cpu::parallel_work, so C is cut into 2 x 2 tiles.
  std::mt19937 rng(3);
  const auto av = random_values(300 * 280, {}, rng), bv = random_values(280 * 260, {}, rng);
  std::vector<std::vector<double>> results;
  for (const std::size_t threads : {1, 2}) {
    auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(threads));
    const auto a = T::requires_grad_in(make({300, 280}, av, DType::F64), ctx);
    const auto b = T::from_tensor_in(make({280, 260}, bv, DType::F64), ctx);
    const auto c = a.matmul(b);
    c.reduce_sum().backward();
    results.push_back(values_of<double>(c));
    results.push_back(as_doubles(*a.grad()));
  }
  CHECK(results[0] == results[2]);
  CHECK(results[1] == results[3]);
  // Against the definition at elements of each tile.
  for (const std::size_t i : {0UL, 299UL, 150UL + 300UL * 130UL, 77999UL}) {
    const std::size_t r = i % 300, col = i / 300;
    double s = 0;
    for (std::size_t k = 0; k < 280; ++k) s += av[r + 300 * k] * bv[k + 280 * col];
    CHECK(results[0][i] == Approx(s).epsilon(1e-12));
  }
}

TEST_CASE("contractions refuse bad axes and shapes, naming the op, the list and both shapes",
          "[contraction][errors]") {
  auto ctx = EagerRuntime::create();
  const auto a = T::from_tensor_in(Tensor::ones({2, 3}), ctx);
  const auto b = T::from_tensor_in(Tensor::ones({3, 4}), ctx);
  check_refusal(
      [&] {
        (void)a.dot_general(b, {{2}, {0}, {}, {}});
      },
      ErrorKind::Validation, "dot_general",
      {"lhs_contracting [2]", "out of range for rank 2", "[2, 3]", "[3, 4]"});
  check_refusal(
      [&] {
        (void)a.dot_general(b, {{1, 1}, {0, 1}, {}, {}});
      },
      ErrorKind::Validation, "dot_general", {"used twice"});
  check_refusal(
      [&] {
        (void)a.dot_general(b, {{1}, {}, {}, {}});
      },
      ErrorKind::Validation, "dot_general", {"differ in length"});
  check_refusal(
      [&] {
        (void)a.dot_general(b, {{0}, {0}, {}, {}});
      },
      ErrorKind::ShapeMismatch, "dot_general", {"extent 2", "extent 3", "[2, 3]", "[3, 4]"});
  check_refusal(
      [&] {
        (void)a.dot_general(b, {{1}, {0}, {0}, {1}});
      },
      ErrorKind::ShapeMismatch, "dot_general", {"batch"});
  check_refusal([&] { (void)b.matmul(a); }, ErrorKind::ShapeMismatch, "matmul", {"[3, 4]", "[2, 3]"});
  check_refusal([&] { (void)a.matmul(T::from_tensor_in(Tensor::ones({}), ctx)); }, ErrorKind::ShapeMismatch,
                "matmul", {"rank 1 or more"});
  check_refusal(
      [&] {
        (void)T::from_tensor_in(Tensor::ones({2, 2, 3}), ctx)
            .matmul(T::from_tensor_in(Tensor::ones({3, 3, 1}), ctx));
      },
      ErrorKind::ShapeMismatch, "matmul", {"batch", "[2, 2, 3]", "[3, 3, 1]"});
  check_refusal([&] { (void)a.dot(b); }, ErrorKind::ShapeMismatch, "dot", {"vectors", "[2, 3]"});
  check_refusal([&] { (void)a.reshape({6}).dot(b.reshape({12})); }, ErrorKind::ShapeMismatch, "dot",
                {"[6]", "[12]"});
  auto other = EagerRuntime::create();
  check_refusal(
      [&] {
        (void)a.matmul(T::from_tensor_in(Tensor::ones({3, 4}), other));
      },
      ErrorKind::ContextMismatch, "matmul", {"runtime"});
  // Nothing was recorded or broken: the runtime goes on.
  CHECK(values_of<double>(a.matmul(b)) == std::vector<double>(8, 3.0));
  // Empty extents: a zero-length contraction is zeros; an empty result is empty.
  CHECK(values_of<double>(T::from_tensor_in(Tensor::ones({2, 0}), ctx)
                              .matmul(T::from_tensor_in(Tensor::ones({0, 3}), ctx))) ==
        std::vector<double>(6, 0.0));
  CHECK(T::from_tensor_in(Tensor::ones({0, 3}), ctx).matmul(b).shape() == Shape{0, 4});
  // An empty product is never refused for BLAS's 32-bit extents.
  const std::size_t huge = std::size_t{3} << 30;
  CHECK(T::from_tensor_in(Tensor::zeros({huge, 0}), ctx)
            .matmul(T::from_tensor_in(Tensor::zeros({0, 0}), ctx))
            .shape() == Shape{huge, 0});
}
