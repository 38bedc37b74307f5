// ad/op.hpp: the op table — every eager op is one registered entry; a node's structural key
// (entry, attributes, input dtypes and shapes) is comparable, hashable and printable.
#include "../printed.hpp"

#include <tenferro/apply.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <unordered_set>
#include <vector>

using namespace tenferro;

namespace {
std::string text(const NodeKey& k) { return tenferro::test::printed(k); }
}  // namespace

TEST_CASE("node keys name the entry, the attributes and the inputs' dtypes and shapes") {
  auto ctx = EagerRuntime::create();
  auto x = ctx->variable_from(Tensor::from_vec_col_major<double>({3}, {1, 2, 3}));
  auto y = ctx->variable_from(Tensor::from_vec_col_major<double>({}, {4}));
  auto m = ctx->variable_from(Tensor::from_vec_col_major<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  CHECK_FALSE(x.node_key().has_value());  // a leaf
  CHECK(text(*x.mul(y).node_key()) == "mul{}(f64[3], f64[])");
  CHECK(text(*(x * 2.5).node_key()) == "mul_scalar{numbers=[2.5]}(f64[3])");
  CHECK(text(*(2.0 - x).node_key()) == "rsub_scalar{numbers=[2]}(f64[3])");
  CHECK(text(*m.exp().node_key()) == "exp{}(f32[2, 3])");
  CHECK(text(*m.reduce_sum({1}).node_key()) == "reduce_sum{ints=[0, 0, 1]}(f32[2, 3])");
  CHECK(text(*m.transpose({1, 0}).node_key()) == "transpose{ints=[1, 0]}(f32[2, 3])");
  CHECK(text(*m.to(DType::F64).node_key()) == "to{ints=[1]}(f32[2, 3])");
  {
    const auto no_grad = ctx->no_grad();
    CHECK_FALSE(x.mul(y).node_key().has_value());  // not recorded
  }
}

TEST_CASE("equal structures have equal keys and hashes, any difference makes them differ") {
  auto ctx = EagerRuntime::create();
  auto leaf = [&](Shape s, DType d = DType::F64) { return ctx->variable_from(Tensor::ones(s, d)); };
  const NodeKey a = *leaf({3}).mul(leaf({3})).node_key();
  const NodeKey b = *leaf({3}).mul(leaf({3})).node_key();  // other tensors, same structure
  CHECK(a == b);
  CHECK(a.hash() == b.hash());
  const std::vector<NodeKey> different{
      *leaf({4}).mul(leaf({4})).node_key(),                          // shapes
      *leaf({3}, DType::F32).mul(leaf({3}, DType::F32)).node_key(),  // dtypes
      *leaf({3}).add(leaf({3})).node_key(),                          // op
      *(leaf({3}) * 2.0).node_key(),                                 // op and arity
  };
  std::unordered_set<NodeKey> all{a};
  for (const NodeKey& k : different) {
    CHECK_FALSE(k == a);
    all.insert(k);
  }
  CHECK(all.size() == different.size() + 1);
  // Attributes: numbers by their bits, axes.
  CHECK(*(leaf({3}) * 2.0).node_key() == *(leaf({3}) * 2.0).node_key());
  CHECK_FALSE(*(leaf({3}) * 2.0).node_key() == *(leaf({3}) * 3.0).node_key());
  CHECK_FALSE(*(leaf({3}) * 0.0).node_key() == *(leaf({3}) * -0.0).node_key());
  CHECK_FALSE(*leaf({2, 3}).reduce_sum({0}).node_key() == *leaf({2, 3}).reduce_sum({1}).node_key());
  // An applied expression: one entry per expression type, printed "apply"; its constants are its
  // attributes.
  namespace ct = tenferro::expr;
  auto [p, q] = ct::placeholders<2>();
  const NodeKey e1 = *apply(ct::sum(p * q + 1.5), leaf({3}), leaf({3})).node_key();
  const NodeKey e2 = *apply(ct::sum(p * q + 2.5), leaf({3}), leaf({3})).node_key();
  const NodeKey e3 = *apply(ct::sum(p * q + 1.5), leaf({3}), leaf({3})).node_key();
  CHECK(text(e1) == "apply{numbers=[1.5]}(f64[3], f64[3])");
  CHECK(e1 == e3);
  CHECK_FALSE(e1 == e2);
  CHECK_FALSE(e1.op == (*apply(ct::sum(p * q), leaf({3}), leaf({3})).node_key()).op);  // another type
}

TEST_CASE("every op is one registered entry with a unique name") {
  auto ctx = EagerRuntime::create();
  auto x = ctx->variable_from(Tensor::ones({2}));
  (void)x.exp().sin().reduce_sum();
  const auto& table = detail::ad::op_table();
  for (const char* name : {"exp", "sin", "reduce_sum"}) {
    INFO(name);
    const detail::ad::op_def* def = table.find(name);
    REQUIRE(def != nullptr);
    CHECK(def->name == name);
    CHECK(def->arity == 1);
    CHECK(def->vjp != nullptr);
    CHECK(def->jvp_traced != nullptr);
  }
  CHECK(table.find("exp")->block != nullptr);         // elementwise: a block kernel for deferred passes
  CHECK(table.find("reduce_sum")->block == nullptr);  // structural: none
  CHECK(table.find("sin")->fusion == detail::ad::fusion_kind::sin);
  auto twin = std::make_unique<detail::ad::op_def>();
  twin->name = "exp";
  CHECK(detail::ad::op_table().add(std::move(twin), false) == nullptr);  // the name is taken
  CHECK(x.exp().state()->grad_fn->name() == "exp");
  CHECK(&x.exp().state()->grad_fn->def() == table.find("exp"));  // nodes refer to the entry
}

TEST_CASE("an entry carries its dtype rule: integer and complex kernels and a bool result") {
  auto ctx = EagerRuntime::create();
  auto x = ctx->variable_from(Tensor::ones({2}));
  (void)x.add(x), (void)x.exp(), (void)x.maximum(x), (void)x.lt(x), (void)x.logical_not(), (void)x.sigmoid();
  const auto& table = detail::ad::op_table();
  struct rule {
    const char* name;
    bool integers, complex, predicate;
  };
  for (const rule r : {rule{"add", true, true, false}, rule{"exp", false, true, false},
                       rule{"maximum", true, false, false}, rule{"lt", true, false, true},
                       rule{"logical_not", true, false, true}, rule{"sigmoid", false, false, false}}) {
    INFO(r.name);
    const detail::ad::op_def* def = table.find(r.name);
    REQUIRE(def != nullptr);
    CHECK(def->integers == r.integers);
    CHECK(def->complex == r.complex);
    CHECK(def->predicate == r.predicate);
  }
}

TEST_CASE("x / s divides (it used to multiply by 1 / s, which is not the same number)") {
  auto ctx = EagerRuntime::create();
  const std::vector<double> v{5.0, 7.0, 0.1, 1.0};
  auto x = ctx->variable_from(Tensor::from_vec_col_major<double>({4}, v));
  for (const double s : {3.0, 5.0, 10.0}) {
    const Tensor quotient = (x / s).materialized();  // holds the buffer q views
    const auto q = quotient.as_slice<double>();
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(q[i] == v[i] / s);
  }
  CHECK(5.0 / 3.0 != 5.0 * (1.0 / 3.0));  // why it matters
  CHECK(text(*(x / 3.0).node_key()) == "div_scalar{numbers=[3]}(f64[4])");
  (x / 4.0).reduce_sum().backward();
  CHECK(x.grad()->as_slice<double>()[0] == 0.25);
}
