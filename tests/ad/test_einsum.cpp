// tenferro::einsum (ad/einsum.hpp, ad/einsum_spec.hpp): values against a nested-loop einsum over
// every index, the NumPy forms (implicit output, diagonals, lone sums, ellipsis broadcasting),
// dtypes, derivatives by gradcheck (also second order), the path the greedy model picks and its
// cache, and the errors.
#include "../errors.hpp"
#include "eager_testing.hpp"

#include <tenferro/ad/einsum_spec.hpp>
#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <complex>
#include <map>
#include <random>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using V = std::vector<EagerTensor>;
using C = std::complex<double>;

// The einsum of letter-only explicit subscripts by summing over every assignment of every label
// (column-major operands): the oracle.
std::vector<double> loop_einsum(const std::string& subscripts, const std::vector<Tensor>& in) {
  const auto arrow = subscripts.find("->");
  std::vector<std::string> terms;
  std::string cur;
  for (const char c : subscripts.substr(0, arrow)) {
    if (c == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  terms.push_back(cur);
  const std::string out = subscripts.substr(arrow + 2);
  std::map<char, std::size_t> extent;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    for (std::size_t a = 0; a < terms[k].size(); ++a) extent[terms[k][a]] = in[k].shape()[a];
  }
  std::vector<char> labels;
  for (const auto& [c, n] : extent) labels.push_back(c);
  auto offset = [&](const std::string& term, const std::vector<std::size_t>& shape,
                    std::map<char, std::size_t>& at) {
    std::size_t o = 0, stride = 1;
    for (std::size_t a = 0; a < term.size(); ++a) o += at[term[a]] * stride, stride *= shape[a];
    return o;
  };
  std::vector<std::size_t> out_shape;
  std::size_t out_size = 1;
  for (const char c : out) out_shape.push_back(extent[c]), out_size *= extent[c];
  std::vector<double> result(out_size, 0.0);
  std::vector<std::vector<double>> values;
  for (const Tensor& t : in) values.push_back(as_doubles(t));
  std::map<char, std::size_t> at;
  for (const char c : labels) at[c] = 0;
  while (true) {
    double p = 1;
    for (std::size_t k = 0; k < terms.size(); ++k) p *= values[k][offset(terms[k], in[k].shape(), at)];
    result[offset(out, out_shape, at)] += p;
    std::size_t d = 0;
    while (d < labels.size() && ++at[labels[d]] == extent[labels[d]]) at[labels[d++]] = 0;
    if (d == labels.size()) break;
  }
  return result;
}

Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  return make(shape, random_values(checked_shape_size(shape).value(), {-1, 1}, rng), DType::F64);
}

}  // namespace

TEST_CASE("einsum agrees with a loop over every index", "[einsum]") {
  auto ctx = EagerRuntime::create();
  std::mt19937 rng(7);
  const std::vector<std::pair<std::string, std::vector<Shape>>> cases = {
      {"ij,jk->ik", {{2, 3}, {3, 4}}},
      {"ij->ji", {{2, 3}}},
      {"ij->", {{2, 3}}},
      {"ii->", {{3, 3}}},
      {"ii->i", {{3, 3}}},
      {"iii->i", {{2, 2, 2}}},
      {"iij->ji", {{2, 2, 3}}},
      {"i,j->ij", {{2}, {3}}},
      {"i,i->", {{4}, {4}}},
      {"bij,bjk->bik", {{2, 2, 3}, {2, 3, 2}}},
      {"ij,k->i", {{2, 3}, {4}}},
      {"ab,bc,cd,d->a", {{3, 4}, {4, 2}, {2, 5}, {5}}},
      {"ijk,jl,kl->il", {{2, 3, 4}, {3, 2}, {4, 2}}},
      {"ij,ij,ij->ij", {{2, 3}, {2, 3}, {2, 3}}},
      {"Ab,bA->", {{2, 3}, {3, 2}}},
      {",i->i", {{}, {3}}},
  };
  for (const auto& [subscripts, shapes] : cases) {
    INFO(subscripts);
    std::vector<Tensor> values;
    V operands;
    for (const Shape& s : shapes) {
      values.push_back(random_tensor(s, rng));
      operands.push_back(ctx->constant_from(values.back()));
    }
    const EagerTensor r = einsum(subscripts, operands);
    require_close(as_doubles(r.materialized()), loop_einsum(subscripts, values), 1e-12, subscripts);
  }
}

TEST_CASE("einsum reads NumPy's implicit output and ellipsis, with broadcasting", "[einsum]") {
  auto ctx = EagerRuntime::create();
  const auto a =
      ctx->constant_from(Tensor::from_vec_col_major<double>({2, 2}, {1, 3, 2, 4}));  // [[1, 2], [3, 4]]
  const auto b =
      ctx->constant_from(Tensor::from_vec_col_major<double>({2, 2}, {5, 7, 6, 8}));  // [[5, 6], [7, 8]]
  // "ij,jk": output "ik" (alphabetical); "ji": "ij", a transpose; "ii": the trace, a scalar.
  CHECK(values_of<double>(einsum("ij,jk", {a, b})) == std::vector<double>{19, 43, 22, 50});
  CHECK(values_of<double>(einsum("ji", {a})) == std::vector<double>{1, 2, 3, 4});
  CHECK(einsum("ii", {a}).shape() == Shape{});
  CHECK(values_of<double>(einsum("ii", {a})) == std::vector<double>{5});
  // Upper case sorts before lower case: "bA" -> "Ab".
  CHECK(values_of<double>(einsum("bA", {a})) == std::vector<double>{1, 2, 3, 4});

  // "ij...,jk...->ik...": x's ellipsis axis has extent 1 and broadcasts against y's 4.
  std::mt19937 rng(3);
  const Tensor x = random_tensor({2, 3, 1}, rng), y = random_tensor({3, 2, 4}, rng);
  const auto r = einsum("ij...,jk...->ik...", {ctx->constant_from(x), ctx->constant_from(y)});
  REQUIRE(r.shape() == Shape{2, 2, 4});
  const auto rv = as_doubles(r.materialized()), xv = as_doubles(x), yv = as_doubles(y);
  for (std::size_t batch = 0; batch < 4; ++batch) {
    for (std::size_t i = 0; i < 2; ++i) {
      for (std::size_t k = 0; k < 2; ++k) {
        double s = 0;
        for (std::size_t j = 0; j < 3; ++j) s += xv[i + 2 * j] * yv[j + 3 * k + 6 * batch];
        CHECK(rv[i + 2 * k + 4 * batch] == Approx(s).epsilon(1e-12));
      }
    }
  }
  // Implicit output keeps the ellipsis first; an operand without ellipsis axes takes part too.
  const auto v = ctx->constant_from(Tensor::from_vec_col_major<double>({2}, {1, -1}));
  const auto m = ctx->constant_from(x);  // [2, 3, 1]: "i...": i = 2, ellipsis [3, 1]
  const auto s = einsum("i...,i", {m, v});
  REQUIRE(s.shape() == Shape{3, 1});
  CHECK(as_doubles(s.materialized())[1] == Approx(xv[2] - xv[3]));
}

TEST_CASE("einsum promotes dtypes and computes integers and complex values", "[einsum]") {
  auto ctx = EagerRuntime::create();
  const auto i = ctx->constant_from(Tensor::from_vec_col_major<std::int64_t>({2, 2}, {1, 3, 2, 4}));
  const auto r = einsum("ij,jk->ik", {i, i});
  CHECK(r.dtype() == DType::I64);
  CHECK(values_of<std::int64_t>(r) == std::vector<std::int64_t>{7, 15, 10, 22});
  const auto f = ctx->constant_from(Tensor::from_vec_col_major<float>({2}, {0.5F, 2}));
  const auto g = einsum("i,i->", {f, ctx->constant_from(Tensor::from_vec_col_major<double>({2}, {2, 3}))});
  CHECK(g.dtype() == DType::F64);
  CHECK(values_of<double>(g) == std::vector<double>{7});
  const auto z = ctx->constant_from(Tensor::from_vec_col_major<C>({2}, {C(1, 2), C(0, 1)}));
  const auto zz = einsum("i,i->", {z, z});  // (1 + 2i)^2 + i^2 = -4 + 4i
  CHECK(values_of<C>(zz) == std::vector<C>{C(-4, 4)});
}

TEST_CASE("einsum's derivatives are einsums, checked against differences", "[einsum]") {
  auto ctx = EagerRuntime::create();
  std::mt19937 rng(11);
  const std::vector<std::pair<std::string, std::vector<Shape>>> cases = {
      {"ij,jk->ik", {{2, 3}, {3, 2}}},
      {"ii->", {{3, 3}}},
      {"ii->i", {{2, 2}}},
      {"iij->ji", {{2, 2, 3}}},
      {"ij,k->ik", {{2, 3}, {2}}},
      {"ab,bc,cd,d->a", {{2, 3}, {3, 2}, {2, 3}, {3}}},
      {"...i,...i->...", {{1, 3}, {2, 3}}},  // broadcast: the first operand's batch axis has extent 1
      {"bij,bjk->bik", {{2, 2, 3}, {2, 3, 2}}},
  };
  for (const auto& [subscripts, shapes] : cases) {
    INFO(subscripts);
    V operands;
    for (const Shape& s : shapes) operands.push_back(ctx->constant_from(random_tensor(s, rng)));
    const std::string sub = subscripts;
    const auto r = gradcheck([&](const V& in) { return einsum(sub, in); }, operands);
    INFO(r);
    CHECK(r.passed);
  }
  // Complex operands (PyTorch's convention: conjugated partners in the vjp).
  const auto z =
      ctx->constant_from(Tensor::from_vec_col_major<C>({2, 2}, {C(1, 2), C(0, 1), C(-1, 0.5), C(2, -1)}));
  const auto w = ctx->constant_from(Tensor::from_vec_col_major<C>({2}, {C(0.5, -1), C(1, 1)}));
  const auto rc = gradcheck([](const V& in) { return einsum("ij,j->i", in); }, {z, w});
  INFO(rc);
  CHECK(rc.passed);
}

TEST_CASE("einsum differentiates twice: the gradient of a gradient", "[einsum]") {
  auto ctx = EagerRuntime::create();
  std::mt19937 rng(5);
  // f(x) = x^T A x with A not symmetric: grad = (A + A^T) x, and its gradient checked by gradcheck.
  const auto a = ctx->constant_from(random_tensor({3, 3}, rng));
  const auto x0 = ctx->constant_from(random_tensor({3}, rng));
  auto grad_of_quadratic = [&](const V& in) {
    const auto x = in[0];
    return ctx->grad(einsum("i,ij,j->", {x, a, x}), x);
  };
  const auto g = grad_of_quadratic({ctx->variable_from(x0.materialized())});
  const auto av = as_doubles(a.materialized()), xv = as_doubles(x0.materialized());
  for (std::size_t i = 0; i < 3; ++i) {
    double want = 0;
    for (std::size_t j = 0; j < 3; ++j) want += (av[i + 3 * j] + av[j + 3 * i]) * xv[j];
    CHECK(as_doubles(g.materialized())[i] == Approx(want).epsilon(1e-12));
  }
  const auto r = gradcheck(grad_of_quadratic, {x0});
  INFO(r);
  CHECK(r.passed);

  // Through diagonals and broadcast axes, whose vjps make labels of their own: d/dA of
  // tr(A) tr(B) is tr(B) I, and its derivatives in A and B (a vjp of a vjp).
  const auto a2 = ctx->constant_from(random_tensor({2, 2}, rng));
  const auto b3 = ctx->constant_from(random_tensor({3, 3}, rng));
  auto grad_in_a = [&](const std::string& sub) {
    return [&ctx, sub](const V& in) { return ctx->grad(einsum(sub, in), in[0]); };
  };
  const auto gd = grad_in_a("ii,jj->")({ctx->variable_from(a2.materialized()), b3});
  const auto bv = as_doubles(b3.materialized());
  const double trace_b = bv[0] + bv[4] + bv[8];
  CHECK(as_doubles(gd.materialized()) == std::vector<double>{trace_b, 0, 0, trace_b});
  auto rd = gradcheck(grad_in_a("ii,jj->"), {a2, b3});
  INFO(rd);
  CHECK(rd.passed);
  rd = gradcheck(grad_in_a("...ii,...ii->"), {ctx->constant_from(random_tensor({1, 2, 2}, rng)),
                                              ctx->constant_from(random_tensor({3, 2, 2}, rng))});
  INFO(rd);
  CHECK(rd.passed);
}

TEST_CASE("einsum with complex diagonals, mixed real and complex operands, and empty axes", "[einsum]") {
  auto ctx = EagerRuntime::create();
  const auto z =
      ctx->constant_from(Tensor::from_vec_col_major<C>({2, 2}, {C(1, 2), C(0, 1), C(-1, 0.5), C(2, -1)}));
  const auto w = ctx->constant_from(Tensor::from_vec_col_major<C>({2}, {C(0.5, -1), C(1, 1)}));
  const auto m = ctx->constant_from(Tensor::from_vec_col_major<double>({2, 2}, {0.5, -1, 2, 0.25}));
  for (const auto& [sub, operands] : std::vector<std::pair<std::string, V>>{
           {"ii,i->i", {z, w}}, {"ij,j->i", {m, w}}, {"ij,ii->j", {m, z}}}) {
    INFO(sub);
    const std::string s = sub;
    const auto r = gradcheck([s](const V& in) { return einsum(s, in); }, operands);
    INFO(r);
    CHECK(r.passed);
  }
  // The real operand's cotangent is real (the real part, PyTorch's convention).
  const auto mv = ctx->variable_from(m.materialized());
  const auto g = ctx->vjp(einsum("ij,j->i", {mv, w}), mv, ctx->constant_from(Tensor::ones({2}, DType::C64)));
  CHECK(g.dtype() == DType::F64);

  // Empty axes: a sum over nothing is 0; an output with an empty axis is empty, also broadcast.
  const auto e = ctx->constant_from(Tensor::ones({2, 0}));
  const auto f = ctx->constant_from(Tensor::ones({0, 3}));
  CHECK(values_of<double>(einsum("ij,jk->ik", {e, f})) == std::vector<double>(6, 0.0));
  CHECK(einsum("ij,jk->ji", {e, f}).shape() == Shape{0, 2});
  const auto r0 = einsum(
      "...i,...i->...", {ctx->constant_from(Tensor::ones({0, 3})), ctx->constant_from(Tensor::ones({1, 3}))});
  CHECK(r0.shape() == Shape{0});
  const auto ev = ctx->variable_from(Tensor::ones({2, 0}));
  einsum("ij,jk->", {ev, f}).backward();
  CHECK(ev.grad()->shape() == Shape{2, 0});
}

TEST_CASE("einsum records one node and caches its path per subscripts and shapes", "[einsum]") {
  auto ctx = EagerRuntime::create();
  CHECK(ctx->cache_stats().extensions == CacheStats{});
  const auto a = EagerTensor::requires_grad_in(Tensor::ones({2, 3}), ctx);
  const auto b = ctx->constant_from(Tensor::ones({3, 4}));
  const auto c = ctx->constant_from(Tensor::ones({4}));
  const auto r = einsum("ij,jk,k->i", {a, b, c});
  REQUIRE(r.node_key().has_value());
  CHECK(r.node_key()->op == "tenferro.einsum/einsum");
  CHECK(r.node_key()->label == "einsum");
  CHECK(ctx->epoch().value == 2);  // installed on first use
  auto stats = ctx->cache_stats().extensions;
  CHECK(stats.entries == 1);
  CHECK(stats.misses == 1);
  CHECK(stats.hits == 0);
  (void)einsum("ij,jk,k->i", {a, b, c});
  stats = ctx->cache_stats().extensions;
  CHECK(stats.hits == 1);
  CHECK(stats.entries == 1);
  (void)einsum("ij,jk,k->i", {ctx->constant_from(Tensor::ones({5, 3})), b, c});  // a new shape: a miss
  CHECK(ctx->cache_stats().extensions.misses == 2);
  CHECK(ctx->cache_stats().extensions.entries == 2);
  CHECK(ctx->epoch().value == 2);  // installing again changes nothing
  ctx->clear_extension_caches();
  CHECK(ctx->cache_stats().extensions.entries == 0);
  CHECK(ctx->cache_stats().extensions.clears == 1);
  CHECK(values_of<double>(einsum("ij,jk,k->i", {a, b, c})) == std::vector<double>{12, 12});
}

TEST_CASE("einsum's greedy order contracts the cheap pairs first", "[einsum]") {
  using namespace tenferro::detail::einsum;
  // ab,bc,cd,d->a with 1000s: the vector first (cd.d), then bc.c, then ab.b; left to right would
  // make two 1000 x 1000 products.
  const std::vector<std::size_t> ranks{2, 2, 2, 1};
  const einsum_spec spec = parse("ab,bc,cd,d->a", ranks);
  const std::vector<Shape> shapes{{1000, 1000}, {1000, 1000}, {1000, 1000}, {1000}};
  const auto path = greedy_path(spec.inputs, spec.output, label_extents(spec, shapes));
  REQUIRE(path.size() == 3);
  CHECK(path[0] == std::pair<std::size_t, std::size_t>{2, 3});  // cd, d
  CHECK(path[1] == std::pair<std::size_t, std::size_t>{1, 2});  // bc, c
  CHECK(path[2] == std::pair<std::size_t, std::size_t>{0, 1});  // ab, b
}

TEST_CASE("einsum refuses malformed subscripts and shapes, naming the place", "[einsum][errors]") {
  auto ctx = EagerRuntime::create();
  const auto m = ctx->constant_from(Tensor::ones({2, 3}));
  const auto v = ctx->constant_from(Tensor::ones({4}));
  auto msg = [&](const std::string& s, const V& in) { return message_of([&] { (void)einsum(s, in); }); };
  CHECK(msg("ij,j1->i", {m, v}).find("the character '1'") != std::string::npos);
  CHECK(msg("ij,j1->i", {m, v}).find("position 4") != std::string::npos);
  CHECK(msg("ij,j->i", {m}).find("name 2 operands, 1 were given") != std::string::npos);
  CHECK(msg("ijk->i", {m}).find("names 3 axes, operand 0 has rank 2") != std::string::npos);
  const std::string extents = msg("ij,j->i", {m, v});
  CHECK(extents.find("ShapeMismatch in einsum") == 0);
  CHECK(extents.find(
            "label 'j' has extent 3 at axis 1 of operand 0 (shape [2, 3]) and 4 at axis 0 of operand 1") !=
        std::string::npos);
  CHECK(msg("ij->k", {m}).find("the output label 'k', which no operand has") != std::string::npos);
  CHECK(msg("ij->ii", {m}).find("a label repeated in the output at position 4") != std::string::npos);
  CHECK(msg("ij->i->j", {m}).find("a second '->'") != std::string::npos);
  CHECK(msg("i..j", {m}).find("outside an ellipsis") != std::string::npos);
  CHECK(msg("ij", {}).find("no operands") != std::string::npos);
  CHECK(kind_of([&] {
          (void)einsum("ij,jk", {m, EagerRuntime::create()->constant_from(Tensor::ones({3, 2}))});
        }) == ErrorKind::ContextMismatch);
  // The runtime goes on.
  CHECK(values_of<double>(einsum("ij->", {m})) == std::vector<double>{6});
}
