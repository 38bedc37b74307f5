// The two forms every derivative rule of a structural op (reductions, layout, contractions, cast) runs
// in, behind one interface so each rule is written once as a template over the algebra:
//
//   kernel_algebra   values are Tensors; each step is a CPU kernel (backward(), transforms under
//                    no_grad): nothing is recorded.
//   traced_algebra   values are EagerTensors; each step is an eager op, recorded while recording
//                    is on, so the rule's result can be differentiated again.
#pragma once

#include <tenferro/ad/tensor.hpp>
#include <tenferro/cpu/assemble.hpp>
#include <tenferro/cpu/complex.hpp>
#include <tenferro/cpu/contract.hpp>
#include <tenferro/cpu/fused.hpp>
#include <tenferro/cpu/indexing.hpp>
#include <tenferro/cpu/layout.hpp>
#include <tenferro/cpu/reduce.hpp>
#include <tenferro/cpu/scan.hpp>
#include <tenferro/cpu/select.hpp>
#include <tenferro/cpu/session.hpp>
#include <tenferro/cpu/slicing.hpp>

#include <vector>

namespace tenferro::detail::ad {

inline Axes axes_of(const std::vector<bool>& mask) {
  Axes axes;
  for (std::size_t d = 0; d < mask.size(); ++d) {
    if (mask[d]) axes.push_back(d);
  }
  return axes;
}

struct kernel_algebra {
  using value = Tensor;
  const CpuBackend& backend;

  Tensor constant(Tensor t) const { return t; }
  static const Tensor& tensor(const Tensor& v) { return v; }

  Tensor mul(const Tensor& a, const Tensor& b) const { return binary<expr::ops::mul>(a, b, "mul"); }
  Tensor add(const Tensor& a, const Tensor& b) const { return binary<expr::ops::add>(a, b, "add"); }
  Tensor div(const Tensor& a, const Tensor& b) const { return binary<expr::ops::div>(a, b, "div"); }
  Tensor scale(const Tensor& a, double s) const {
    return backend.run(a.size(), [&] { return cpu::scaled(a, s); });
  }
  Tensor reduce(cpu::Reduce r, const Tensor& a, const std::vector<bool>& mask) const {
    return cpu::reduce(r, a, mask, "reduce");
  }
  Tensor reshape(const Tensor& a, const Shape& s) const { return cpu::reshape(a, s, "reshape"); }
  Tensor transpose(const Tensor& a, const Axes& perm) const { return cpu::transpose(a, perm, "transpose"); }
  Tensor broadcast_to(const Tensor& a, const Shape& s) const {
    return cpu::broadcast_to(a, s, "broadcast_to");
  }
  Tensor sum_to(const Tensor& a, const Shape& s) const { return cpu::sum_to(a, s); }
  Tensor dot_general(const Tensor& a, const Tensor& b, const DotGeneralConfig& c, bool conj_a,
                     bool conj_b) const {
    return backend.run(cpu::contraction_work(a, b, c),
                       [&] { return cpu::dot_general(a, b, c, conj_a, conj_b, "dot_general"); });
  }
  Tensor slice(const Tensor& a, const Shape& starts, const Shape& limits, const Shape& steps) const {
    return cpu::slice(a, starts, limits, steps, "slice");
  }
  Tensor pad(const Tensor& a, const std::vector<std::int64_t>& low, const std::vector<std::int64_t>& high,
             const std::vector<std::int64_t>& interior) const {
    return cpu::pad(a, low, high, interior, "pad");
  }
  Tensor reverse(const Tensor& a, const Axes& axes) const { return cpu::reverse(a, axes, "reverse"); }
  Tensor cumsum(const Tensor& a, std::size_t axis, bool reverse) const {
    return cpu::cumsum(a, axis, reverse, "cumsum");
  }
  Tensor concatenate(const std::vector<Tensor>& parts, std::size_t axis) const {
    return cpu::concatenate(parts, axis, "concatenate");
  }
  Tensor extract_diag(const Tensor& a) const { return cpu::extract_diag(a, "extract_diag"); }
  Tensor embed_diag(const Tensor& a, std::size_t m, std::size_t n) const {
    return cpu::embed_diag(a, m, n, "embed_diag");
  }
  Tensor triangle(const Tensor& a, cpu::triangle which, std::int64_t k) const {
    return cpu::triangle_of(a, which, k, which == cpu::triangle::lower ? "tril" : "triu");
  }
  Tensor select(const Tensor& c, const Tensor& x, const Tensor& y) const {
    return cpu::select(c, x, y, "where");
  }
  Tensor gather(const Tensor& x, std::size_t axis, const Tensor& idx) const {
    return cpu::gather(x, axis, idx, "gather");
  }
  Tensor scatter_add(const Tensor& x, std::size_t axis, const Tensor& idx, const Tensor& u) const {
    return cpu::scatter_add(x, axis, idx, u, "scatter_add");
  }
  Tensor cast(const Tensor& a, DType d) const { return cpu::cast(a, d); }
  Tensor part(const Tensor& z, cpu::complex_part p) const { return cpu::part_of(z, p, "complex part"); }
  Tensor zero_indicator(const Tensor& v) const { return cpu::zero_indicator(v); }

 private:
  template <class Op>
  Tensor binary(const Tensor& a, const Tensor& b, std::string_view op) const {
    return backend.run(std::max(a.size(), b.size()), [&] { return cpu::elementwise<Op>(a, b, op); });
  }
};

// Running sums along an axis, either way, as a node (ad/ops/reductions.hpp).
TENFERRO_INLINE EagerTensor cumsum_op(const EagerTensor& x, std::size_t axis, bool reverse);
// The matrix [m, n] with diagonal v, as a node (ad/ops/assemble.hpp).
TENFERRO_INLINE EagerTensor embed_diag_op(const EagerTensor& v, std::size_t m, std::size_t n);

struct traced_algebra {
  using value = EagerTensor;
  std::shared_ptr<EagerRuntime> runtime;

  EagerTensor constant(Tensor t) const { return EagerTensor::from_tensor_in(std::move(t), runtime); }
  static const Tensor& tensor(const EagerTensor& v) { return v.state()->value(); }

  EagerTensor mul(const EagerTensor& a, const EagerTensor& b) const { return a.mul(b); }
  EagerTensor add(const EagerTensor& a, const EagerTensor& b) const { return a.add(b); }
  EagerTensor div(const EagerTensor& a, const EagerTensor& b) const { return a.div(b); }
  EagerTensor scale(const EagerTensor& a, double s) const { return a.scale(s); }
  EagerTensor reduce(cpu::Reduce r, const EagerTensor& a, const std::vector<bool>& mask) const {
    const Axes axes = axes_of(mask);
    switch (r) {
      case cpu::Reduce::sum:
        return a.reduce_sum(axes);
      case cpu::Reduce::prod:
        return a.reduce_prod(axes);
      case cpu::Reduce::max:
        return a.reduce_max(axes);
      case cpu::Reduce::min:
        return a.reduce_min(axes);
      case cpu::Reduce::mean:
        break;
    }
    return a.reduce_mean(axes);
  }
  EagerTensor reshape(const EagerTensor& a, const Shape& s) const { return a.reshape(s); }
  EagerTensor transpose(const EagerTensor& a, const Axes& perm) const { return a.transpose(perm); }
  EagerTensor broadcast_to(const EagerTensor& a, const Shape& s) const { return a.broadcast_to(s); }
  EagerTensor sum_to(const EagerTensor& a, const Shape& s) const { return a.sum_to(s); }
  EagerTensor dot_general(const EagerTensor& a, const EagerTensor& b, const DotGeneralConfig& c, bool conj_a,
                          bool conj_b) const {
    return a.dot_general_with_conj(b, c, conj_a, conj_b);
  }
  EagerTensor slice(const EagerTensor& a, const Shape& starts, const Shape& limits,
                    const Shape& steps) const {
    return a.slice(starts, limits, steps);
  }
  EagerTensor pad(const EagerTensor& a, const std::vector<std::int64_t>& low,
                  const std::vector<std::int64_t>& high, const std::vector<std::int64_t>& interior) const {
    return a.pad(low, high, interior);
  }
  EagerTensor reverse(const EagerTensor& a, const Axes& axes) const { return a.reverse(axes); }
  EagerTensor cumsum(const EagerTensor& a, std::size_t axis, bool reverse) const {
    return cumsum_op(a, axis, reverse);
  }
  EagerTensor concatenate(const std::vector<EagerTensor>& parts, std::size_t axis) const {
    return EagerTensor::concatenate(parts, static_cast<std::int64_t>(axis));
  }
  EagerTensor extract_diag(const EagerTensor& a) const { return a.extract_diag(); }
  EagerTensor embed_diag(const EagerTensor& a, std::size_t m, std::size_t n) const {
    return embed_diag_op(a, m, n);
  }
  EagerTensor triangle(const EagerTensor& a, cpu::triangle which, std::int64_t k) const {
    return which == cpu::triangle::lower ? a.tril(k) : a.triu(k);
  }
  EagerTensor select(const EagerTensor& c, const EagerTensor& x, const EagerTensor& y) const {
    return tenferro::where(c, x, y);
  }
  EagerTensor gather(const EagerTensor& x, std::size_t axis, const EagerTensor& idx) const {
    return x.gather(axis, idx);
  }
  EagerTensor scatter_add(const EagerTensor& x, std::size_t axis, const EagerTensor& idx,
                          const EagerTensor& u) const {
    return x.scatter_add(axis, idx, u);
  }
  EagerTensor cast(const EagerTensor& a, DType d) const { return a.to(d); }
  EagerTensor part(const EagerTensor& z, cpu::complex_part p) const {
    switch (p) {
      case cpu::complex_part::conj:
        return z.conj();
      case cpu::complex_part::real:
        return z.real();
      case cpu::complex_part::imag:
        return z.imag();
      case cpu::complex_part::abs:
        break;
    }
    return z.abs();
  }
  EagerTensor zero_indicator(const EagerTensor& v) const {
    const auto zero = EagerTensor::from_tensor_in(Tensor::zeros({}, v.dtype()), runtime);
    return v.eq(zero).to(v.dtype());
  }
};

}  // namespace tenferro::detail::ad
