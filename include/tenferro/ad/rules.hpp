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
