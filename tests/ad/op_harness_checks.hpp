// The checks run_case() makes (op_harness.hpp).
#pragma once

#include "op_harness.hpp"

namespace tenferro::test {

inline void check_floating(const op_case& c, DType dtype) {
  auto ctx = EagerRuntime::create();
  std::mt19937 rng(1234);
  const bool complex = is_complex(dtype);
  const bool single = dtype == DType::F32 || dtype == DType::C32;
  std::vector<std::vector<C>> x0;  // the inputs as stored (rounded to the dtype)
  Inputs inputs;
  for (std::size_t k = 0; k < c.shapes.size(); ++k) {
    const Tensor t =
        tensor_of(c.shapes[k],
                  random_inputs(checked_shape_size(c.shapes[k]).value(), c.domains[k], complex, rng), dtype);
    x0.push_back(complex_values(t));
    inputs.push_back(EagerTensor::requires_grad_in(t, ctx));
  }
  const EagerTensor out = c.f(inputs);
  REQUIRE(out.dtype() == result_dtype(c, dtype));
  if (c.reference) {
    const auto want = c.reference(x0, c.shapes);
    require_close_c(complex_values(out.materialized()), want, single ? 2e-5 : 1e-13, "value");
  }
  if (!c.differentiable) {
    CHECK_FALSE(out.tracks_grad());
    return;
  }
  REQUIRE(out.tracks_grad());
  // Every Jacobian entry of the vjp and the jvp, in both rule forms, against central differences.
  const GradcheckReport report = gradcheck(c.f, inputs);
  INFO(report);
  CHECK(report.passed);

  // backward() leaves the vjp of its seed in the slots (complex outputs: through a real loss whose
  // gradient is the vjp of the same cotangent).
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    INFO("backward into input " << k);
    const bool complex_out = is_complex(out.dtype());
    const auto cot = random_inputs(out.size(), {}, complex_out, rng);
    const auto cotangent = EagerTensor::from_tensor_in(tensor_of(out.shape(), cot, out.dtype()), ctx);
    const Tensor want = ctx->vjp(out, inputs[k], cotangent).materialized();
    ctx->clear_grads();
    if (complex_out) {  // the real loss sum(Re cot Re f + Im cot Im f)
      std::vector<C> re(cot.size()), im(cot.size());
      for (std::size_t i = 0; i < cot.size(); ++i) re[i] = cot[i].real(), im[i] = cot[i].imag();
      const DType real = cpu::real_dtype(out.dtype());
      const auto wr = EagerTensor::from_tensor_in(tensor_of(out.shape(), re, real), ctx);
      const auto wi = EagerTensor::from_tensor_in(tensor_of(out.shape(), im, real), ctx);
      (out.real() * wr + out.imag() * wi).reduce_sum().backward();
    } else {
      out.backward_with(cotangent);
    }
    const Tensor got = *inputs[k].grad();
    CHECK(got.dtype() == dtype);
    require_close_c(complex_values(got), complex_values(want), single ? 1e-5 : 1e-13, "backward");
  }
}

// Integer operands: the dtype's edges (extremes, -1, 0, 1, ...) paired with each other, then random
// values; bools: 0 and 1.
inline std::vector<std::vector<i128>> exact_inputs(const op_case& c, DType dtype, std::size_t n) {
  std::vector<i128> edges{0, 1};
  i128 lo = 0, hi = 1;
  if (dtype == DType::I32 || dtype == DType::I64) {
    lo = dtype == DType::I32 ? i128(std::numeric_limits<std::int32_t>::lowest())
                             : i128(std::numeric_limits<std::int64_t>::lowest());
    hi = dtype == DType::I32 ? i128(std::numeric_limits<std::int32_t>::max())
                             : i128(std::numeric_limits<std::int64_t>::max());
    edges = {hi, lo, -1, 0, 1, hi - 1, 7, -7};
  }
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::int64_t> any(static_cast<std::int64_t>(lo),
                                                  static_cast<std::int64_t>(hi));
  std::uniform_int_distribution<std::int64_t> small(
      0, std::min<std::int64_t>(40, static_cast<std::int64_t>(hi)));
  std::vector<std::vector<i128>> in(c.shapes.size(), std::vector<i128>(n));
  const std::size_t e = edges.size();
  for (std::size_t k = 0; k < in.size(); ++k) {
    const int_domain d = k < c.int_domains.size() ? c.int_domains[k] : int_domain::any;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t pick = k == 0 ? i % e : i / e;  // all pairs of edges first
      i128 v = d == int_domain::exponent ? i128(small(rng)) : i < e * e ? edges[pick % e] : i128(any(rng));
      if (d == int_domain::nonzero && v == 0) v = dtype == DType::Bool ? 1 : -1;
      in[k][i] = v;
    }
  }
  return in;
}

inline void check_exact(const op_case& c, DType dtype) {
  auto ctx = EagerRuntime::create();
  const std::size_t n = 1000;  // the edges pairwise, then random; many SIMD batches and a tail
  const auto values = exact_inputs(c, dtype, n);
  const DType compute = dtype == DType::Bool ? DType::I32 : dtype;
  const DType out_dtype = result_dtype(c, dtype);
  // Every input of shape [n]; then (binary ops) the second one of rank 0 (a broadcast register),
  // holding each of the values its first elements hold (the dtype's edges) in turn.
  const std::size_t edges = dtype == DType::Bool ? 2 : 8;
  for (std::size_t round = 0; round <= (values.size() < 2 ? 0 : edges); ++round) {
    const bool rank0 = round > 0;
    std::vector<Shape> shapes(values.size(), Shape{n});
    Inputs inputs;
    std::vector<std::vector<i128>> used = values;
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (rank0 && k == 1) {
        shapes[k] = {};
        used[k] = {values[k][(round - 1) * edges]};
      }
      inputs.push_back(EagerTensor::requires_grad_in(exact_tensor(shapes[k], used[k], dtype), ctx));
    }
    INFO((rank0 ? "second operand of rank 0" : "operands of shape [n]"));
    const EagerTensor out = c.f(inputs);
    REQUIRE(out.dtype() == out_dtype);
    if (out.state() != inputs[0].state()) CHECK_FALSE(out.tracks_grad());  // (conj of an integer: itself)
    const auto got = exact_values(out.materialized());
    const auto want = broadcast_apply<i128>(
        used, shapes, [&](std::span<const i128> a) { return wrapped(c.exact(a, compute), out_dtype); });
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i << ": operands " << static_cast<long long>(used[0][i]) << ", "
                      << (used.size() > 1 ? static_cast<long long>(used[1][rank0 ? 0 : i]) : 0));
      REQUIRE(static_cast<long long>(got[i]) == static_cast<long long>(want[i]));
    }
  }
}

inline void check_pairs(const op_case& c) {
  auto ctx = EagerRuntime::create();
  const Shape shape{3};
  // In every dtype (true for a bool); equal, then different with fractional quotients; no zero
  // divisor.
  const std::vector<C> xs{3, 5, 7}, ys{3, 2, 4};
  for (const DType a : all_dtypes) {
    for (const DType b : all_dtypes) {
      INFO(c.op << " of " << dtype_name(a) << " and " << dtype_name(b));
      const auto x = EagerTensor::from_tensor_in(tensor_of(shape, xs, a), ctx);
      const auto y = EagerTensor::from_tensor_in(tensor_of(shape, ys, b), ctx);
      const DType p = promote_types(a, b);
      if (std::find(c.dtypes.begin(), c.dtypes.end(), p) == c.dtypes.end()) {
        const std::string msg = message_of([&] { (void)c.f({x, y}); });
        INFO(msg);
        CHECK(msg.rfind("Unsupported in " + c.op, 0) == 0);
        CHECK(msg.find("argument") != std::string::npos);
        CHECK(msg.find("[3]") != std::string::npos);
        CHECK((msg.find(dtype_name(a)) != std::string::npos || msg.find(dtype_name(b)) != std::string::npos));
        continue;
      }
      const EagerTensor r = c.f({x, y});
      REQUIRE(r.dtype() == result_dtype(c, p));
      const EagerTensor same = c.f({x.to(p), y.to(p)});
      CHECK(complex_values(r.materialized()) == complex_values(same.materialized()));
    }
  }
  // Shapes that do not broadcast: the op and both shapes in the message; the runtime stays usable.
  const auto x = EagerTensor::from_tensor_in(Tensor::ones({3, 2}, c.dtypes.back()), ctx);
  const auto y = EagerTensor::from_tensor_in(Tensor::ones({4}, c.dtypes.back()), ctx);
  const std::string msg = message_of([&] { (void)c.f({x, y}); });
  INFO(msg);
  CHECK(msg.rfind("ShapeMismatch in " + c.op, 0) == 0);
  CHECK(msg.find("[3, 2]") != std::string::npos);
  CHECK(msg.find("[4]") != std::string::npos);
  CHECK(c.f({x, x}).shape() == Shape{3, 2});
}

inline void check_refusals(const op_case& c) {
  auto ctx = EagerRuntime::create();
  for (const DType d : all_dtypes) {
    if (std::find(c.dtypes.begin(), c.dtypes.end(), d) != c.dtypes.end()) continue;
    INFO(c.op << " of " << dtype_name(d));
    Inputs in;
    for (const Shape& s : c.shapes) in.push_back(EagerTensor::requires_grad_in(Tensor::ones(s, d), ctx));
    const std::string msg = message_of([&] { (void)c.f(in); });
    INFO(msg);
    CHECK(msg.rfind("Unsupported in " + c.op, 0) == 0);
    CHECK(msg.find("argument") != std::string::npos);
    CHECK(msg.find(dtype_name(d)) != std::string::npos);
  }
  // The runtime stays usable.
  Inputs in;
  for (const Shape& s : c.shapes)
    in.push_back(EagerTensor::from_tensor_in(Tensor::ones(s, c.dtypes.back()), ctx));
  CHECK(c.f(in).size() > 0);
}

}  // namespace tenferro::test
