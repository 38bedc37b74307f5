// Selection as eager ops: where(cond, a, b) (a node: the cotangent goes to a where cond holds and to
// b elsewhere, summed back over what was broadcast; cond gets none) and clamp (maximum then
// minimum, so its ties are theirs). The kernel is cpu/select.hpp's.
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/ad/rules.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/cpu/select.hpp>

#include <array>
#include <charconv>
#include <string>

namespace tenferro {

namespace detail::ad {

// y = where(c, a, b): dL/da = sum_to(where(c, G, 0)), dL/db = sum_to(where(c, 0, G)), each in its
// input's dtype; the tangent is where(c, ta, tb).
struct where_rule {
  static constexpr std::size_t arity = 3;
  std::array<Shape, 2> shapes;  // a's and b's
  std::array<DType, 2> dtypes;

  OpAttributes attributes() const { return {}; }
  static where_rule from(const node& n) {
    where_rule r;
    for (std::size_t k = 0; k < 2; ++k) {
      const auto e = n.inputs()[k + 1]->extents();
      r.shapes[k] = Shape(e.begin(), e.end());
      r.dtypes[k] = n.inputs()[k + 1]->dtype();
    }
    return r;
  }

  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>> in, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>& needed) const {
    const value_of<A> zero = a.constant(Tensor::zeros({}, A::tensor(cot).dtype()));
    cotangents<value_of<A>> out(3);
    for (std::size_t k = 0; k < 2; ++k) {
      if (!needed[k + 1]) continue;
      value_of<A> g = a.sum_to(k == 0 ? a.select(in[0], cot, zero) : a.select(in[0], zero, cot), shapes[k]);
      out[k + 1] = A::tensor(g).dtype() == dtypes[k] ? g : a.cast(g, dtypes[k]);
    }
    return out;
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>> in, const value_of<A>& y,
                  std::span<const value_of<A>* const> t) const {
    const DType d = A::tensor(y).dtype();
    auto tangent = [&](std::size_t k) {
      if (!t[k]) return a.constant(Tensor::zeros({}, d));
      return A::tensor(*t[k]).dtype() == d ? *t[k] : a.cast(*t[k], d);
    };
    // (A missing tangent is a rank-0 zero: the selection is broadcast back to the output's shape.)
    return a.broadcast_to(a.select(in[0], tangent(1), tangent(2)), A::tensor(y).shape());
  }
};

}  // namespace detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

TENFERRO_INLINE EagerTensor where(const EagerTensor& cond, const EagerTensor& a, const EagerTensor& b) {
  const std::array in{cond, a, b};
  detail::ad::common_runtime("where", in);
  Tensor value = cpu::select(cond.materialized(), a.materialized(), b.materialized(), "where");
  return detail::ad::record_rule<"where">(in, std::move(value), detail::ad::where_rule{});
}

TENFERRO_INLINE EagerTensor EagerTensor::clamp(const EagerTensor& lo, const EagerTensor& hi) const {
  return maximum(lo).minimum(hi);
}

TENFERRO_INLINE EagerTensor EagerTensor::clamp(double lo, double hi) const {
  // The bounds in this tensor's dtype; for an integer or bool tensor they must be values it holds.
  auto bound = [&](double v, const char* which) {
    const Tensor t = cpu::cast(Tensor::full({}, v, DType::F64), dtype());
    if (!is_floating(dtype()) && !is_complex(dtype()) &&
        cpu::cast(t, DType::F64).as_slice<double>()[0] != v) {
      char digits[32];
      const auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
      throw_error(
          ErrorKind::InvalidArgument, "clamp",
          {"argument '", which, "' is ", std::string_view(digits, static_cast<std::size_t>(end - digits)),
           ", which a tensor of dtype ", dtype_name(dtype()), " (shape ", shape(), ") cannot hold"});
    }
    return from_tensor_in(t, context());
  };
  return clamp(bound(lo, "lo"), bound(hi, "hi"));
}

#endif  // TENFERRO_HEADER_ONLY

}  // namespace tenferro
