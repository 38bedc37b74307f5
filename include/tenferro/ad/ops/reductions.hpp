// Reductions and scans beyond reduce_sum ... reduce_mean: reduce_sum_squares and reduce_logsumexp
// are written with other ops (so their derivatives are those ops'); argmax and argmin give
// indices (no gradient); cumsum is a node whose rules are running sums again, the other way for
// the cotangent.
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/ad/rules.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/cpu/scan.hpp>

namespace tenferro {

namespace detail::ad {

// y = cumsum(x) along an axis: the cotangent of x is the running sum of G the other way; the
// tangent is the running sum of the tangent.
struct cumsum_rule {
  std::size_t axis = 0;
  bool reverse = false;

  OpAttributes attributes() const {
    OpAttributes a;
    a.ints = {static_cast<std::int64_t>(axis), reverse ? 1 : 0};
    return a;
  }
  static cumsum_rule from(const node& n) {
    const auto& ints = n.attributes().ints;
    return {static_cast<std::size_t>(ints[0]), ints[1] != 0};
  }
  static bool reads_input() { return false; }

  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {a.cumsum(cot, axis, !reverse)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.cumsum(*t[0], axis, reverse);
  }
};

}  // namespace detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace detail::ad {

TENFERRO_INLINE EagerTensor cumsum_op(const EagerTensor& x, std::size_t axis, bool reverse) {
  Tensor value = cpu::cumsum(x.materialized(), axis, reverse, "cumsum");
  return record_rule<"cumsum">(std::span(&x, 1), std::move(value), cumsum_rule{axis, reverse});
}

// log(sum(exp(x - m))) + m over the mask's axes, m the slots' maximum where finite (else 0): no
// overflow, and -inf, +inf, NaN and empty slots come out as they should. m is a constant of the tape (the
// result does not depend on it), so the gradient is the softmax.
TENFERRO_INLINE EagerTensor logsumexp_op(const EagerTensor& x, const std::optional<Axes>& axes) {
  constexpr std::string_view op = "reduce_logsumexp";
  if (!is_floating(x.dtype())) {
    throw_error(ErrorKind::Unsupported, op,
                {"argument 0 of shape ", x.state()->extents(), " has dtype ", dtype_name(x.dtype()),
                 "; this op takes f32, f64"});
  }
  const std::vector<bool> mask = cpu::reduce_mask(op, x.shape(), axes);
  const Axes reduced = axes ? *axes : axes_of(mask);
  // No element: nothing to shift (an empty slot's sum is 0, its log-sum-exp -inf).
  const Tensor m = x.size() == 0
                       ? Tensor::zeros(cpu::reduced_shape(x.shape(), mask), x.dtype())
                       : cpu::finite_or_zero(cpu::reduce(cpu::Reduce::max, x.materialized(), mask, op));
  const auto& rt = x.context();
  const EagerTensor kept =
      EagerTensor::from_tensor_in(cpu::reshape(m, cpu::reduced_shape(x.shape(), mask, true), op), rt);
  return (x - kept).exp().reduce_sum(reduced).log() + EagerTensor::from_tensor_in(m, rt);
}

}  // namespace detail::ad

TENFERRO_INLINE EagerTensor EagerTensor::cumsum(std::size_t axis) const {
  return detail::ad::cumsum_op(*this, axis, false);
}

TENFERRO_INLINE EagerTensor EagerTensor::argmax(std::size_t axis) const {
  return from_tensor_in(cpu::arg_extremum(materialized(), axis, true, "argmax"), context());
}
TENFERRO_INLINE EagerTensor EagerTensor::argmin(std::size_t axis) const {
  return from_tensor_in(cpu::arg_extremum(materialized(), axis, false, "argmin"), context());
}

// Complex: |z|² = Re² + Im² (real, and smooth at 0 where |z| is not).
TENFERRO_INLINE EagerTensor EagerTensor::reduce_sum_squares() const {
  if (is_complex(dtype())) return (real().square() + imag().square()).reduce_sum();
  return square().reduce_sum();
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_sum_squares(const Axes& axes) const {
  cpu::reduce_mask("reduce_sum_squares", shape(), axes);  // bad axes: named as this op
  if (is_complex(dtype())) return (real().square() + imag().square()).reduce_sum(axes);
  return square().reduce_sum(axes);
}

TENFERRO_INLINE EagerTensor EagerTensor::reduce_logsumexp() const {
  return detail::ad::logsumexp_op(*this, std::nullopt);
}
TENFERRO_INLINE EagerTensor EagerTensor::reduce_logsumexp(const Axes& axes) const {
  return detail::ad::logsumexp_op(*this, axes);
}

#endif  // TENFERRO_HEADER_ONLY

}  // namespace tenferro
