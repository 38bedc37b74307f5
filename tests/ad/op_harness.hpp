// The eager ops' one test harness. A case describes an op once (the op on eager tensors, its input
// shapes and domains, plain scalar references, the dtypes it accepts) and run_case() checks it in
// every one of those dtypes:
// - floating and complex: values against the reference (computed in f64 / c64 from the inputs as
//   stored); every Jacobian entry of the vjp and the jvp against central differences taken in
//   f64 / c64 by tenferro::gradcheck (complex inputs and outputs by their real and imaginary parts,
//   PyTorch's convention), in both rule forms (recorded while recording, kernels under no_grad);
//   backward() against the vjp; the tolerances are the dtype's;
// - integers and bool: values against an exact reference (128-bit arithmetic wrapped to the
//   dtype) over the dtype's edges paired with each other, also with a rank-0 second operand; the
//   result never tracks grad;
// - every other dtype: refused with Unsupported naming the op, the argument and the dtype, the
//   runtime usable after;
// - binary elementwise cases (those with an exact reference): for every pair of the seven dtypes, the result
// dtype is promote_types (Bool for
//   predicates) and the value is the op's on operands converted to it, or the pair is refused with
//   the op named; operands that do not broadcast are refused with the op and both shapes named.
#pragma once

#include "../errors.hpp"
#include "eager_testing.hpp"

#include <tenferro/apply.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace tenferro::test {

using C = std::complex<double>;
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

using Inputs = std::vector<EagerTensor>;
using Fn = std::function<EagerTensor(const Inputs&)>;
// The values of a result from its inputs' values (column-major) and shapes.
using Reference =
    std::function<std::vector<C>(const std::vector<std::vector<C>>&, const std::vector<Shape>&)>;
// One element of an integer or bool result, exactly; `compute` is the dtype the op computes in
// (i32 for bools), for references that wrap on the way (pow).
using Exact = std::function<i128(std::span<const i128>, DType compute)>;

// Where an integer input is drawn: anything (the dtype's edges first), nonzero (a divisor), or a
// small non-negative exponent.
enum class int_domain { any, nonzero, exponent };

inline const std::vector<DType> real_dtypes{DType::F32, DType::F64};
inline const std::vector<DType> real_or_complex_dtypes{DType::F32, DType::F64, DType::C32, DType::C64};
inline const std::vector<DType> all_dtypes{DType::F32,  DType::F64, DType::I32, DType::I64,
                                           DType::Bool, DType::C32, DType::C64};

struct op_case {
  std::string op;  // the op as the user calls it (with what distinguishes the case)
  Fn f;
  std::vector<Shape> shapes;
  std::vector<domain> domains;  // floating inputs; complex ones draw |Re| and |Im| from it, signs at random
  std::vector<DType> dtypes{DType::F32, DType::F64};
  Reference reference{};  // values in floating and complex dtypes (none: derivatives only)
  Exact exact{};          // values in integer and bool dtypes (elementwise cases)
  std::vector<int_domain> int_domains{};
  bool differentiable = true;
  std::function<DType(DType)> result{};  // the result dtype for an input dtype (none: promoted)
  bool predicate = false;                // the result is Bool
  bool refuses_others = true;            // inputs of any other dtype are refused (Unsupported)

  op_case&& giving(std::function<DType(DType)> r) && {
    result = std::move(r);
    return std::move(*this);
  }
  op_case&& boolean() && {  // a predicate: Bool results, no gradient
    predicate = true;
    differentiable = false;
    return std::move(*this);
  }
  op_case&& composite() && {  // several ops: refusals are its parts' (checked in their cases)
    refuses_others = false;
    return std::move(*this);
  }
  op_case&& integers(std::vector<int_domain> d) && {
    int_domains = std::move(d);
    return std::move(*this);
  }
};

// ---- references -------------------------------------------------------------------------------

// Column-major index of input `in` for the element at multi-index `at` of the broadcast shape.
inline std::size_t broadcast_index(const Shape& in, const std::vector<std::size_t>& at) {
  std::size_t index = 0, stride = 1;
  const std::size_t skip = at.size() - in.size();
  for (std::size_t d = 0; d < in.size(); ++d) {
    index += (in[d] == 1 ? 0 : at[skip + d]) * stride;
    stride *= in[d];
  }
  return index;
}

// The multi-index of column-major position i in shape s, and back.
inline std::vector<std::size_t> index_of(std::size_t i, const Shape& s) {
  std::vector<std::size_t> at(s.size());
  for (std::size_t d = 0; d < s.size(); ++d) at[d] = i % s[d], i /= s[d];
  return at;
}
inline std::size_t position_of(const std::vector<std::size_t>& at, const Shape& s) {
  std::size_t p = 0, stride = 1;
  for (std::size_t d = 0; d < s.size(); ++d) p += at[d] * stride, stride *= s[d];
  return p;
}

// f throws a tenferro::Error of `kind` whose message names `op` and holds every one of `parts`.
template <class F>
void check_refusal(F f, ErrorKind kind, std::string_view op, const std::vector<std::string>& parts) {
  const std::string msg = message_of(f);
  INFO(msg);
  CHECK(kind_of(f) == kind);
  CHECK(msg.find(op) != std::string::npos);
  for (const auto& p : parts) CHECK(msg.find(p) != std::string::npos);
}

inline Shape broadcast_all(const std::vector<Shape>& shapes) {
  Shape out;
  for (const Shape& s : shapes) {
    auto b = broadcast_shapes(out, s);
    REQUIRE(b.has_value());
    out = *b;
  }
  return out;
}

// f over the broadcast elements of the inputs.
template <class T, class F>
std::vector<T> broadcast_apply(const std::vector<std::vector<T>>& in, const std::vector<Shape>& shapes, F f) {
  const Shape out = broadcast_all(shapes);
  std::size_t n = 1;
  for (const std::size_t e : out) n *= e;
  std::vector<T> r(n), args(in.size());
  std::vector<std::size_t> at(out.size(), 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < in.size(); ++k) args[k] = in[k][broadcast_index(shapes[k], at)];
    r[i] = f(std::span<const T>(args));
    for (std::size_t d = 0; d < at.size() && ++at[d] == out[d]; ++d) at[d] = 0;
  }
  return r;
}

// A reference of an elementwise op from its value at one element (operands as complex numbers; the
// imaginary parts of real operands are 0).
template <class F>
Reference elementwise(F f) {
  return [f](const std::vector<std::vector<C>>& in, const std::vector<Shape>& shapes) {
    return broadcast_apply<C>(in, shapes, f);
  };
}

// out[o] = in[k][at] where source(o) = (k, at) over an output shape (nullopt: a zero).
using Source = std::optional<std::pair<std::size_t, std::vector<std::size_t>>>;
template <class F>
Reference picked(Shape out, F source) {
  return [=](const std::vector<std::vector<C>>& in, const std::vector<Shape>& s) {
    std::vector<C> r;
    for (std::size_t o = 0; o < checked_shape_size(out).value(); ++o) {
      const Source at = source(index_of(o, out));
      r.push_back(at ? in[at->first][position_of(at->second, s[at->first])] : C(0));
    }
    return r;
  };
}
// v modulo 2^bits of the dtype (nonzero for Bool).
inline i128 wrapped(i128 v, DType dtype) {
  switch (dtype) {
    case DType::I32:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<u128>(v)));
    case DType::I64:
      return static_cast<std::int64_t>(static_cast<std::uint64_t>(static_cast<u128>(v)));
    case DType::Bool:
      return v != 0;
    default:
      FAIL("not an integer dtype");
      return 0;
  }
}

// ---- tensors as vectors -------------------------------------------------------------------------

inline std::vector<C> complex_values(const Tensor& t) {
  const Tensor c = cpu::cast(t, DType::C64);
  const auto s = c.as_slice<C>();
  return {s.begin(), s.end()};
}

inline Tensor tensor_of(const Shape& shape, const std::vector<C>& v, DType dtype) {
  if (is_complex(dtype)) return cpu::cast(Tensor::from_vec_col_major<C>(shape, v), dtype);
  std::vector<double> re(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) re[i] = v[i].real();
  return cpu::cast(Tensor::from_vec_col_major<double>(shape, re), dtype);
}

inline std::vector<i128> exact_values(const Tensor& t) {
  std::vector<i128> out;
  switch (t.dtype()) {
    case DType::I32:
      for (const auto v : t.as_slice<std::int32_t>()) out.push_back(v);
      break;
    case DType::I64:
      for (const auto v : t.as_slice<std::int64_t>()) out.push_back(v);
      break;
    case DType::Bool:
      for (const bool v : t.as_slice<bool>()) out.push_back(v);
      break;
    default:
      FAIL("not an integer dtype: " << dtype_name(t.dtype()));
  }
  return out;
}

inline Tensor exact_tensor(const Shape& shape, const std::vector<i128>& v, DType dtype) {
  switch (dtype) {
    case DType::I32:
      return Tensor::from_vec_col_major<std::int32_t>(shape, {v.begin(), v.end()});
    case DType::I64:
      return Tensor::from_vec_col_major<std::int64_t>(shape, {v.begin(), v.end()});
    default: {
      std::vector<bool> b(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) b[i] = v[i] != 0;
      return Tensor::from_vec_col_major<bool>(shape, b);
    }
  }
}

// ---- the checks -------------------------------------------------------------------------------

inline DType result_dtype(const op_case& c, DType in) {
  if (c.predicate) return DType::Bool;
  return c.result ? c.result(in) : in;
}

inline std::vector<C> random_inputs(std::size_t n, domain d, bool complex, std::mt19937& rng) {
  std::vector<C> v(n);
  const auto re = random_values(n, d, rng);
  if (!complex) {
    for (std::size_t i = 0; i < n; ++i) v[i] = re[i];
    return v;
  }
  const auto im = random_values(n, d, rng);
  std::bernoulli_distribution coin(0.5);
  for (std::size_t i = 0; i < n; ++i) v[i] = C(coin(rng) ? -re[i] : re[i], coin(rng) ? -im[i] : im[i]);
  return v;
}

inline double real_dot(const std::vector<C>& a, const std::vector<C>& b) {  // Re sum conj(a) b
  REQUIRE(a.size() == b.size());
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (std::conj(a[i]) * b[i]).real();
  return s;
}

inline void require_close_c(const std::vector<C>& got, const std::vector<C>& want, double tol,
                            const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << " element " << i << ": got " << got[i] << ", want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

// Values, and vjp and jvp against central differences, in a floating or complex dtype.
inline void check_floating(const op_case& c, DType dtype);
// Values against the exact reference in an integer or bool dtype.
inline void check_exact(const op_case& c, DType dtype);
// Promotion for every dtype pair, and operands that do not broadcast (binary cases).
inline void check_pairs(const op_case& c);
// The dtypes the case does not accept are refused.
inline void check_refusals(const op_case& c);

// Every check of a case, in every dtype it accepts.
inline void run_case(const op_case& c) {
  for (const DType dtype : c.dtypes) {
    INFO("op " << c.op << " in " << dtype_name(dtype));
    if (is_integer(dtype) || dtype == DType::Bool) {
      REQUIRE(c.exact);  // an integer or bool dtype needs the exact reference
      check_exact(c, dtype);
    } else {
      check_floating(c, dtype);
    }
  }
  if (c.refuses_others) check_refusals(c);
  if (c.shapes.size() == 2 && c.exact) check_pairs(c);  // binary elementwise cases
}

}  // namespace tenferro::test

#include "op_harness_checks.hpp"
