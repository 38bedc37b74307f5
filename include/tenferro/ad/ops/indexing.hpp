// Indexing as eager ops: gather along an axis (NumPy's take_along_axis) and scatter_add, each the
// other's adjoint; index_select (and take_rows / take_cols / take_block) is a gather whose index
// tensor is the vector broadcast to the result's shape (a stride-0 view, nothing copied). The
// index tensor is an input of the node that holds no gradient. Kernels: cpu/indexing.hpp.
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/ad/rules.hpp>
#include <tenferro/core/detail/config.hpp>
#include <tenferro/cpu/indexing.hpp>

#include <array>
#include <vector>

namespace tenferro {

namespace detail::ad {

// y = gather(x, axis, I): dL/dx = scatter_add(0, axis, I, G); the tangent is gather(tx).
struct gather_rule {
  static constexpr std::size_t arity = 2;
  std::size_t axis = 0;
  Shape in_shape;
  OpAttributes attributes() const { return shape_attributes({axis}); }
  static gather_rule from(const node& n) { return {attribute_shape(n, 0)[0], input_shape(n)}; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>> in, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    const value_of<A> zero = a.constant(Tensor::zeros(in_shape, A::tensor(cot).dtype()));
    return {a.scatter_add(zero, axis, in[1], cot), std::nullopt};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>> in, const value_of<A>&,
                  std::span<const value_of<A>* const> t) const {
    return a.gather(*t[0], axis, in[1]);
  }
};

// y = scatter_add(x, axis, I, U): dL/dx = G, dL/dU = gather(G, axis, I); the tangent is
// scatter_add(tx, axis, I, tU).
struct scatter_add_rule {
  static constexpr std::size_t arity = 3;
  std::size_t axis = 0;
  OpAttributes attributes() const { return shape_attributes({axis}); }
  static scatter_add_rule from(const node& n) { return {attribute_shape(n, 0)[0]}; }
  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>> in, const value_of<A>&,
                              const value_of<A>& cot, const std::vector<bool>& needed) const {
    cotangents<value_of<A>> out(3);
    if (needed[0]) out[0] = cot;
    if (needed[2]) out[2] = a.gather(cot, axis, in[1]);
    return out;
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>> in, const value_of<A>& y,
                  std::span<const value_of<A>* const> t) const {
    const DType d = A::tensor(y).dtype();
    const value_of<A> tx = t[0] ? *t[0] : a.constant(Tensor::zeros(A::tensor(in[0]).shape(), d));
    const value_of<A> tu = t[2] ? *t[2] : a.constant(Tensor::zeros(A::tensor(in[1]).shape(), d));
    return a.scatter_add(tx, axis, in[1], tu);
  }
};

}  // namespace detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace detail::ad {

// A vector of indices as an untracked i64 tensor of `rt`.
inline EagerTensor index_tensor(const std::vector<std::int64_t>& v, const std::shared_ptr<EagerRuntime>& rt) {
  return EagerTensor::from_tensor_in(Tensor::from_vec_col_major<std::int64_t>({v.size()}, v), rt);
}

}  // namespace detail::ad

TENFERRO_INLINE EagerTensor EagerTensor::gather(std::size_t axis, const EagerTensor& indices) const {
  const std::array in{*this, indices};
  detail::ad::common_runtime("gather", in);
  Tensor value = cpu::gather(materialized(), axis, indices.materialized(), "gather");
  return detail::ad::record_rule<"gather">(in, std::move(value), detail::ad::gather_rule{axis, {}});
}

TENFERRO_INLINE EagerTensor EagerTensor::scatter_add(std::size_t axis, const EagerTensor& indices,
                                                     const EagerTensor& updates) const {
  constexpr std::string_view op = "scatter_add";
  detail::ad::common_runtime(op, std::array{*this, indices, updates});
  // The updates join in the dtype both promote to (the casts are recorded).
  const DType d = promote_types(dtype(), updates.dtype());
  const std::array in{dtype() == d ? *this : to(d), indices, updates.dtype() == d ? updates : updates.to(d)};
  Tensor value =
      cpu::scatter_add(in[0].materialized(), axis, indices.materialized(), in[2].materialized(), op);
  return detail::ad::record_rule<"scatter_add">(in, std::move(value), detail::ad::scatter_add_rule{axis});
}

TENFERRO_INLINE EagerTensor EagerTensor::index_select(std::size_t axis, const EagerTensor& indices) const {
  constexpr std::string_view op = "index_select";
  const Shape in = shape(), s = indices.shape();
  if (s.size() != 1) {
    throw_error(ErrorKind::Validation, op,
                {"rank mismatch: argument 'indices' has rank ", s.size(), " (shape ", s,
                 "), expected a vector (rank 1)"});
  }
  cpu::check_axis(op, in, axis);
  const Tensor v = indices.materialized();
  cpu::detail::check_index_dtype(op, v);
  // Checked here so that an error names the position in the vector.
  const std::int64_t* p = v.data<std::int64_t>();
  for (std::size_t k = 0; k < s[0]; ++k) {
    cpu::detail::checked_index(op, p[static_cast<std::ptrdiff_t>(k) * v.strides()[0]], std::to_string(k),
                               axis, in);
  }
  // The vector along `axis` of the result's shape, repeated (stride 0) along the others.
  Shape out = in;
  out[axis] = s[0];
  Strides strides(in.size(), 0);
  strides[axis] = v.strides()[0];
  const Tensor spread = checked_shape_size(out).value_or(0) == 0 ? Tensor::zeros(out, v.dtype())
                                                                 : v.as_strided(out, strides, v.offset());
  return gather(axis, from_tensor_in(spread, indices.context()));
}

TENFERRO_INLINE EagerTensor EagerTensor::index_select(std::size_t axis,
                                                      const std::vector<std::int64_t>& indices) const {
  return index_select(axis, detail::ad::index_tensor(indices, context()));
}

TENFERRO_INLINE EagerTensor EagerTensor::take_rows(const std::vector<std::int64_t>& rows) const {
  return index_select(0, rows);
}
TENFERRO_INLINE EagerTensor EagerTensor::take_cols(const std::vector<std::int64_t>& cols) const {
  return index_select(1, cols);
}
TENFERRO_INLINE EagerTensor EagerTensor::take_block(const std::vector<std::int64_t>& rows,
                                                    const std::vector<std::int64_t>& cols) const {
  return take_rows(rows).take_cols(cols);
}

#endif  // TENFERRO_HEADER_ONLY

}  // namespace tenferro
