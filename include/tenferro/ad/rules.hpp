// The derivative rules of the structural ops (reductions over axes, reshape, transpose,
// broadcast_to / sum_to, matmul, dtype conversion). Each rule is written once, as a template over
// the algebra (ad/algebra.hpp), and rule_node runs it on Tensors with kernels or on EagerTensors
// with recorded ops.
//
// Conventions: max/min split the cotangent evenly over tied extrema (as the compile-time layer; a
// NaN extremum's goes to the NaN elements); prod's derivative at zeros is exact (the product of
// the other elements), in the differentiable (traced) form too, at O(n^2) per slot of n elements
// when the input holds zeros.
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/record.hpp>

#include <optional>
#include <span>
#include <type_traits>
#include <vector>

namespace tenferro::detail::ad {

template <class A>
using value_of = typename A::value;

template <class V>
using cotangents = std::vector<std::optional<V>>;

struct reduce_rule {
  cpu::Reduce kind;
  std::vector<bool> mask;
  Shape in_shape;

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
    cpu::visit_real(dtype, [&]<class T>(T) {
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
      default:
        return {a.mul(g, share(a, in[0], out))};
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
           backend.fuses() && count() >= static_cast<double>(CpuBackend::fusion_elements) &&
           is_floating(cotangent.dtype());
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
  DType from, to;
  bool reads_input() const { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {a.cast(cot, from)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.cast(*t[0], to);
  }
};

// C = A B:  dA = G Bᵀ, dB = Aᵀ G;  tangent dA B + A dB.
struct matmul_rule {
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>> in, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>& needed) const {
    const Axes swap{1, 0};
    cotangents<value_of<A>> out(2);
    if (needed[0]) out[0] = a.cast(a.matmul(cot, a.transpose(in[1], swap)), A::tensor(in[0]).dtype());
    if (needed[1]) out[1] = a.cast(a.matmul(a.transpose(in[0], swap), cot), A::tensor(in[1]).dtype());
    return out;
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>> in, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    if (t[0] && t[1]) return a.add(a.matmul(*t[0], in[1]), a.matmul(in[0], *t[1]));
    return t[0] ? a.matmul(*t[0], in[1]) : a.matmul(in[0], *t[1]);
  }
};

// A node running one of the rules above.
template <class Rule>
class rule_node final : public node {
 public:
  rule_node(std::span<const EagerTensor> inputs, std::string_view name, Rule rule)
      : node(inputs), name_(name), rule_(std::move(rule)) {}

  std::string_view name() const noexcept override { return name_; }

  bool defers_vjp(const tensor_state&, const EagerTensor& cotangent) const override {
    if constexpr (requires { rule_.defers_vjp(inputs()[0]->runtime->backend(), cotangent); }) {
      return rule_.defers_vjp(inputs()[0]->runtime->backend(), cotangent);
    } else {
      return false;
    }
  }

  std::vector<std::optional<Tensor>> vjp(const Tensor& output, const Tensor& cotangent,
                                         const std::vector<bool>& needed) const override {
    const kernel_algebra a{inputs()[0]->runtime->backend()};
    const std::vector<Tensor> in = input_values();
    return rule_.vjp(a, std::span<const Tensor>(in), output, cotangent, needed);
  }
  std::vector<std::optional<EagerTensor>> vjp_traced(const EagerTensor& output, const EagerTensor& cotangent,
                                                     const std::vector<bool>& needed) const override {
    const traced_algebra a{output.context()};
    const std::vector<EagerTensor> in = handles(inputs());
    return rule_.vjp(a, std::span<const EagerTensor>(in), output, cotangent, needed);
  }
  Tensor jvp(const Tensor& output, std::span<const Tensor* const> tangents) const override {
    const kernel_algebra a{inputs()[0]->runtime->backend()};
    const std::vector<Tensor> in = input_values();
    return rule_.jvp(a, std::span<const Tensor>(in), output, tangents);
  }
  EagerTensor jvp_traced(const EagerTensor& output,
                         std::span<const EagerTensor* const> tangents) const override {
    const traced_algebra a{output.context()};
    const std::vector<EagerTensor> in = handles(inputs());
    return rule_.jvp(a, std::span<const EagerTensor>(in), output, tangents);
  }

 private:
  // The inputs' values; placeholders when the rule does not read them (a deferred input is then
  // not computed).
  std::vector<Tensor> input_values() const {
    bool reads = true;
    if constexpr (requires { rule_.reads_input(); }) reads = rule_.reads_input();
    std::vector<Tensor> in;
    for (const auto& s : inputs()) in.push_back(reads ? s->value() : Tensor());
    return in;
  }

  std::string_view name_;
  Rule rule_;
};

// The result of a structural op: `value`, recorded with `rule` when recording.
template <class Rule>
EagerTensor record_rule(std::string_view op, std::span<const EagerTensor> in, Tensor value, Rule rule) {
  const auto& rt = in[0].context();
  return make_result(std::move(value), rt, should_record(in),
                     [&] { return rule_node<Rule>(in, op, std::move(rule)); });
}

}  // namespace tenferro::detail::ad
