// The eager ops of EagerTensor, each recorded as a node of its op-table entry (ad/op.hpp).
// Elementwise ops are the entries of one-op expressions (ad/ops/expression.hpp): their forward,
// vjp and jvp are compile-time-layer kernels. Structural ops run CPU kernels and record the rules
// of ad/rules.hpp.
//
// Every op validates first (runtime, dtypes, shapes, axes) and records nothing when it throws.
// Under TENFERRO_SEPARATE_COMPILATION the op definitions are compiled once (core/detail/config.hpp).
#pragma once

#include <tenferro/ad/complex_rules.hpp>
#include <tenferro/ad/ops/assemble.hpp>
#include <tenferro/ad/ops/contraction.hpp>
#include <tenferro/ad/ops/expression.hpp>
#include <tenferro/ad/ops/indexing.hpp>
#include <tenferro/ad/ops/reductions.hpp>
#include <tenferro/ad/ops/selection.hpp>
#include <tenferro/ad/ops/slicing.hpp>
#include <tenferro/ad/rules.hpp>
#include <tenferro/core/detail/config.hpp>

#include <array>

namespace tenferro {

namespace detail::ad {

template <class Op>
EagerTensor unary_op(const EagerTensor& x) {
  using E = cpu::unary_expr<Op>;
  return record_expression<E, node_kind::primitive>(Op::name, E(expr::arg<0>{}), std::span(&x, 1));
}

template <class Op>
EagerTensor binary_op(const EagerTensor& a, const EagerTensor& b, std::string_view name) {
  using E = cpu::binary_expr<Op>;
  const std::array<EagerTensor, 2> in{a, b};
  return record_expression<E, node_kind::primitive>(name, E(expr::arg<0>{}, expr::arg<1>{}), in);
}

// x op s (Left = false) or s op x (Left = true) for a number s.
template <class Op, bool Left>
EagerTensor number_op(const EagerTensor& x, double s, std::string_view name) {
  using E = std::conditional_t<Left, cpu::number_lhs_expr<Op>, cpu::number_rhs_expr<Op>>;
  if constexpr (Left) {
    return record_expression<E, node_kind::primitive>(name, E(expr::constant(s), expr::arg<0>{}),
                                                      std::span(&x, 1));
  } else {
    return record_expression<E, node_kind::primitive>(name, E(expr::arg<0>{}, expr::constant(s)),
                                                      std::span(&x, 1));
  }
}

}  // namespace detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace detail::ad {

// An integer division by zero and an integer power with a negative exponent have no integer
// value: InvalidArgument naming the op and argument k, before anything runs or records. Nothing
// to check when the op computes in a floating dtype.
TENFERRO_INLINE void check_integer_operand(std::string_view op, std::span<const EagerTensor> in,
                                           std::size_t k, bool exponent) {
  if (is_floating(promoted_dtype(in)) || is_complex(promoted_dtype(in))) return;
  const Tensor v = in[k].materialized();
  if (exponent ? cpu::has_negative(v) : cpu::has_zero(v)) {
    throw_error(ErrorKind::InvalidArgument, op,
                {"argument ", k, " (shape ", v.extents(), ", dtype ", dtype_name(v.dtype()),
                 exponent ? ") holds a negative exponent: an integer power takes exponents >= 0"
                          : ") holds a zero: an integer division by zero has no value"});
  }
}

// Part p of a complex tensor (conj, real, imag, abs) as a node of its entry.
TENFERRO_INLINE EagerTensor complex_part_op(const EagerTensor& z, cpu::complex_part p,
                                            std::string_view name) {
  Tensor value =
      z.context()->backend().run(z.size(), [&] { return cpu::part_of(z.materialized(), p, name); });
  const complex_part_rule rule{p, z.dtype()};
  const std::span<const EagerTensor> in(&z, 1);
  switch (p) {
    case cpu::complex_part::conj:
      return record_rule<"conj">(in, std::move(value), rule);
    case cpu::complex_part::real:
      return record_rule<"real">(in, std::move(value), rule);
    case cpu::complex_part::imag:
      return record_rule<"imag">(in, std::move(value), rule);
    case cpu::complex_part::abs:
      break;
  }
  return record_rule<"complex_abs">(in, std::move(value), rule);
}

}  // namespace detail::ad

namespace detail::ad {

TENFERRO_INLINE EagerTensor reduce_op(const EagerTensor& x, cpu::Reduce kind, const std::optional<Axes>& axes,
                                      std::string_view name) {
  auto mask = cpu::reduce_mask(name, x.shape(), axes);
  // The sum of every element of a deferred value is summed as the value is computed (deferred.hpp).
  std::optional<Tensor> fused;
  if ((kind == cpu::Reduce::sum || kind == cpu::Reduce::mean) && x.state()->deferred() &&
      std::ranges::all_of(mask, [](bool b) { return b; })) {
    fused = sum_deferred(*x.state());
    if (fused && kind == cpu::Reduce::mean) {
      fused = cpu::visit_real(fused->dtype(), [&]<class T>(T) {
        return cpu::scalar_tensor<T>(fused->as_slice<T>()[0] / static_cast<T>(x.size()));
      });
    }
  }
  Tensor value = fused ? std::move(*fused) : x.context()->backend().run(x.size(), [&] {
    return cpu::reduce(kind, x.materialized(), mask, name);
  });
  const reduce_rule rule{kind, std::move(mask), x.shape()};
  const std::span<const EagerTensor> in(&x, 1);
  switch (kind) {
    case cpu::Reduce::sum:
      return record_rule<"reduce_sum">(in, std::move(value), rule);
    case cpu::Reduce::prod:
      return record_rule<"reduce_prod">(in, std::move(value), rule);
    case cpu::Reduce::max:
      return record_rule<"reduce_max">(in, std::move(value), rule);
    case cpu::Reduce::min:
      return record_rule<"reduce_min">(in, std::move(value), rule);
    case cpu::Reduce::mean:
      break;
  }
  return record_rule<"reduce_mean">(in, std::move(value), rule);
}

}  // namespace detail::ad

TENFERRO_INLINE EagerTensor EagerTensor::add(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::add>(*this, o, "add");
}
TENFERRO_INLINE EagerTensor EagerTensor::sub(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::sub>(*this, o, "sub");
}
TENFERRO_INLINE EagerTensor EagerTensor::mul(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::mul>(*this, o, "mul");
}
TENFERRO_INLINE EagerTensor EagerTensor::div(const EagerTensor& o) const {
  detail::ad::check_integer_operand("div", std::array{*this, o}, 1, false);
  return detail::ad::binary_op<expr::ops::div>(*this, o, "div");
}
TENFERRO_INLINE EagerTensor EagerTensor::rem(const EagerTensor& o) const {
  detail::ad::check_integer_operand("rem", std::array{*this, o}, 1, false);
  return detail::ad::binary_op<expr::ops::rem>(*this, o, "rem");
}
TENFERRO_INLINE EagerTensor EagerTensor::pow(const EagerTensor& o) const {
  detail::ad::check_integer_operand("pow", std::array{*this, o}, 1, true);
  return detail::ad::binary_op<expr::ops::pow>(*this, o, "pow");
}

TENFERRO_INLINE EagerTensor EagerTensor::eq(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::indicator<expr::ops::eq>>(*this, o, "eq");
}
TENFERRO_INLINE EagerTensor EagerTensor::ne(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::indicator<expr::ops::ne>>(*this, o, "ne");
}
TENFERRO_INLINE EagerTensor EagerTensor::lt(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::indicator<expr::ops::lt>>(*this, o, "lt");
}
TENFERRO_INLINE EagerTensor EagerTensor::le(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::indicator<expr::ops::le>>(*this, o, "le");
}
TENFERRO_INLINE EagerTensor EagerTensor::gt(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::indicator<expr::ops::gt>>(*this, o, "gt");
}
TENFERRO_INLINE EagerTensor EagerTensor::ge(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::indicator<expr::ops::ge>>(*this, o, "ge");
}
TENFERRO_INLINE EagerTensor EagerTensor::logical_and(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::logical_and>(*this, o, "logical_and");
}
TENFERRO_INLINE EagerTensor EagerTensor::logical_or(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::logical_or>(*this, o, "logical_or");
}
TENFERRO_INLINE EagerTensor EagerTensor::logical_xor(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::logical_xor>(*this, o, "logical_xor");
}
TENFERRO_INLINE EagerTensor EagerTensor::logical_not() const {
  return detail::ad::unary_op<expr::ops::logical_not>(*this);
}
TENFERRO_INLINE EagerTensor EagerTensor::maximum(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::maximum>(*this, o, "maximum");
}
TENFERRO_INLINE EagerTensor EagerTensor::minimum(const EagerTensor& o) const {
  return detail::ad::binary_op<expr::ops::minimum>(*this, o, "minimum");
}

TENFERRO_INLINE EagerTensor EagerTensor::neg() const { return detail::ad::unary_op<expr::ops::neg>(*this); }
TENFERRO_INLINE EagerTensor EagerTensor::abs() const {
  if (is_complex(dtype())) return detail::ad::complex_part_op(*this, cpu::complex_part::abs, "abs");
  return detail::ad::unary_op<expr::ops::abs>(*this);
}
TENFERRO_INLINE EagerTensor EagerTensor::conj() const {
  if (!is_complex(dtype())) return *this;
  return detail::ad::complex_part_op(*this, cpu::complex_part::conj, "conj");
}
TENFERRO_INLINE EagerTensor EagerTensor::real() const {
  if (!is_complex(dtype())) return *this;
  return detail::ad::complex_part_op(*this, cpu::complex_part::real, "real");
}
TENFERRO_INLINE EagerTensor EagerTensor::imag() const {
  return detail::ad::complex_part_op(*this, cpu::complex_part::imag, "imag");
}
TENFERRO_INLINE EagerTensor EagerTensor::sign() const { return detail::ad::unary_op<expr::ops::sign>(*this); }
TENFERRO_INLINE EagerTensor EagerTensor::exp() const { return detail::ad::unary_op<expr::ops::exp>(*this); }
TENFERRO_INLINE EagerTensor EagerTensor::log() const { return detail::ad::unary_op<expr::ops::log>(*this); }
TENFERRO_INLINE EagerTensor EagerTensor::sin() const { return detail::ad::unary_op<expr::ops::sin>(*this); }
TENFERRO_INLINE EagerTensor EagerTensor::cos() const { return detail::ad::unary_op<expr::ops::cos>(*this); }
TENFERRO_INLINE EagerTensor EagerTensor::tanh() const { return detail::ad::unary_op<expr::ops::tanh>(*this); }
TENFERRO_INLINE EagerTensor EagerTensor::sqrt() const { return detail::ad::unary_op<expr::ops::sqrt>(*this); }
TENFERRO_INLINE EagerTensor EagerTensor::rsqrt() const {
  return detail::ad::unary_op<expr::ops::rsqrt>(*this);
}
TENFERRO_INLINE EagerTensor EagerTensor::expm1() const {
  return detail::ad::unary_op<expr::ops::expm1>(*this);
}
TENFERRO_INLINE EagerTensor EagerTensor::log1p() const {
  return detail::ad::unary_op<expr::ops::log1p>(*this);
}
TENFERRO_INLINE EagerTensor EagerTensor::square() const {
  return detail::ad::unary_op<expr::ops::square>(*this);
}
TENFERRO_INLINE EagerTensor EagerTensor::sigmoid() const {
  return detail::ad::unary_op<expr::ops::sigmoid>(*this);
}

TENFERRO_INLINE EagerTensor EagerTensor::scale(double s) const {
  return detail::ad::number_op<expr::ops::mul, false>(*this, s, "scale");
}
TENFERRO_INLINE EagerTensor EagerTensor::add_scalar(double s) const {
  return detail::ad::number_op<expr::ops::add, false>(*this, s, "add_scalar");
}
TENFERRO_INLINE EagerTensor EagerTensor::rsub_scalar(double s) const {
  return detail::ad::number_op<expr::ops::sub, true>(*this, s, "rsub_scalar");
}
TENFERRO_INLINE EagerTensor EagerTensor::div_scalar(double s) const {
  if (s == 0 && !is_floating(dtype())) {
    throw_error(ErrorKind::InvalidArgument, "div_scalar",
                {"the divisor is 0 and the tensor (shape ", state_->extents(), ") has dtype ",
                 dtype_name(dtype()), ": an integer division by zero has no value"});
  }
  return detail::ad::number_op<expr::ops::div, false>(*this, s, "div_scalar");
}
TENFERRO_INLINE EagerTensor EagerTensor::rdiv_scalar(double s) const {
  detail::ad::check_integer_operand("rdiv_scalar", std::span(this, 1), 0, false);
  return detail::ad::number_op<expr::ops::div, true>(*this, s, "rdiv_scalar");
}

TENFERRO_INLINE EagerTensor EagerTensor::reduce_sum() const {
  return detail::ad::reduce_op(*this, cpu::Reduce::sum, std::nullopt, "reduce_sum");
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_sum(const Axes& axes) const {
  return detail::ad::reduce_op(*this, cpu::Reduce::sum, axes, "reduce_sum");
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_prod() const {
  return detail::ad::reduce_op(*this, cpu::Reduce::prod, std::nullopt, "reduce_prod");
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_prod(const Axes& axes) const {
  return detail::ad::reduce_op(*this, cpu::Reduce::prod, axes, "reduce_prod");
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_max() const {
  return detail::ad::reduce_op(*this, cpu::Reduce::max, std::nullopt, "reduce_max");
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_max(const Axes& axes) const {
  return detail::ad::reduce_op(*this, cpu::Reduce::max, axes, "reduce_max");
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_min() const {
  return detail::ad::reduce_op(*this, cpu::Reduce::min, std::nullopt, "reduce_min");
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_min(const Axes& axes) const {
  return detail::ad::reduce_op(*this, cpu::Reduce::min, axes, "reduce_min");
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_mean() const {
  return detail::ad::reduce_op(*this, cpu::Reduce::mean, std::nullopt, "reduce_mean");
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_mean(const Axes& axes) const {
  return detail::ad::reduce_op(*this, cpu::Reduce::mean, axes, "reduce_mean");
}

TENFERRO_INLINE EagerTensor EagerTensor::reshape(const Shape& shape) const {
  Tensor value = cpu::reshape(materialized(), shape, "reshape");
  return detail::ad::record_rule<"reshape">(std::span(this, 1), std::move(value),
                                            detail::ad::reshape_rule{this->shape(), shape});
}

TENFERRO_INLINE EagerTensor EagerTensor::transpose(const Axes& perm) const {
  Tensor value = cpu::transpose(materialized(), perm, "transpose");
  return detail::ad::record_rule<"transpose">(std::span(this, 1), std::move(value),
                                              detail::ad::transpose_rule{perm});
}

TENFERRO_INLINE EagerTensor EagerTensor::broadcast_to(const Shape& shape) const {
  if (detail::ad::can_defer_broadcast(*this, shape)) {  // one number spread over a large shape: deferred
    cpu::check_broadcast_to(this->shape(), shape, "broadcast_to");
    const double c =
        cpu::visit_real(dtype(), [&]<class T>(T) { return double(materialized().as_slice<T>()[0]); });
    const auto run =
        dtype() == DType::F32 ? &detail::ad::fill_kernel<float> : &detail::ad::fill_kernel<double>;
    const detail::ad::broadcast_rule rule{this->shape(), shape, false};
    return detail::ad::defer_op(
        run, c, {}, dtype(), shape, context(), detail::ad::should_record(std::span(this, 1)),
        detail::ad::fusion_kind::fill, [&] {
          return detail::ad::node(std::span(this, 1),
                                  detail::ad::rule_def<detail::ad::broadcast_rule, "broadcast_to">(),
                                  rule.attributes());
        });
  }
  Tensor value = cpu::broadcast_to(materialized(), shape, "broadcast_to");
  return detail::ad::record_rule<"broadcast_to">(std::span(this, 1), std::move(value),
                                                 detail::ad::broadcast_rule{this->shape(), shape, false});
}

TENFERRO_INLINE EagerTensor EagerTensor::sum_to(const Shape& shape) const {
  if (cpu::broadcast_shapes("sum_to", shape, this->shape()) != this->shape()) {
    throw Error(ErrorKind::ShapeMismatch, "sum_to",
                "a tensor of shape " + format_shape(this->shape()) + " cannot be summed to shape " +
                    format_shape(shape) + " (that shape must broadcast to it)");
  }
  // To one element: a deferred value is summed as it is computed (deferred.hpp), never written.
  std::optional<Tensor> fused;
  if (state_->deferred() && checked_shape_size(shape) == 1) fused = detail::ad::sum_deferred(*state_);
  Tensor value = fused ? cpu::reshape(*fused, shape, "sum_to") : cpu::sum_to(materialized(), shape);
  return detail::ad::record_rule<"sum_to">(std::span(this, 1), std::move(value),
                                           detail::ad::broadcast_rule{this->shape(), shape, true});
}

TENFERRO_INLINE EagerTensor EagerTensor::cast(DType dtype) const { return to(dtype); }

TENFERRO_INLINE EagerTensor EagerTensor::convert(DType dtype) const {
  if (promote_types(this->dtype(), dtype) != dtype) {
    throw_error(ErrorKind::Unsupported, "convert",
                {"unsupported dtype conversion from ", dtype_name(this->dtype()), " to ", dtype_name(dtype),
                 " (argument 0 of shape ", state_->extents(),
                 "): convert only widens, toward promote_types; cast converts lossily"});
  }
  return to(dtype);
}

TENFERRO_INLINE EagerTensor EagerTensor::to(DType dtype) const {
  return detail::ad::record_rule<"to">(std::span(this, 1), cpu::cast(materialized(), dtype),
                                       detail::ad::cast_rule{this->dtype(), dtype});
}

#endif  // TENFERRO_HEADER_ONLY

}  // namespace tenferro
