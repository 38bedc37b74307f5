// The entries of the complex parts: conj, real, imag and abs of a complex tensor, with PyTorch's
// convention for gradients (the cotangent of z is dL/dRe z + i dL/dIm z for a real loss L):
//
//   conj:  vjp conj(g)              jvp conj(t)
//   real:  vjp g (as a complex)     jvp real(t)
//   imag:  vjp i g                  jvp imag(t)
//   abs:   vjp g z / |z|            jvp real(conj(z) t) / |z|      (0 at z = 0: the subgradient)
#pragma once

#include <tenferro/ad/rules.hpp>

#include <complex>

namespace tenferro::detail::ad {

struct complex_part_rule {
  cpu::complex_part part;
  DType in_dtype;  // complex

  OpAttributes attributes() const {
    OpAttributes a;
    a.ints.push_back(static_cast<std::int64_t>(part));
    return a;
  }
  static complex_part_rule from(const node& n) {
    return {static_cast<cpu::complex_part>(n.attributes().ints[0]), n.inputs()[0]->dtype()};
  }
  bool reads_input() const { return part == cpu::complex_part::abs; }

  // |z| with its zeros replaced by 1 (z / that is z / |z|, and 0 at z = 0).
  template <class A>
  static value_of<A> safe_abs(const A& a, const value_of<A>& abs_z) {
    return a.add(abs_z, a.zero_indicator(abs_z));
  }

  template <class A>
  cotangents<value_of<A>> vjp(const A& a, std::span<const value_of<A>> in, const value_of<A>& output,
                              const value_of<A>& cot, const std::vector<bool>&) const {
    switch (part) {
      case cpu::complex_part::conj:
        return {a.part(cot, cpu::complex_part::conj)};
      case cpu::complex_part::real:
        return {a.cast(cot, in_dtype)};
      case cpu::complex_part::imag: {
        const Tensor i =
            cpu::cast(Tensor::from_vec_col_major<std::complex<double>>({}, {{0.0, 1.0}}), in_dtype);
        return {a.mul(a.cast(cot, in_dtype), a.constant(i))};
      }
      case cpu::complex_part::abs:
        break;
    }
    return {a.div(a.mul(a.cast(cot, in_dtype), in[0]), a.cast(safe_abs(a, output), in_dtype))};
  }
  template <class A>
  value_of<A> jvp(const A& a, std::span<const value_of<A>> in, const value_of<A>& output,
                  std::span<const value_of<A>* const> t) const {
    const value_of<A> tz = a.cast(*t[0], in_dtype);
    if (part != cpu::complex_part::abs) return a.part(tz, part);
    const value_of<A> r = a.part(a.mul(a.part(in[0], cpu::complex_part::conj), tz), cpu::complex_part::real);
    return a.div(r, safe_abs(a, output));
  }
};

}  // namespace tenferro::detail::ad
