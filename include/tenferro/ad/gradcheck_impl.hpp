// gradcheck's definition (ad/gradcheck.hpp), compiled once with the runtime.
#pragma once

#include <tenferro/ad/gradcheck.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/cpu/common.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <optional>

namespace tenferro {

namespace detail::gradcheck {

using C = std::complex<double>;

inline std::vector<C> values_of(const Tensor& t) {
  const Tensor c = cpu::cast(t, DType::C64);
  const auto s = c.as_slice<C>();
  return {s.begin(), s.end()};
}

// The unit tensor of `shape` and `dtype` with `v` at column-major position i.
inline Tensor unit(const Shape& shape, DType dtype, std::size_t i, C v) {
  std::vector<C> e(checked_shape_size(shape).value());
  e[i] = v;
  return cpu::cast(Tensor::from_vec_col_major<C>(shape, std::move(e)), dtype);
}

inline std::vector<std::size_t> multi_index(std::size_t i, const Shape& s) {
  std::vector<std::size_t> at(s.size());
  for (std::size_t d = 0; d < s.size(); ++d) at[d] = i % s[d], i /= s[d];
  return at;
}

// fn's output at moved inputs, which must have the shape it had at the inputs (else fn is not one
// function of them: InvalidArgument naming gradcheck and both shapes).
inline const EagerTensor& same_shape(const EagerTensor& y, const Shape& shape) {
  if (y.shape() != shape) {
    throw_error(ErrorKind::InvalidArgument, "gradcheck",
                {"the function gave shape ", y.shape(), " at moved inputs but ", shape, " at the inputs"});
  }
  return y;
}

inline bool differentiable(DType d) { return is_floating(d) || is_complex(d); }
inline bool single(DType d) { return d == DType::F32 || d == DType::C32; }
inline DType wide(DType d) { return is_complex(d) ? DType::C64 : DType::F64; }

// The numeric Jacobian: column (input k, element i, part d) holds d output / d x_k[i] along d
// (1 or the imaginary unit), as the output's complex values.
struct numeric_jacobian {
  std::vector<std::vector<std::vector<C>>> columns;  // [k][i * parts + d]
};

}  // namespace detail::gradcheck

TENFERRO_INLINE GradcheckReport gradcheck(const GradcheckFn& fn, const std::vector<EagerTensor>& inputs,
                                          const GradcheckOptions& options) {
  namespace g = detail::gradcheck;
  using g::C;
  if (inputs.empty()) {
    throw_error(ErrorKind::InvalidArgument, "gradcheck", {"argument 'inputs' is empty: nothing to check"});
  }
  if (!NoGradGuard::grad_enabled()) {
    throw_error(ErrorKind::InvalidArgument, "gradcheck",
                {"recording is off (called inside a no_grad guard): the derivatives cannot be recorded"});
  }
  if (!(options.step > 0 && std::isfinite(options.step))) {
    throw_error(ErrorKind::InvalidArgument, "gradcheck",
                {"option 'step' is ", std::to_string(options.step), ": it must be finite and > 0"});
  }
  const std::shared_ptr<EagerRuntime> rt = detail::ad::common_runtime("gradcheck", inputs);

  // The leaves the analytic side differentiates, and fn's output at them.
  std::vector<EagerTensor> leaves;
  bool low_precision = false;
  for (const auto& x : inputs) {
    const bool d = g::differentiable(x.dtype());
    leaves.push_back(d ? rt->variable_from(x.materialized()) : x.detach());
    low_precision = low_precision || (d && g::single(x.dtype()));
  }
  const EagerTensor out = fn(leaves);
  if (!g::differentiable(out.dtype())) {
    throw_error(ErrorKind::InvalidArgument, "gradcheck",
                {"the function's output (shape ", out.shape(), ", dtype ", dtype_name(out.dtype()),
                 ") is not floating or complex: it has no derivative"});
  }
  low_precision = low_precision || g::single(out.dtype());
  const double atol = options.atol > 0 ? options.atol : low_precision ? 2e-3 : 1e-6;
  const double rtol = options.rtol > 0 ? options.rtol : low_precision ? 2e-3 : 1e-6;
  const Shape out_shape = out.shape();
  const std::size_t n_out = out.size();
  const std::size_t out_parts = is_complex(out.dtype()) ? 2 : 1;
  const C out_unit[2] = {C(1), C(0, 1)};

  // Numeric columns, at inputs that track grad, recording on: a function that differentiates
  // inside (a gradient, a Hessian-vector product) is evaluated as it is used.
  g::numeric_jacobian numeric;
  {
    std::vector<EagerTensor> at;
    for (const auto& x : inputs) {
      const bool d = g::differentiable(x.dtype());
      const Tensor v =
          d && options.wide_differences ? cpu::cast(x.materialized(), g::wide(x.dtype())) : x.materialized();
      at.push_back(d ? rt->variable_from(v) : x.detach());
    }
    numeric.columns.resize(inputs.size());
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (!g::differentiable(inputs[k].dtype())) continue;
      const EagerTensor x = at[k];
      const std::size_t parts = is_complex(x.dtype()) ? 2 : 1;
      for (std::size_t i = 0; i < x.size(); ++i) {
        for (std::size_t d = 0; d < parts; ++d) {
          const auto move = rt->constant_from(g::unit(x.shape(), x.dtype(), i, out_unit[d] * options.step));
          at[k] = x + move;
          const auto plus = g::values_of(g::same_shape(fn(at), out_shape).materialized());
          at[k] = x - move;
          const auto minus = g::values_of(g::same_shape(fn(at), out_shape).materialized());
          std::vector<C> column(n_out);
          for (std::size_t j = 0; j < n_out; ++j) column[j] = (plus[j] - minus[j]) / (2 * options.step);
          numeric.columns[k].push_back(std::move(column));
        }
      }
      at[k] = x;
    }
  }

  GradcheckReport report;
  auto compare = [&](const char* transform, std::size_t k, std::size_t i, std::size_t d, std::size_t j,
                     std::size_t c, double analytic) {
    const C n = numeric.columns[k][i * (is_complex(inputs[k].dtype()) ? 2 : 1) + d][j];
    const double numeric_entry = c == 0 ? n.real() : n.imag();
    const double bound = atol + rtol * std::abs(numeric_entry);
    double excess = std::abs(analytic - numeric_entry) / bound;
    if (std::isinf(analytic) || std::isinf(numeric_entry)) excess = analytic == numeric_entry ? 0 : INFINITY;
    if (std::isnan(analytic) != std::isnan(numeric_entry)) excess = INFINITY;
    if (std::isnan(analytic) && std::isnan(numeric_entry)) excess = 0;
    ++report.entries;
    if ((report.entries == 1 && report.worst.malformed.empty()) || excess > report.worst.excess) {
      report.worst = {transform,
                      k,
                      g::multi_index(i, inputs[k].shape()),
                      d == 1,
                      g::multi_index(j, out_shape),
                      c == 1,
                      analytic,
                      numeric_entry,
                      excess,
                      {}};
    }
  };

  // A derivative of the wrong shape or dtype fails the check outright (named in the report).
  auto malformed = [&](const char* transform, std::size_t k, const EagerTensor& got, const Shape& shape,
                       DType dtype) {
    if (got.shape() == shape && got.dtype() == dtype) return false;
    report.passed = false;
    if (report.worst.malformed.empty()) {
      report.worst = {transform,
                      k,
                      {},
                      false,
                      {},
                      false,
                      0,
                      0,
                      INFINITY,
                      "gave shape " + format_shape(got.shape()) + " " + std::string(dtype_name(got.dtype())) +
                          ", expected " + format_shape(shape) + " " + std::string(dtype_name(dtype))};
    }
    return true;
  };

  auto run = [&](bool kernel_rules) {
    std::optional<NoGradGuard> guard;
    if (kernel_rules) guard.emplace();
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (!g::differentiable(inputs[k].dtype())) continue;
      const Shape in_shape = inputs[k].shape();
      const std::size_t parts = is_complex(inputs[k].dtype()) ? 2 : 1;
      if (options.check_jvp) {  // column (i, d): the output's tangent
        for (std::size_t i = 0; i < inputs[k].size(); ++i) {
          for (std::size_t d = 0; d < parts; ++d) {
            const auto t = rt->constant_from(g::unit(in_shape, inputs[k].dtype(), i, out_unit[d]));
            const auto jvp = rt->jvp_optional(out, leaves[k], t);
            const char* name = kernel_rules ? "jvp (kernel rules)" : "jvp";
            if (jvp && malformed(name, k, *jvp, out_shape, out.dtype())) return;
            const std::vector<C> v = jvp ? g::values_of(jvp->materialized()) : std::vector<C>(n_out);
            for (std::size_t j = 0; j < n_out; ++j) {
              for (std::size_t c = 0; c < out_parts; ++c) {
                compare(name, k, i, d, j, c, c == 0 ? v[j].real() : v[j].imag());
              }
            }
          }
        }
      }
      if (options.check_vjp) {  // row (j, c): <vjp(c e_j), d e_i> = Re(conj(c) column(i, d)[j])
        for (std::size_t j = 0; j < n_out; ++j) {
          for (std::size_t c = 0; c < out_parts; ++c) {
            const auto cot = rt->constant_from(g::unit(out_shape, out.dtype(), j, out_unit[c]));
            const auto vjp = rt->vjp_optional(out, leaves[k], cot);
            const char* name = kernel_rules ? "vjp (kernel rules)" : "vjp";
            if (vjp && malformed(name, k, *vjp, in_shape, inputs[k].dtype())) return;
            const std::vector<C> v =
                vjp ? g::values_of(vjp->materialized()) : std::vector<C>(inputs[k].size());
            for (std::size_t i = 0; i < v.size(); ++i) {
              for (std::size_t d = 0; d < parts; ++d) {
                compare(name, k, i, d, j, c, d == 0 ? v[i].real() : v[i].imag());
              }
            }
          }
        }
      }
    }
  };
  run(false);
  if (options.kernel_rules) run(true);
  report.passed = report.passed && report.worst.excess <= 1;
  return report;
}

}  // namespace tenferro
