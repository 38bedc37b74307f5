// The structural ops (ad/ops.hpp): reductions, layout (reshape, transpose, broadcast_to, sum_to,
// views) and conversions, each one case of the op harness (values against a plain
// reference, vjp and jvp against central differences, in every floating and complex dtype it
// accepts), plus their known values, ties, integer forms and views.
#include "../op_harness.hpp"

#include <cmath>
#include <numeric>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using T = EagerTensor;
const std::vector<DType>& R = real_dtypes;
const std::vector<DType>& RC = real_or_complex_dtypes;
const domain away_from_zero{0.2, 2.0, true};

// A reduction over `axes` (all when empty and `all`) combining with f from init; mean divides.
enum class red { sum, prod, max, min, mean };
Reference reduced(red r, Axes axes, bool all = false) {
  return [=](const std::vector<std::vector<C>>& in, const std::vector<Shape>& shapes) {
    const Shape& s = shapes[0];
    Axes ax = axes;
    if (all) {
      ax.resize(s.size());
      std::iota(ax.begin(), ax.end(), 0);
    }
    Shape out;
    for (std::size_t d = 0; d < s.size(); ++d) {
      if (std::find(ax.begin(), ax.end(), d) == ax.end()) out.push_back(s[d]);
    }
    std::size_t n_out = 1, count = 1;
    for (const auto e : out) n_out *= e;
    for (const auto a : ax) count *= s[a];
    const C init = r == red::prod ? C(1) : r == red::max ? C(-1e300) : r == red::min ? C(1e300) : C(0);
    std::vector<C> acc(n_out, init);
    for (std::size_t i = 0; i < in[0].size(); ++i) {
      const auto at = index_of(i, s);
      std::vector<std::size_t> o;
      for (std::size_t d = 0; d < s.size(); ++d) {
        if (std::find(ax.begin(), ax.end(), d) == ax.end()) o.push_back(at[d]);
      }
      C& a = acc[position_of(o, out)];
      const C v = in[0][i];
      if (r == red::prod)
        a *= v;
      else if (r == red::max)
        a = std::max(a.real(), v.real());
      else if (r == red::min)
        a = std::min(a.real(), v.real());
      else
        a += v;
    }
    if (r == red::mean) {
      for (C& a : acc) a /= static_cast<double>(count);
    }
    return acc;
  };
}

// transpose(perm) of the input, then f elementwise.
template <class F>
Reference permuted(Axes perm, F f) {
  return [=](const std::vector<std::vector<C>>& in, const std::vector<Shape>& shapes) {
    const Shape& s = shapes[0];
    Shape out(s.size());
    for (std::size_t d = 0; d < s.size(); ++d) out[d] = s[perm[d]];
    std::vector<C> r(in[0].size());
    for (std::size_t j = 0; j < r.size(); ++j) {
      const auto o = index_of(j, out);
      std::vector<std::size_t> at(s.size());
      for (std::size_t d = 0; d < s.size(); ++d) at[perm[d]] = o[d];
      r[j] = f(in[0][position_of(at, s)]);
    }
    return r;
  };
}

std::vector<op_case> cases() {
  const auto sin = [](C z) { return std::sin(z); };
  std::vector<op_case> c = {
      {"reshape",
       [](const Inputs& x) {
         return x[0].reshape({2, 6}).sin();
       },
       {{3, 4}},
       {{}},
       RC,
       elementwise([sin](std::span<const C> a) { return sin(a[0]); })},
      {"transpose",
       [](const Inputs& x) {
         return x[0].transpose({2, 0, 1}).square();
       },
       {{2, 3, 4}},
       {{}},
       RC,
       permuted({2, 0, 1}, [](C z) { return z * z; })},
      {"broadcast_to",
       [](const Inputs& x) {
         return x[0].broadcast_to({3, 2, 4}).sin();
       },
       {{2, 1}},
       {{}},
       RC,
       [sin](const std::vector<std::vector<C>>& in, const std::vector<Shape>& shapes) {
         const Shape out{3, 2, 4};
         std::vector<C> r(24);
         for (std::size_t j = 0; j < 24; ++j) {
           const auto o = index_of(j, out);
           r[j] = sin(in[0][broadcast_index(shapes[0], o)]);
         }
         return r;
       }},
      {"sum_to",
       [](const Inputs& x) { return x[0].sum_to({4}); },
       {{3, 4}},
       {{}},
       RC,
       reduced(red::sum, {0})},
      {"to",
       [](const Inputs& x) { return x[0].to(DType::F64).exp().to(x[0].dtype()); },
       {{4}},
       {{}},
       R,
       elementwise([](std::span<const C> a) { return std::exp(a[0]); })},
      {"to complex",
       [](const Inputs& x) { return (x[0].to(DType::C64) * x[0]).exp().real(); },
       {{4}},
       {{}},
       R,
       elementwise([](std::span<const C> a) { return C(std::exp(a[0] * a[0]).real()); })},
  };
  c.back().result = [](DType) { return DType::F64; };
  const std::vector<std::tuple<std::string, red, EagerTensor (T::*)(const Axes&) const, std::vector<DType>>>
      reductions{{"reduce_sum", red::sum, &T::reduce_sum, RC},
                 {"reduce_prod", red::prod, &T::reduce_prod, RC},
                 {"reduce_max", red::max, &T::reduce_max, R},
                 {"reduce_min", red::min, &T::reduce_min, R},
                 {"reduce_mean", red::mean, &T::reduce_mean, RC}};
  for (const auto& [name, r, method, dtypes] : reductions) {
    for (const Axes& axes : {Axes{}, Axes{0}, Axes{1}, Axes{0, 2}, Axes{0, 1, 2}}) {
      std::string label = name + " axes {";
      for (auto a : axes) label += std::to_string(a) + ",";
      c.push_back({label + "}",
                   [m = method, axes](const Inputs& x) { return (x[0].*m)(axes); },
                   {{2, 3, 2}},
                   {away_from_zero},
                   dtypes,
                   reduced(r, axes)});
    }
  }
  c.push_back({"reduce_sum all",
               [](const Inputs& x) { return x[0].reduce_sum(); },
               {{3, 4}},
               {{}},
               RC,
               reduced(red::sum, {}, true)});
  c.push_back({"reduce_max all",
               [](const Inputs& x) { return x[0].reduce_max(); },
               {{3, 4}},
               {{}},
               R,
               reduced(red::max, {}, true)});
  c.push_back({"reduce_mean all",
               [](const Inputs& x) { return x[0].reduce_mean(); },
               {{3, 4}},
               {{}},
               RC,
               reduced(red::mean, {}, true)});
  return c;
}

}  // namespace

TEST_CASE("every structural op in every dtype it accepts: values, vjp and jvp") {
  for (op_case c : cases()) {
    c.refuses_others = false;  // layout ops move every dtype; the integer forms are tested below
    run_case(c);
  }
}

TEST_CASE("op values") {
  auto ctx = EagerRuntime::create();
  auto x = EagerTensor::from_vec_col_major_in<double>({2, 3}, {1, -2, 3, -4, 5, -6}, ctx);
  auto vals = [](const EagerTensor& t) { return as_doubles(t.materialized()); };
  CHECK(vals(x.abs()) == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(vals(x.sign()) == std::vector<double>{1, -1, 1, -1, 1, -1});
  CHECK(vals(x.reduce_sum({0})) == std::vector<double>{-1, -1, -1});
  CHECK(vals(x.reduce_sum({1})) == std::vector<double>{9, -12});
  CHECK(vals(x.reduce_sum({})) == vals(x));
  CHECK(x.reduce_sum().rank() == 0);
  CHECK(vals(x.reduce_sum()) == std::vector<double>{-3});
  CHECK(vals(x.reduce_prod({0})) == std::vector<double>{-2, -12, -30});
  CHECK(vals(x.reduce_max({1})) == std::vector<double>{5, -2});
  CHECK(vals(x.reduce_min()) == std::vector<double>{-6});
  CHECK(vals(x.reduce_mean({0})) == std::vector<double>{-0.5, -0.5, -0.5});
  CHECK(vals(x.transpose({1, 0})) == std::vector<double>{1, 3, 5, -2, -4, -6});
  CHECK(x.reshape({3, 2}).shape() == Shape{3, 2});
  auto m = EagerTensor::from_vec_col_major_in<double>({2, 2}, {1, 3, 2, 4}, ctx);  // [[1, 2], [3, 4]]
  CHECK(vals(m.matmul(m)) == std::vector<double>{7, 15, 10, 22});
  CHECK(vals(x.maximum(x.neg())) == std::vector<double>{1, 2, 3, 4, 5, 6});
  const auto p = vals(m.pow(m));  // within an ulp (expr/ops/math_pow.hpp)
  const std::vector<double> p_want{1, 27, 4, 256};
  for (std::size_t i = 0; i < 4; ++i) CHECK(p[i] == Approx(p_want[i]).epsilon(1e-14));
  // Ties: max splits the cotangent evenly; prod at a zero is the product of the others.
  auto t = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({4}, {2, 1, 2, 0}), ctx);
  t.reduce_max().backward();
  CHECK(as_doubles(*t.grad()) == std::vector<double>{0.5, 0, 0.5, 0});
  ctx->clear_grads();
  t.reduce_prod().backward();
  CHECK(as_doubles(*t.grad()) == std::vector<double>{0, 0, 0, 4});
  // The recorded prod rule at zeros: exact, and differentiable again. prod(t) over [2, 1, 2, 0]:
  // the gradient is [0, 0, 0, 4]; the Hessian is H_ij = Π_{k≠i,j} t_k (i ≠ j), so H·1 is
  // [t1 t2, t0 t2, t0 t1, t1 t2 + t0 t2 + t0 t1] = [2, 4, 2, 8] (the other terms hold t3 = 0).
  const auto g = ctx->grad(t.reduce_prod(), t);
  CHECK(as_doubles(g.materialized()) == std::vector<double>{0, 0, 0, 4});
  const auto hv = ctx->jvp(g, t, ctx->constant_from(Tensor::ones({4})));
  CHECK(as_doubles(hv.materialized()) == std::vector<double>{2, 4, 2, 8});
  auto u = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({2, 3}, {1, 0, 2, 3, 0, 4}), ctx);
  CHECK(as_doubles(ctx->grad(u.reduce_prod({1}).reduce_sum(), u).materialized()) ==
        std::vector<double>{0, 12, 0, 0, 2, 0});  // rows [1, 2, 0] and [0, 3, 4]
  // Threads do not change results.
  auto big = EagerTensor::from_tensor_in(Tensor::full({100000}, 0.1),
                                         EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1)));
  auto big2 = big.detach_into(EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2)));
  CHECK(vals(big.sin().reduce_sum()) == vals(big2.sin().reduce_sum()));
}

TEST_CASE("transpose, reshape and broadcast_to are views of their input's buffer") {
  auto ctx = EagerRuntime::create();
  const auto x = EagerTensor::requires_grad_in(
      Tensor::from_vec_col_major<double>({2, 3}, {1, -2, 3, -4, 5, -6}), ctx);  // [[1, 3, 5], [-2, -4, -6]]
  const Tensor buffer = x.materialized();
  const auto t = x.transpose({1, 0});
  CHECK(t.materialized().shares_storage_with(buffer));
  CHECK(t.materialized().strides() == Strides{2, 1});
  const auto r = x.reshape({3, 2});
  CHECK(r.materialized().shares_storage_with(buffer));
  CHECK(r.materialized().is_contiguous());
  const auto b = x.reshape({2, 3, 1}).broadcast_to({2, 3, 4});
  CHECK(b.materialized().shares_storage_with(buffer));
  CHECK(b.materialized().strides() == Strides{1, 2, 0});
  // Reshaping a non-contiguous view copies once (the transposed elements in order).
  const auto tr = t.reshape({6});
  CHECK_FALSE(tr.materialized().shares_storage_with(buffer));
  CHECK(as_doubles(tr.materialized()) == std::vector<double>{1, 3, 5, -2, -4, -6});

  // Ops read views as the tensors they stand for, and differentiate through them.
  auto vals = [](const EagerTensor& e) { return as_doubles(e.materialized()); };
  CHECK(vals(t.mul(t)) == std::vector<double>{1, 9, 25, 4, 16, 36});
  CHECK(vals(t.add(x.transpose({1, 0}).neg())) == std::vector<double>(6, 0.0));
  CHECK(vals(t.reduce_sum({0})) == std::vector<double>{9, -12});
  CHECK(vals(b.reduce_sum({2})) == std::vector<double>{4, -8, 12, -16, 20, -24});
  CHECK(vals(t.sin()) == vals(x.sin().transpose({1, 0})));
  const auto w = EagerTensor::from_vec_col_major_in<double>({3, 2}, {1, 2, 3, 4, 5, 6}, ctx);
  const auto loss = t.mul(w).reduce_sum().add(b.square().reduce_sum());
  loss.backward();
  // d/dx of sum(x^T * w) is w^T; of sum over 4 copies of x^2 is 8 x.
  CHECK(as_doubles(*x.grad()) == std::vector<double>{1 + 8, 4 - 16, 2 + 24, 5 - 32, 3 + 40, 6 - 48});
  CHECK(as_doubles(buffer) == std::vector<double>{1, -2, 3, -4, 5, -6});  // the leaf is unchanged
}

TEST_CASE("integer and bool reductions: sums wrap, bools count in i64, max and min are exact", "[dtypes]") {
  auto ctx = EagerRuntime::create();
  const std::int32_t big = std::numeric_limits<std::int32_t>::max();
  const std::int32_t low = std::numeric_limits<std::int32_t>::lowest();
  const auto x = EagerTensor::from_vec_col_major_in<std::int32_t>({2, 3}, {big, 1, low, 5, -3, 2}, ctx);
  CHECK(values_of<std::int32_t>(x.reduce_sum()) == std::vector<std::int32_t>{4});  // big + low = -1
  const auto y = EagerTensor::from_vec_col_major_in<std::int32_t>({3}, {big, 1, 2}, ctx);
  CHECK(values_of<std::int32_t>(y.reduce_sum()) == std::vector<std::int32_t>{low + 2});  // wraps once
  CHECK(values_of<std::int32_t>(x.reduce_max()) == std::vector<std::int32_t>{big});
  CHECK(values_of<std::int32_t>(x.reduce_min()) == std::vector<std::int32_t>{low});
  CHECK(values_of<std::int32_t>(x.reduce_sum({0})) == std::vector<std::int32_t>{low, low + 5, -1});
  CHECK(values_of<std::int32_t>(x.reduce_min({1})) == std::vector<std::int32_t>{low, 1});
  CHECK(values_of<std::int32_t>(x.reduce_max({1})) == std::vector<std::int32_t>{big, 5});
  CHECK(values_of<std::int32_t>(x.reduce_prod({0})) == std::vector<std::int32_t>{big, low, -6});
  CHECK(kind_of([&] { (void)x.reduce_mean(); }) == ErrorKind::Unsupported);
  // Large enough for the fused SIMD sum and max.
  std::vector<std::int64_t> ramp(100003);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<std::int64_t>(i) * 1000003 - 7;
  const auto r = EagerTensor::from_vec_col_major_in<std::int64_t>({ramp.size()}, ramp, ctx);
  std::int64_t want = 0;
  for (const auto v : ramp) want += v;
  CHECK(values_of<std::int64_t>(r.reduce_sum()) == std::vector<std::int64_t>{want});
  CHECK(values_of<std::int64_t>(r.reduce_max()) == std::vector<std::int64_t>{ramp.back()});
  CHECK(values_of<std::int64_t>(r.reduce_min()) == std::vector<std::int64_t>{-7});
  const auto p =
      EagerTensor::from_tensor_in(Tensor::from_vec_col_major<bool>({4}, {true, false, true, true}), ctx);
  CHECK(values_of<std::int64_t>(p.reduce_sum()) == std::vector<std::int64_t>{3});
  CHECK(values_of<bool>(p.reduce_max()) == std::vector<bool>{true});
  CHECK(values_of<bool>(p.reduce_min()) == std::vector<bool>{false});
}
