// The elementwise ops (ad/ops/expression.hpp), each one case of the op harness run in every dtype
// it accepts: arithmetic, math functions, operations with a number, comparisons, logical ops and the
// complex parts. An op's case is found by its name.
#include "../op_harness.hpp"

#include <algorithm>
#include <cmath>
#include <set>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using T = EagerTensor;
const std::vector<DType>& R = real_dtypes;
const std::vector<DType>& RC = real_or_complex_dtypes;
const std::vector<DType> RI{DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool};
const std::vector<DType> RIC = all_dtypes;
const std::vector<DType> numbers = all_dtypes;

const domain positive{0.3, 2.0};
const domain away_from_zero{0.2, 2.0, true};

template <class M>
op_case unary(std::string name, M method, std::vector<DType> dtypes, Reference ref, Exact exact = {},
              domain d = {}) {
  return {name,
          [method](const Inputs& x) { return (x[0].*method)(); },
          {{3, 4}},
          {d},
          std::move(dtypes),
          std::move(ref),
          std::move(exact)};
}
template <class M>
op_case binary(std::string name, M method, std::vector<DType> dtypes, Reference ref, Exact exact,
               std::vector<Shape> shapes, domain da = {}, domain db = {}) {
  return {name,
          [method](const Inputs& x) { return (x[0].*method)(x[1]); },
          std::move(shapes),
          {da, db},
          std::move(dtypes),
          std::move(ref),
          std::move(exact)};
}
template <class F>
Reference of_real(F f) {  // an op of real operands
  return elementwise([f](std::span<const C> a) {
    if (a.size() == 1) return C(f(a[0].real(), 0.0));
    return C(f(a[0].real(), a[1].real()));
  });
}
template <class F>
Reference of_complex(F f) {
  return elementwise([f](std::span<const C> a) { return a.size() == 1 ? f(a[0], C()) : f(a[0], a[1]); });
}
template <class F>
Exact exactly(F f) {
  return
      [f](std::span<const i128> a, DType compute) { return f(a[0], a.size() > 1 ? a[1] : i128(0), compute); };
}

i128 int_pow(i128 x, i128 n, DType compute) {  // wrapping at every step, as the kernel does
  i128 r = 1;
  for (i128 k = 0; k < n; ++k) r = wrapped(r * x, compute);
  return r;
}

DType real_if_complex(DType d) { return is_complex(d) ? cpu::real_dtype(d) : d; }

std::vector<op_case> cases() {
  std::vector<op_case> c = {
      unary("neg", &T::neg, RIC, of_complex([](C a, C) { return -a; }),
            exactly([](i128 a, i128, DType) { return -a; })),
      unary("abs", &T::abs, RIC, of_complex([](C a, C) { return C(std::abs(a)); }),
            exactly([](i128 a, i128, DType) { return a < 0 ? -a : a; }), away_from_zero)
          .giving(real_if_complex),
      unary("sign", &T::sign, RI, of_real([](double a, double) { return double((a > 0) - (a < 0)); }),
            exactly([](i128 a, i128, DType) { return i128((a > 0) - (a < 0)); }), away_from_zero),
      unary("square", &T::square, RIC, of_complex([](C a, C) { return a * a; }),
            exactly([](i128 a, i128, DType) { return a * a; })),
      unary("exp", &T::exp, RC, of_complex([](C a, C) { return std::exp(a); })),
      unary("log", &T::log, RC, of_complex([](C a, C) { return std::log(a); }), {}, positive),
      unary("sin", &T::sin, RC, of_complex([](C a, C) { return std::sin(a); })),
      unary("cos", &T::cos, RC, of_complex([](C a, C) { return std::cos(a); })),
      unary("tanh", &T::tanh, RC, of_complex([](C a, C) { return std::tanh(a); })),
      unary("sqrt", &T::sqrt, RC, of_complex([](C a, C) { return std::sqrt(a); }), {}, positive),
      unary("rsqrt", &T::rsqrt, R, of_real([](double a, double) { return 1 / std::sqrt(a); }), {}, positive),
      unary("expm1", &T::expm1, R, of_real([](double a, double) { return std::expm1(a); })),
      unary("log1p", &T::log1p, R, of_real([](double a, double) { return std::log1p(a); }), {}, {-0.5, 2.0}),
      unary("sigmoid", &T::sigmoid, R, of_real([](double a, double) { return 1 / (1 + std::exp(-a)); })),
      // conj and real of a tensor that is not complex: the tensor itself.
      unary("conj", &T::conj, RIC, of_complex([](C a, C) { return std::conj(a); }),
            exactly([](i128 a, i128, DType) { return a; })),
      // Not holomorphic: conj(z) exp(z) checks the convention on both parts of the gradient.
      op_case{"conj",
              [](const Inputs& x) { return x[0].conj() * x[0].exp(); },
              {{5}},
              {{}},
              RC,
              of_complex([](C a, C) { return std::conj(a) * std::exp(a); })}
          .composite(),
      unary("real", &T::real, RIC, of_complex([](C a, C) { return C(a.real()); }),
            exactly([](i128 a, i128, DType) { return a; }))
          .giving(real_if_complex),
      unary("imag", &T::imag, {DType::C32, DType::C64}, of_complex([](C a, C) { return C(a.imag()); }))
          .giving(real_if_complex),
      unary("logical_not", &T::logical_not, RI, of_real([](double a, double) { return double(a == 0); }),
            exactly([](i128 a, i128, DType) { return i128(a == 0); }))
          .boolean(),

      binary("add", &T::add, RIC, of_complex([](C a, C b) { return a + b; }),
             exactly([](i128 a, i128 b, DType) { return a + b; }), {{3, 4}, {3, 4}}),
      binary("sub", &T::sub, RIC, of_complex([](C a, C b) { return a - b; }),
             exactly([](i128 a, i128 b, DType) { return a - b; }), {{3, 4}, {4}}),
      binary("mul", &T::mul, RIC, of_complex([](C a, C b) { return a * b; }),
             exactly([](i128 a, i128 b, DType) { return a * b; }), {{3, 1}, {1, 4}}),
      binary("div", &T::div, RIC, of_complex([](C a, C b) { return a / b; }),
             exactly([](i128 a, i128 b, DType) { return a / b; }), {{3, 4}, {}}, {}, away_from_zero)
          .integers({int_domain::any, int_domain::nonzero}),
      binary("rem", &T::rem, RI, of_real([](double a, double b) { return std::fmod(a, b); }),
             exactly([](i128 a, i128 b, DType) { return a % b; }), {{3, 4}, {3, 4}}, {}, away_from_zero)
          .integers({int_domain::any, int_domain::nonzero}),
      binary("pow", &T::pow, RIC, of_complex([](C a, C b) { return std::pow(a, b); }),
             exactly([](i128 a, i128 b, DType compute) { return int_pow(a, b, compute); }), {{3, 4}, {3, 4}},
             positive, {-1.5, 1.5})
          .integers({int_domain::any, int_domain::exponent}),
      binary("maximum", &T::maximum, RI, of_real([](double a, double b) { return std::max(a, b); }),
             exactly([](i128 a, i128 b, DType) { return std::max(a, b); }), {{3, 4}, {3, 4}}),
      binary("minimum", &T::minimum, RI, of_real([](double a, double b) { return std::min(a, b); }),
             exactly([](i128 a, i128 b, DType) { return std::min(a, b); }), {{3, 4}, {4}}),

      // With a number (whole, so that integers keep their dtype; fractions are refused there).
      {"mul_scalar",
       [](const Inputs& x) { return x[0].scale(-3.0); },
       {{5}},
       {{}},
       numbers,
       of_complex([](C a, C) { return -3.0 * a; }),
       exactly([](i128 a, i128, DType) { return -3 * a; })},
      {"add_scalar",
       [](const Inputs& x) { return x[0] + 2.0; },
       {{5}},
       {{}},
       numbers,
       of_complex([](C a, C) { return a + 2.0; }),
       exactly([](i128 a, i128, DType) { return a + 2; })},
      {"rsub_scalar",
       [](const Inputs& x) { return 3.0 - x[0]; },
       {{5}},
       {{}},
       numbers,
       of_complex([](C a, C) { return 3.0 - a; }),
       exactly([](i128 a, i128, DType) { return 3 - a; })},
      {"div_scalar",
       [](const Inputs& x) { return x[0] / 2.0; },
       {{5}},
       {{}},
       numbers,
       of_complex([](C a, C) { return a / 2.0; }),
       exactly([](i128 a, i128, DType) { return a / 2; })},
      {"rdiv_scalar",
       [](const Inputs& x) { return 6.0 / x[0]; },
       {{5}},
       {away_from_zero},
       numbers,
       of_complex([](C a, C) { return 6.0 / a; }),
       exactly([](i128 a, i128, DType) { return 6 / a; }),
       {int_domain::nonzero}},
  };

  // Comparisons and the binary logical ops: Bool results, no gradient. Each predicate is written
  // once, for doubles and (exactly) for 128-bit integers.
  using Real = bool (*)(double, double);
  using Whole = bool (*)(i128, i128);
  auto both = [](auto f) { return std::pair<Real, Whole>{f, f}; };
  const std::vector<std::tuple<std::string, EagerTensor (T::*)(const T&) const, std::pair<Real, Whole>>>
      predicates{
          {"eq", &T::eq, both([](auto a, auto b) { return a == b; })},
          {"ne", &T::ne, both([](auto a, auto b) { return a != b; })},
          {"lt", &T::lt, both([](auto a, auto b) { return a < b; })},
          {"le", &T::le, both([](auto a, auto b) { return a <= b; })},
          {"gt", &T::gt, both([](auto a, auto b) { return a > b; })},
          {"ge", &T::ge, both([](auto a, auto b) { return a >= b; })},
          {"logical_and", &T::logical_and, both([](auto a, auto b) { return a != 0 && b != 0; })},
          {"logical_or", &T::logical_or, both([](auto a, auto b) { return a != 0 || b != 0; })},
          {"logical_xor", &T::logical_xor, both([](auto a, auto b) { return (a != 0) != (b != 0); })},
      };
  for (const auto& [name, method, cmp] : predicates) {
    const auto [real, whole] = cmp;  // (init-captures below: clang 14 cannot capture bindings)
    c.push_back(
        binary(name, method, RI, of_real([real = real](double a, double b) { return double(real(a, b)); }),
               exactly([whole = whole](i128 a, i128 b, DType) { return i128(whole(a, b)); }), {{3, 4}, {4}})
            .boolean());
  }
  return c;
}

}  // namespace

TEST_CASE("every elementwise op in every dtype it accepts: values, promotion, vjp and jvp") {
  for (const op_case& c : cases()) run_case(c);
}

// The one-op expressions whose kernels are compiled once (cpu/kernel_list.inc), by entry name.
std::set<std::string> compiled_ops() {
  using namespace tenferro::cpu;
  std::set<std::string> names;
#define TENFERRO_KERNEL(E)                                  \
  if constexpr (tenferro::detail::ad::is_primitive_expr<E>) \
    names.insert(tenferro::detail::ad::primitive_name<E>());
#include <tenferro/cpu/kernel_list.inc>
#undef TENFERRO_KERNEL
  return names;
}

// Entries only derivative rules make: Iverson brackets, where_nonzero, and one-op expressions with
// the number on the side the public ops do not put it (x + s and x * s are add_scalar and
// mul_scalar whichever side s is written on).
bool derivative_helper(const std::string& name) {
  return name.starts_with("indicator_") || name == "where_nonzero" || name == "radd_scalar" ||
         name == "rmul_scalar" || name == "sub_scalar";
}

// Every elementwise op compiled into the library, and every elementwise entry registered in this
// process, is a case's: an op without a case fails here (derivative helpers aside); each case's
// dtypes are its entry's dtype rule.
TEST_CASE("the cases cover every elementwise entry and declare its dtype rule") {
  auto ctx = EagerRuntime::create();
  const auto all = cases();
  for (const op_case& c : all) {  // registers the entries the cases use
    for (const DType d : {c.dtypes.front(), c.dtypes.back()}) {
      Inputs in;
      for (const Shape& s : c.shapes) in.push_back(EagerTensor::requires_grad_in(Tensor::ones(s, d), ctx));
      (void)c.f(in);
    }
  }
  const auto& table = detail::ad::op_table();
  auto has = [](const op_case& c, DType d) {
    return std::find(c.dtypes.begin(), c.dtypes.end(), d) != c.dtypes.end();
  };
  std::set<std::string> covered{"complex_abs"};  // abs of a complex tensor (the abs case)
  for (const op_case& c : all) {
    INFO(c.op);
    const detail::ad::op_def* def = table.find(c.op);
    REQUIRE(def != nullptr);
    covered.insert(c.op);
    if (def->block == nullptr) continue;  // the complex parts: structural entries
    CHECK(def->integers == has(c, DType::I32));
    CHECK((def->complex || table.find("complex_" + c.op)) == has(c, DType::C64));
    CHECK(def->predicate == c.predicate);
  }
  for (const std::string& name : table.names()) {
    if (table.find(name)->block == nullptr || derivative_helper(name)) continue;
    INFO("the elementwise entry " << name << " has no case");
    CHECK(covered.count(name) == 1);
  }
  const auto compiled = compiled_ops();
  CHECK(compiled.size() >= 30);
  for (const std::string& name : compiled) {
    if (derivative_helper(name)) continue;
    INFO("the compiled op " << name << " has no case");
    CHECK(covered.count(name) == 1);
  }
}
