// Contractions as eager ops: the op-table entry dot_general (its rule: cotangents and tangents are
// contractions again) and the ops written with it, dot_general_with_conj, matmul (NumPy's: recorded
// as reshape / broadcast_to where needed, then dot_general), outer and dot. The kernel is
// cpu/contract.hpp's (BLAS); the axis bookkeeping core/contraction.hpp's.
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/ad/rules.hpp>
#include <tenferro/core/contraction.hpp>
#include <tenferro/core/detail/config.hpp>

#include <algorithm>
#include <array>

namespace tenferro {

namespace detail::ad {

// C = dot_general(op_a(A), op_b(B)) with op = conj or identity (conj_a, conj_b). Cotangents are
// contractions of G with the other operand, over the axes that operand kept, then put back in
// the operand's axis order; conjugations follow PyTorch's convention (G Bᴴ and Aᴴ G for a plain
// matrix product). The tangent: dot_general(dA, B) + dot_general(A, dB), same flags.
struct dot_general_rule {
  static constexpr std::size_t arity = 2;
  DotGeneralConfig config;
  bool conj_a = false, conj_b = false;

  // ints: conj_a, conj_b, the number of contracted pairs, then the four lists.
  OpAttributes attributes() const {
    OpAttributes a;
    a.ints = {conj_a, conj_b, static_cast<std::int64_t>(config.lhs_contracting.size())};
    for (const Axes* list :
         {&config.lhs_contracting, &config.rhs_contracting, &config.lhs_batch, &config.rhs_batch}) {
      for (const std::size_t d : *list) a.ints.push_back(static_cast<std::int64_t>(d));
    }
    return a;
  }
  static dot_general_rule from(const node& n) {
    const auto& ints = n.attributes().ints;
    const auto nc = static_cast<std::size_t>(ints[2]), nb = (ints.size() - 3 - 2 * nc) / 2;
    auto take = [&, at = std::size_t{3}](std::size_t count) mutable {
      Axes out(ints.begin() + static_cast<std::ptrdiff_t>(at),
               ints.begin() + static_cast<std::ptrdiff_t>(at + count));
      at += count;
      return out;
    };
    dot_general_rule r;
    r.conj_a = ints[0] != 0, r.conj_b = ints[1] != 0;
    r.config.lhs_contracting = take(nc);
    r.config.rhs_contracting = take(nc);
    r.config.lhs_batch = take(nb);
    r.config.rhs_batch = take(nb);
    return r;
  }

  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>> in, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>& needed) const {
    const Shape sa = A::tensor(in[0]).shape(), sb = A::tensor(in[1]).shape();
    const auto plan = plan_contraction("dot_general", sa, sb, config);
    const std::size_t nb = config.lhs_batch.size();
    const std::size_t nfa = plan.lhs_free.size(), nfb = plan.rhs_free.size();
    auto range = [](std::size_t from, std::size_t count) {
      Axes r(count);
      for (std::size_t i = 0; i < count; ++i) r[i] = from + i;
      return r;
    };
    // For each contracted axis of `side` in increasing order, its partner of the other side.
    auto partners = [&](const Axes& side, const Axes& other) {
      Axes sorted = side, out;
      std::ranges::sort(sorted);
      for (const std::size_t d : sorted) out.push_back(other[std::ranges::find(side, d) - side.begin()]);
      return out;
    };
    // The contraction's axis r is the operand's axis src[r]: the transpose back.
    auto back = [&](const value_of<A>& v, const Axes& src, DType dtype) {
      return a.cast(a.transpose(v, cpu::inverse_permutation(src)), dtype);
    };
    cotangents<value_of<A>> out(2);
    if (needed[0]) {  // G against B's free axes: [batch, A's free, B's contracted (B's order)]
      const DotGeneralConfig c{range(nb + nfa, nfb), plan.rhs_free, range(0, nb), config.rhs_batch};
      Axes src = config.lhs_batch;
      src.insert(src.end(), plan.lhs_free.begin(), plan.lhs_free.end());
      const Axes p = partners(config.rhs_contracting, config.lhs_contracting);
      src.insert(src.end(), p.begin(), p.end());
      out[0] = back(a.dot_general(cot, in[1], c, conj_a, conj_a == conj_b), src, A::tensor(in[0]).dtype());
    }
    if (needed[1]) {  // A's free axes against G: [batch, A's contracted (A's order), B's free]
      const DotGeneralConfig c{plan.lhs_free, range(nb, nfa), config.lhs_batch, range(0, nb)};
      Axes src = config.rhs_batch;
      const Axes p = partners(config.lhs_contracting, config.rhs_contracting);
      src.insert(src.end(), p.begin(), p.end());
      src.insert(src.end(), plan.rhs_free.begin(), plan.rhs_free.end());
      out[1] = back(a.dot_general(in[0], cot, c, conj_a == conj_b, conj_b), src, A::tensor(in[1]).dtype());
    }
    return out;
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>> in, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    auto with = [&](const value_of<A>& x, const value_of<A>& y) {
      return a.dot_general(x, y, config, conj_a, conj_b);
    };
    if (t[0] && t[1]) return a.add(with(*t[0], in[1]), with(in[0], *t[1]));
    return t[0] ? with(*t[0], in[1]) : with(in[0], *t[1]);
  }
};

}  // namespace detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace detail::ad {

TENFERRO_INLINE EagerTensor dot_general_op(const EagerTensor& a, const EagerTensor& b,
                                           const DotGeneralConfig& c, bool conj_a, bool conj_b,
                                           std::string_view name) {
  const std::array<EagerTensor, 2> in{a, b};
  const auto& rt = common_runtime(name, in);
  const Tensor x = a.materialized(), y = b.materialized();
  Tensor value = rt->backend().run(cpu::contraction_work(x, y, c),
                                   [&] { return cpu::dot_general(x, y, c, conj_a, conj_b, name); });
  return record_rule<"dot_general">(in, std::move(value), dot_general_rule{c, conj_a, conj_b});
}

}  // namespace detail::ad

TENFERRO_INLINE EagerTensor EagerTensor::dot_general(const EagerTensor& other,
                                                     const DotGeneralConfig& config) const {
  return detail::ad::dot_general_op(*this, other, config, false, false, "dot_general");
}
TENFERRO_INLINE EagerTensor EagerTensor::dot_general_with_conj(const EagerTensor& other,
                                                               const DotGeneralConfig& config, bool conj_lhs,
                                                               bool conj_rhs) const {
  return detail::ad::dot_general_op(*this, other, config, conj_lhs, conj_rhs, "dot_general_with_conj");
}

// Recorded as its steps: reshape and broadcast_to where needed, dot_general, reshape.
TENFERRO_INLINE EagerTensor EagerTensor::matmul(const EagerTensor& other) const {
  const std::array<EagerTensor, 2> in{*this, other};
  detail::ad::common_runtime("matmul", in);
  const auto p = tenferro::detail::plan_matmul("matmul", shape(), other.shape());
  auto to_shape = [](const EagerTensor& x, const Shape& s) { return x.shape() == s ? x : x.reshape(s); };
  auto prepare = [&](const EagerTensor& x, const Shape& reshaped, const Shape& full) {
    const EagerTensor y = to_shape(x, reshaped);
    return y.shape() == full ? y : y.broadcast_to(full);
  };
  const EagerTensor lhs = prepare(*this, p.lhs_reshape, p.lhs), rhs = prepare(other, p.rhs_reshape, p.rhs);
  return to_shape(detail::ad::dot_general_op(lhs, rhs, p.config, false, false, "matmul"), p.result);
}

TENFERRO_INLINE EagerTensor EagerTensor::outer(const EagerTensor& other) const {
  return detail::ad::dot_general_op(*this, other, {}, false, false, "outer");
}

TENFERRO_INLINE EagerTensor EagerTensor::dot(const EagerTensor& other) const {
  if (rank() != 1 || other.rank() != 1) {
    throw Error(ErrorKind::ShapeMismatch, "dot",
                "takes two vectors (rank 1); got shapes " + format_shape(shape()) + " and " +
                    format_shape(other.shape()) + " (matmul and dot_general take the others)");
  }
  return detail::ad::dot_general_op(*this, other, {{0}, {0}, {}, {}}, false, false, "dot");
}

#endif  // TENFERRO_HEADER_ONLY

}  // namespace tenferro
