// docs/ops.md against the op table: every public op has a row, and the entries the rows name are
// exactly those the ops register (so the page cannot drift from the code).
#include "eager_testing.hpp"

#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <complex>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace tenferro;

namespace {

using T = EagerTensor;

struct documented {
  std::set<std::string> ops;      // the public ops the first cells call
  std::set<std::string> entries;  // the entries the last cells name
};

documented read_ops_page() {
  std::ifstream in(TENFERRO_DOCS_DIR "/ops.md");
  REQUIRE(in.good());
  documented d;
  const std::regex call(R"((?:x\.|EagerTensor::|`)([a-z][a-z0-9_]*)\()"), name("`([a-z][a-z0-9_]*)`");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("| `")) continue;  // a row of a table (not its header)
    const std::string first = line.substr(2, line.find(" | ") - 2);
    const std::string last = line.substr(line.rfind(" | ", line.size() - 3) + 3);
    for (std::sregex_iterator it(first.begin(), first.end(), call), end; it != end; ++it)
      d.ops.insert((*it)[1]);
    for (std::sregex_iterator it(last.begin(), last.end(), name), end; it != end; ++it)
      d.entries.insert((*it)[1]);
  }
  return d;
}

}  // namespace

TEST_CASE("docs/ops.md has a row for every public op and names exactly the entries they record") {
  auto ctx = EagerRuntime::create();
  const T a = ctx->variable_from(Tensor::from_vec_col_major<double>({2, 2}, {1, 2, 3, 4}));
  const T b = ctx->variable_from(Tensor::from_vec_col_major<double>({2, 2}, {0.5, 1, 1.5, 2}));
  const T v = ctx->variable_from(Tensor::from_vec_col_major<double>({2}, {1, 2}));
  const T z = ctx->variable_from(Tensor::from_vec_col_major<std::complex<double>>({2}, {{1, 2}, {3, 4}}));
  const T f = ctx->variable_from(Tensor::from_vec_col_major<float>({2}, {1, 2}));
  const T cond = ctx->constant_from(Tensor::from_vec_col_major<bool>({2}, {true, false}));
  const T idx = ctx->constant_from(Tensor::from_vec_col_major<std::int64_t>({2, 2}, {1, 0, 0, 1}));
  const DotGeneralConfig contract{{1}, {0}, {}, {}};
  // Every public op, called on tracked inputs (so each records, registering its entries).
  const std::vector<std::pair<std::string, std::function<T()>>> calls{
      {"add", [&] { return a.add(b); }},
      {"sub", [&] { return a.sub(b); }},
      {"mul", [&] { return a.mul(b); }},
      {"div", [&] { return a.div(b); }},
      {"pow", [&] { return a.pow(b); }},
      {"rem", [&] { return a.rem(b); }},
      {"maximum", [&] { return a.maximum(b); }},
      {"minimum", [&] { return a.minimum(b); }},
      {"neg", [&] { return a.neg(); }},
      {"square", [&] { return a.square(); }},
      {"exp", [&] { return a.exp(); }},
      {"log", [&] { return a.log(); }},
      {"sqrt", [&] { return a.sqrt(); }},
      {"sin", [&] { return a.sin(); }},
      {"cos", [&] { return a.cos(); }},
      {"tanh", [&] { return a.tanh(); }},
      {"abs",
       [&] {
         return a.abs().add(z.abs().reshape({2, 1}));
       }},
      {"sign", [&] { return a.sign(); }},
      {"rsqrt", [&] { return a.rsqrt(); }},
      {"expm1", [&] { return a.expm1(); }},
      {"log1p", [&] { return a.log1p(); }},
      {"sigmoid", [&] { return a.sigmoid(); }},
      {"eq", [&] { return a.eq(b); }},
      {"ne", [&] { return a.ne(b); }},
      {"lt", [&] { return a.lt(b); }},
      {"le", [&] { return a.le(b); }},
      {"gt", [&] { return a.gt(b); }},
      {"ge", [&] { return a.ge(b); }},
      {"logical_and", [&] { return a.logical_and(b); }},
      {"logical_or", [&] { return a.logical_or(b); }},
      {"logical_xor", [&] { return a.logical_xor(b); }},
      {"logical_not", [&] { return a.logical_not(); }},
      {"conj", [&] { return z.conj(); }},
      {"real", [&] { return z.real(); }},
      {"imag", [&] { return z.imag(); }},
      {"scale", [&] { return a.scale(2); }},
      {"add_scalar", [&] { return a.add_scalar(2); }},
      {"rsub_scalar", [&] { return a.rsub_scalar(2); }},
      {"div_scalar", [&] { return a.div_scalar(2); }},
      {"rdiv_scalar", [&] { return a.rdiv_scalar(2); }},
      {"reduce_sum", [&] { return a.reduce_sum({0}); }},
      {"reduce_mean", [&] { return a.reduce_mean(); }},
      {"reduce_prod", [&] { return a.reduce_prod(); }},
      {"reduce_max", [&] { return a.reduce_max(); }},
      {"reduce_min", [&] { return a.reduce_min(); }},
      {"reduce_sum_squares", [&] { return a.reduce_sum_squares().add(z.reduce_sum_squares()); }},
      {"reduce_logsumexp", [&] { return a.reduce_logsumexp(); }},
      {"argmax", [&] { return a.argmax(0); }},
      {"argmin", [&] { return a.argmin(0); }},
      {"cumsum", [&] { return a.cumsum(0); }},
      {"reshape", [&] { return a.reshape({4}); }},
      {"transpose",
       [&] {
         return a.transpose({1, 0});
       }},
      {"broadcast_to",
       [&] {
         return v.broadcast_to({2, 2});
       }},
      {"sum_to",
       [&] {
         return a.sum_to({2, 1});
       }},
      {"broadcast_in_dim",
       [&] {
         return v.broadcast_in_dim({2, 3}, {0});
       }},
      {"squeeze",
       [&] {
         return a.reshape({2, 1, 2}).squeeze({1});
       }},
      {"unsqueeze", [&] { return a.unsqueeze(0); }},
      {"slice",
       [&] {
         return a.slice({0, 0}, {1, 2}, {1, 1});
       }},
      {"dynamic_slice",
       [&] {
         return a.dynamic_slice({1, 0}, {1, 2});
       }},
      {"pad",
       [&] {
         return a.pad({1, 0}, {0, 0}, {0, 0});
       }},
      {"reverse", [&] { return a.reverse({0}); }},
      {"concatenate",
       [&] {
         return T::concatenate({a, b, f.reshape({1, 2})}, 0);
       }},
      {"stack",
       [&] {
         return T::stack({a, b}, 0);
       }},
      {"extract_diag", [&] { return a.extract_diag(); }},
      {"embed_diag", [&] { return v.embed_diag(); }},
      {"tril", [&] { return a.tril(); }},
      {"triu", [&] { return a.triu(); }},
      {"gather", [&] { return a.gather(0, idx); }},
      {"scatter_add", [&] { return a.scatter_add(0, idx, b).add(a.scatter_add(0, idx, b.to(DType::F32))); }},
      {"index_select", [&] { return a.index_select(1, {1}); }},
      {"take_rows", [&] { return a.take_rows({1}); }},
      {"take_cols", [&] { return a.take_cols({0}); }},
      {"take_block", [&] { return a.take_block({0}, {1}); }},
      {"where", [&] { return where(cond, v, v.neg()); }},
      {"clamp", [&] { return a.clamp(0.5, 3).add(a.clamp(b, b.scale(2))); }},
      {"dot_general", [&] { return a.dot_general(b, contract); }},
      {"dot_general_with_conj", [&] { return a.dot_general_with_conj(b, contract, false, true); }},
      {"matmul", [&] { return a.matmul(b); }},
      {"outer", [&] { return v.outer(v); }},
      {"dot", [&] { return v.dot(v); }},
      {"to", [&] { return a.to(DType::F32); }},
      {"cast", [&] { return a.cast(DType::C64); }},
      {"convert", [&] { return f.convert(DType::F64); }},
  };
  std::set<std::string> called;
  for (const auto& [name, call] : calls) {
    INFO(name);
    (void)call();
    called.insert(name);
  }
  const documented page = read_ops_page();
  for (const auto& name : called) {
    INFO("the op " << name << " has no row in docs/ops.md");
    CHECK(page.ops.count(name) == 1);
  }
  for (const auto& name : page.ops) {
    INFO("docs/ops.md has a row for " << name << ", which this test does not call");
    CHECK(called.count(name) == 1);
  }
  const auto& table = detail::ad::op_table();
  const auto registered = table.names();
  for (const auto& name : registered) {
    INFO("the entry " << name << " is registered but docs/ops.md does not name it");
    CHECK(page.entries.count(name) == 1);
  }
  for (const auto& name : page.entries) {
    INFO("docs/ops.md names the entry " << name << ", which no op registered");
    CHECK(table.find(name) != nullptr);
  }
}
