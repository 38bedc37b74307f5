// Assembling tensors as eager ops: concatenate (its cotangent is sliced back into the inputs),
// stack (unsqueeze + concatenate), broadcast_in_dim (transpose + unsqueeze + broadcast_to), the
// diagonal of a matrix and a matrix from a diagonal (each the other's adjoint), and the
// triangles tril / triu (their own adjoints). extract_diag is a view; the kernels are
// cpu/assemble.hpp's.
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/ad/rules.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/cpu/assemble.hpp>

#include <numeric>
#include <vector>

namespace tenferro {

namespace detail::ad {

// y = concatenate(x_0, ..., x_{n-1}) along an axis: x_k's cotangent is G's slice of x_k's extent.
struct concatenate_rule {
  static constexpr std::size_t arity = 0;  // any number of inputs
  std::size_t axis = 0;
  std::vector<Shape> shapes;  // the inputs' (from the node; not attributes: the key has them)

  OpAttributes attributes() const { return shape_attributes({axis}); }
  static concatenate_rule from(const node& n) {
    concatenate_rule r{attribute_shape(n, 0)[0], {}};
    for (const auto& s : n.inputs()) r.shapes.emplace_back(s->extents().begin(), s->extents().end());
    return r;
  }
  static bool reads_input() { return false; }

  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>& needed) const {
    Shape starts(A::tensor(cot).rank(), 0), limits = A::tensor(cot).shape();
    cotangents<value_of<A>> out(needed.size());
    std::size_t at = 0;
    for (std::size_t k = 0; k < needed.size(); ++k) {
      starts[axis] = at, limits[axis] = at + shapes[k][axis];
      if (needed[k]) out[k] = a.slice(cot, starts, limits, Shape(starts.size(), 1));
      at = limits[axis];
    }
    return out;
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>& y,
                  std::span<const value_of<A>* const> t) const {
    std::vector<value_of<A>> parts;
    for (std::size_t k = 0; k < t.size(); ++k) {
      parts.push_back(t[k] ? *t[k] : a.constant(Tensor::zeros(shapes[k], A::tensor(y).dtype())));
    }
    return a.concatenate(parts, axis);
  }
};

// y = the diagonal of x [m, n], and x = a matrix [m, n] from its diagonal y.
struct extract_diag_rule {
  std::size_t m = 0, n = 0;
  OpAttributes attributes() const { return shape_attributes({m, n}); }
  static extract_diag_rule from(const node& nd) {
    const Shape s = input_shape(nd);
    return {s[0], s[1]};
  }
  static bool reads_input() { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {a.embed_diag(cot, m, n)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.extract_diag(*t[0]);
  }
};
struct embed_diag_rule {
  std::size_t m = 0, n = 0;
  OpAttributes attributes() const { return shape_attributes({m, n}); }
  static embed_diag_rule from(const node& nd) {
    const Shape s = attribute_shape(nd, 0);
    return {s[0], s[1]};
  }
  static bool reads_input() { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {a.extract_diag(cot)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.embed_diag(*t[0], m, n);
  }
};

// y = tril(x, k) or triu(x, k): a mask, its own adjoint.
struct triangle_rule {
  cpu::triangle which = cpu::triangle::lower;
  std::int64_t k = 0;
  OpAttributes attributes() const {
    OpAttributes a;
    a.ints = {static_cast<std::int64_t>(which), k};
    return a;
  }
  static triangle_rule from(const node& n) {
    const auto& ints = n.attributes().ints;
    return {static_cast<cpu::triangle>(ints[0]), ints[1]};
  }
  static bool reads_input() { return false; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    return {a.triangle(cot, which, k)};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>>, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.triangle(*t[0], which, k);
  }
};

}  // namespace detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace detail::ad {

TENFERRO_INLINE EagerTensor embed_diag_op(const EagerTensor& v, std::size_t m, std::size_t n) {
  Tensor value = cpu::embed_diag(v.materialized(), m, n, "embed_diag");
  return record_rule<"embed_diag">(std::span(&v, 1), std::move(value), embed_diag_rule{m, n});
}

}  // namespace detail::ad

TENFERRO_INLINE EagerTensor EagerTensor::concatenate(const std::vector<EagerTensor>& inputs,
                                                     std::int64_t axis) {
  constexpr std::string_view op = "concatenate";
  cpu::check_not_empty(op, inputs.size());
  detail::ad::common_runtime(op, inputs);
  const std::size_t a = cpu::normalized_axis(axis, inputs[0].rank(), op, inputs[0].shape());
  // Inputs of several dtypes join in the dtype they promote to (the casts are recorded).
  const DType dtype = detail::ad::promoted_dtype(inputs);
  std::vector<EagerTensor> same;
  std::vector<Tensor> values;
  for (const auto& x : inputs) {
    same.push_back(x.dtype() == dtype ? x : x.to(dtype));
    values.push_back(same.back().materialized());
  }
  Tensor value = cpu::concatenate(values, a, op);
  return detail::ad::record_rule<"concatenate">(same, std::move(value), detail::ad::concatenate_rule{a, {}});
}

TENFERRO_INLINE EagerTensor EagerTensor::stack(const std::vector<EagerTensor>& inputs, std::int64_t axis) {
  constexpr std::string_view op = "stack";
  cpu::check_not_empty(op, inputs.size());
  detail::ad::common_runtime(op, inputs);
  const Shape first = inputs[0].shape();
  const std::size_t a = cpu::normalized_axis(axis, first.size() + 1, op, first);
  std::vector<EagerTensor> parts;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].shape() != first) {
      throw_error(ErrorKind::ShapeMismatch, op,
                  {"input ", k, " (shape ", inputs[k].shape(), ") and input 0 (shape ", first,
                   ") differ: stacked tensors have one shape"});
    }
    parts.push_back(inputs[k].unsqueeze(a));
  }
  return concatenate(parts, static_cast<std::int64_t>(a));
}

TENFERRO_INLINE EagerTensor EagerTensor::broadcast_in_dim(const Shape& shape, const Axes& dims) const {
  constexpr std::string_view op = "broadcast_in_dim";
  const Shape in = this->shape();
  if (dims.size() != in.size()) {
    throw_error(
        ErrorKind::Validation, op,
        {"rank mismatch: argument 'dims' has ", dims.size(), " entries, expected one per axis of the ",
         "operand of rank ", in.size(), " (shape ", in, ")"});
  }
  const std::vector<bool> mapped = cpu::reduce_mask(op, shape, dims);  // in range, distinct
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (in[i] != 1 && in[i] != shape[dims[i]]) {
      throw_error(ErrorKind::ShapeMismatch, op,
                  {"operand axis ", i, " (extent ", in[i], ", shape ", in, ") maps to axis ", dims[i],
                   " of shape ", shape, " (extent ", shape[dims[i]], "): the extent must be 1 or equal"});
    }
  }
  // The operand's axes in the order of their target axes, the unmapped axes inserted with extent 1.
  Axes order(dims.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::sort(order, [&](std::size_t i, std::size_t j) { return dims[i] < dims[j]; });
  // Each step keeps the strides (transpose, unsqueeze and broadcast_to are views of any view).
  EagerTensor full = std::ranges::is_sorted(order) ? *this : transpose(order);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!mapped[d]) full = full.unsqueeze(d);
  }
  return full.broadcast_to(shape);
}

TENFERRO_INLINE EagerTensor EagerTensor::extract_diag() const {
  Tensor value = cpu::extract_diag(materialized(), "extract_diag");
  const Shape s = shape();
  return detail::ad::record_rule<"extract_diag">(std::span(this, 1), std::move(value),
                                                 detail::ad::extract_diag_rule{s[0], s[1]});
}

TENFERRO_INLINE EagerTensor EagerTensor::embed_diag() const {
  const Shape s = shape();
  if (s.size() != 1) {
    throw_error(ErrorKind::Validation, "embed_diag",
                {"rank mismatch: expected a vector (rank 1), got rank ", s.size(), " (shape ", s, ")"});
  }
  return detail::ad::embed_diag_op(*this, s[0], s[0]);
}

TENFERRO_INLINE EagerTensor EagerTensor::tril(std::int64_t k) const {
  Tensor value = cpu::triangle_of(materialized(), cpu::triangle::lower, k, "tril");
  return detail::ad::record_rule<"tril">(std::span(this, 1), std::move(value),
                                         detail::ad::triangle_rule{cpu::triangle::lower, k});
}

TENFERRO_INLINE EagerTensor EagerTensor::triu(std::int64_t k) const {
  Tensor value = cpu::triangle_of(materialized(), cpu::triangle::upper, k, "triu");
  return detail::ad::record_rule<"triu">(std::span(this, 1), std::move(value),
                                         detail::ad::triangle_rule{cpu::triangle::upper, k});
}

#endif  // TENFERRO_HEADER_ONLY

}  // namespace tenferro
