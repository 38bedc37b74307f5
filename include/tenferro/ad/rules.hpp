// The structural ops' entries in the op table (reductions over axes, reshape, transpose,
// broadcast_to / sum_to, dot_general, dtype conversion). Each rule is written once, as a template over
// the algebra (ad/algebra.hpp), and its entry (rule_def) runs it on Tensors with kernels or on
// EagerTensors with recorded ops. A rule is rebuilt from its node: the attributes (`attributes()`)
// and the input's shape and dtype.
//
// Conventions: max/min split the cotangent evenly over tied extrema (as the compile-time layer; a
// NaN extremum's goes to the NaN elements); prod's derivative at zeros is exact (the product of
// the other elements), in the differentiable (traced) form too, at O(n^2) per slot of n elements
// when the input holds zeros; a complex prod's cotangent is g times the conjugate of that
// derivative (PyTorch's convention).
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/record.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tenferro::detail::ad {

template <class A>
using value_of = typename A::value;

template <class V>
using cotangents = std::vector<std::optional<V>>;

// A list of sizes as attribute integers, and back (from attribute integer `first` on).
inline OpAttributes shape_attributes(const std::vector<std::size_t>& v) {
  OpAttributes a;
  for (const std::size_t e : v) a.ints.push_back(static_cast<std::int64_t>(e));
  return a;
}
inline std::vector<std::size_t> attribute_shape(const node& n, std::size_t first) {
  const auto& ints = n.attributes().ints;
  return std::vector<std::size_t>(ints.begin() + static_cast<std::ptrdiff_t>(first), ints.end());
}
inline Shape input_shape(const node& n) {
  const auto e = n.inputs()[0]->extents();
  return Shape(e.begin(), e.end());
}

struct reduce_rule {
  cpu::Reduce kind;
  std::vector<bool> mask;
  Shape in_shape;

  // ints: the kind, then 1 or 0 per axis (reduced or not).
  OpAttributes attributes() const {
    OpAttributes a;
    a.ints.push_back(static_cast<std::int64_t>(kind));
    for (const bool m : mask) a.ints.push_back(m ? 1 : 0);
    return a;
  }
  static reduce_rule from(const node& n) {
    const auto& ints = n.attributes().ints;
    std::vector<bool> mask;
    for (std::size_t d = 1; d < ints.size(); ++d) mask.push_back(ints[d] != 0);
    const auto e = n.inputs()[0]->extents();
    return {static_cast<cpu::Reduce>(ints[0]), std::move(mask), Shape(e.begin(), e.end())};
  }

  // The extremum / product share each input element gets (max, min, prod), as a value of A.
  template <class A>
  value_of<A> share(const A& a, const value_of<A>& x, const value_of<A>& out) const {
    if (kind == cpu::Reduce::prod) {
      if constexpr (std::is_same_v<A, kernel_algebra>) {
        return cpu::product_of_others(x, mask);
      } else {
        if (cpu::has_zero(A::tensor(x))) return product_of_others(a, x);
        return a.div(expand(a, out), x);
      }
    }
    return a.constant(cpu::extremum_share(A::tensor(x), A::tensor(out), mask));
  }

  // For each element, the product of the other elements of its slot, differentiable to every
  // order at zeros too: with the slot's n elements along an axis, an n x n matrix per slot whose
  // row i is the slot with element i replaced by 1, reduced by product along its columns. O(n^2)
  // per slot: used only when x holds zeros (elsewhere prod / x).
  template <class A>
  value_of<A> product_of_others(const A& a, const value_of<A>& x) const {
    Axes perm;  // the reduced axes first: x as [n, m], the reduced index varying fastest
    for (std::size_t d = 0; d < mask.size(); ++d) {
      if (mask[d]) perm.push_back(d);
    }
    for (std::size_t d = 0; d < mask.size(); ++d) {
      if (!mask[d]) perm.push_back(d);
    }
    Shape moved;
    std::size_t n = 1, m = 1;
    for (const std::size_t d : perm) {
      moved.push_back(in_shape[d]);
      (mask[d] ? n : m) *= in_shape[d];
    }
    const DType dtype = A::tensor(x).dtype();
    Tensor eye = Tensor::zeros({n, n, 1}, dtype), off = Tensor::ones({n, n, 1}, dtype);
    cpu::visit_compute<cpu::complex_kernels>(dtype, [&]<class T>(T) {
      T* e = eye.mutable_array<T>().data();
      T* o = off.mutable_array<T>().data();
      for (std::size_t i = 0; i < n; ++i) e[i + n * i] = T(1), o[i + n * i] = T(0);
    });
    const value_of<A> rows = a.broadcast_to(a.reshape(a.transpose(x, perm), {1, n, m}), {n, n, m});
    const value_of<A> replaced = a.add(a.mul(rows, a.constant(std::move(off))), a.constant(std::move(eye)));
    const value_of<A> others = a.reduce(cpu::Reduce::prod, replaced, {false, true, false});
    return a.transpose(a.reshape(others, moved), cpu::inverse_permutation(perm));
  }

  // A value of the reduced shape, broadcast back over the reduced axes.
  template <class A>
  value_of<A> expand(const A& a, const value_of<A>& v) const {
    return a.broadcast_to(a.reshape(v, cpu::reduced_shape(in_shape, mask, true)), in_shape);
  }

  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>> in, const value_of<A>& out,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    value_of<A> g = expand(a, cot);
    switch (kind) {
      case cpu::Reduce::sum:
        return {g};
      case cpu::Reduce::mean:
        return {a.scale(g, 1.0 / count())};
      default: {
        const value_of<A> s = share(a, in[0], out);
        // A complex product: PyTorch's convention, g times the conjugate of the derivative.
        return {a.mul(g, is_complex(s.dtype()) ? a.part(s, cpu::complex_part::conj) : s)};
      }
    }
  }

  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>> in, const value_of<A>& out,
                  std::span<const value_of<A>* const> t) const {
    switch (kind) {
      case cpu::Reduce::sum:
      case cpu::Reduce::mean:
        return a.reduce(kind, *t[0], mask);
      default:
        return a.reduce(cpu::Reduce::sum, a.mul(*t[0], share(a, in[0], out)), mask);
    }
  }

  // The cotangent of a sum or mean over every element of a large input is one number spread
  // over the input: deferred (broadcast_to of one element), so backward() fuses it.
  bool defers_vjp(const CpuBackend& backend, const EagerTensor& cotangent) const {
    return (kind == cpu::Reduce::sum || kind == cpu::Reduce::mean) && cotangent.size() == 1 &&
           backend.defers(checked_shape_size(in_shape).value_or(0), cotangent.dtype());
  }
  // Whether the rules read the input's value (else only its shape and dtype).
  bool reads_input() const { return kind != cpu::Reduce::sum && kind != cpu::Reduce::mean; }

  double count() const {
    std::size_t n = 1;
    for (std::size_t d = 0; d < in_shape.size(); ++d) {
      if (mask[d]) n *= in_shape[d];
    }
    return static_cast<double>(n);
  }
};

struct reshape_rule {
  Shape in_shape, out_shape;
  OpAttributes attributes() const { return shape_attributes(out_shape); }
  static reshape_rule from(const node& n) { return {input_shape(n), attribute_shape(n, 0)}; }
  bool reads_input() const { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {a.reshape(cot, in_shape)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.reshape(*t[0], out_shape);
  }
};

struct transpose_rule {
  Axes perm;
  OpAttributes attributes() const { return shape_attributes(perm); }
  static transpose_rule from(const node& n) { return {attribute_shape(n, 0)}; }
  bool reads_input() const { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {a.transpose(cot, cpu::inverse_permutation(perm))};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.transpose(*t[0], perm);
  }
};

// broadcast_to (sum_to = false) and its adjoint sum_to (true) are each other's derivative.
struct broadcast_rule {
  Shape in_shape, out_shape;
  bool sum_to = false;
  // ints: 1 for sum_to (0 for broadcast_to), then the output shape.
  OpAttributes attributes() const {
    OpAttributes a = shape_attributes(out_shape);
    a.ints.insert(a.ints.begin(), sum_to ? 1 : 0);
    return a;
  }
  static broadcast_rule from(const node& n) {
    return {input_shape(n), attribute_shape(n, 1), n.attributes().ints[0] != 0};
  }
  bool reads_input() const { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {sum_to ? a.broadcast_to(cot, in_shape) : a.sum_to(cot, in_shape)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return sum_to ? a.sum_to(*t[0], out_shape) : a.broadcast_to(*t[0], out_shape);
  }
};

struct cast_rule {
  DType from_dtype, to;
  OpAttributes attributes() const {
    OpAttributes a;
    a.ints.push_back(static_cast<std::int64_t>(to));
    return a;
  }
  static cast_rule from(const node& n) {
    return {n.inputs()[0]->dtype(), static_cast<DType>(n.attributes().ints[0])};
  }
  bool reads_input() const { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {a.cast(cot, from_dtype)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.cast(*t[0], to);
  }
};

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

// The op-table functions of a rule (the node rebuilds it).
template <class Rule>
struct rule_functions {
  static bool defers_vjp(const node& n, const tensor_state&, const EagerTensor& cotangent) {
    if constexpr (requires(const Rule& r) { r.defers_vjp(n.inputs()[0]->runtime->backend(), cotangent); }) {
      return Rule::from(n).defers_vjp(n.inputs()[0]->runtime->backend(), cotangent);
    } else {
      return false;
    }
  }
  static std::vector<std::optional<Tensor>> vjp(const node& n, const Tensor& output, const Tensor& cotangent,
                                                const std::vector<bool>& needed) {
    const Rule rule = Rule::from(n);
    const kernel_algebra a{n.inputs()[0]->runtime->backend()};
    const std::vector<Tensor> in = input_values(n, rule);
    return rule.vjp(a, std::span<const Tensor>(in), output, cotangent, needed);
  }
  static std::vector<std::optional<EagerTensor>> vjp_traced(const node& n, const EagerTensor& output,
                                                            const EagerTensor& cotangent,
                                                            const std::vector<bool>& needed) {
    const traced_algebra a{output.context()};
    const std::vector<EagerTensor> in = handles(n.inputs());
    return Rule::from(n).vjp(a, std::span<const EagerTensor>(in), output, cotangent, needed);
  }
  static Tensor jvp(const node& n, const Tensor& output, std::span<const Tensor* const> tangents) {
    const Rule rule = Rule::from(n);
    const kernel_algebra a{n.inputs()[0]->runtime->backend()};
    const std::vector<Tensor> in = input_values(n, rule);
    return rule.jvp(a, std::span<const Tensor>(in), output, tangents);
  }
  static EagerTensor jvp_traced(const node& n, const EagerTensor& output,
                                std::span<const EagerTensor* const> tangents) {
    const traced_algebra a{output.context()};
    const std::vector<EagerTensor> in = handles(n.inputs());
    return Rule::from(n).jvp(a, std::span<const EagerTensor>(in), output, tangents);
  }

 private:
  // The inputs' values; placeholders when the rule does not read them (a deferred input is then
  // not computed).
  static std::vector<Tensor> input_values(const node& n, const Rule& rule) {
    bool reads = true;
    if constexpr (requires { rule.reads_input(); }) reads = rule.reads_input();
    std::vector<Tensor> in;
    for (const auto& s : n.inputs()) in.push_back(reads ? s->value() : Tensor());
    return in;
  }
};

// A string literal as a template argument: the name of a structural op's entry.
template <std::size_t N>
struct op_name {
  char text[N];
  constexpr op_name(const char (&s)[N]) { std::copy_n(s, N, text); }  // NOLINT(google-explicit-constructor)
  constexpr std::string_view view() const { return {text, N - 1}; }
};

// The entry of the structural op `Name` with rule type Rule, registered the first time it is used.
template <class Rule, op_name Name>
const op_def& rule_def() {
  static const op_def& def = entry(Name.view(), [] {
    auto d = std::make_unique<op_def>();
    if constexpr (requires { Rule::arity; }) {
      d->arity = Rule::arity;
    } else {
      d->arity = 1;
    }
    set_rules<rule_functions<Rule>>(*d);
    return d;
  });
  return def;
}

// The result of structural op `Name`: `value`, recorded with `rule` when recording.
template <op_name Name, class Rule>
EagerTensor record_rule(std::span<const EagerTensor> in, Tensor value, const Rule& rule) {
  const auto& rt = in[0].context();
  const bool record = (is_floating(value.dtype()) || is_complex(value.dtype())) && should_record(in);
  return make_result(std::move(value), rt, record,
                     [&] { return node(in, rule_def<Rule, Name>(), rule.attributes()); });
}

}  // namespace tenferro::detail::ad
