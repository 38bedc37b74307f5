// Fused kernels on dynamic Tensors: the compile-time layer evaluating one expression of
// placeholders over Tensors. Every elementwise eager op, its vjp and its jvp, and every `apply`
// node run through fused_kernels<E>.
//
// Inputs compute in the dtype promote() gives (inputs of another dtype are converted once):
// f32 or f64; i32 or i64 (bool operands as integers) when every op of E has an integer form
// (forward only: derivatives are floating); c32 or c64 when every op has a complex form (and the
// derivatives when their rules have one too: complex vjps follow PyTorch's convention). The
// result has result_dtype<E>: Bool for a predicate. Shapes broadcast NumPy-style; cotangents come
// back in each input's own shape and dtype.
//
// Instantiating the kernels of every eager op costs tens of seconds of compilation. Under
// TENFERRO_SEPARATE_COMPILATION (core/detail/config.hpp) the kernels listed in
// cpu/kernel_list.inc are only declared here (`extern template`) and
// <tenferro/separate_compilation.hpp> defines them once; that is why the members are defined out
// of the class.
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/cpu/backend.hpp>
#include <tenferro/cpu/common.hpp>
#include <tenferro/expr.hpp>
#include <tenferro/tensor/typed_tensor.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tenferro::cpu {

static_assert(CpuBackend::serial_elements == expr::detail::chunk_elements,
              "CpuBackend::run skips the arena only for kernels that fit one chunk of the fused loop");

template <class E>
struct fused_kernels {
  static constexpr std::size_t arity = expr::arity<E>;
  // The dtypes of the forward kernel and of the derivative kernels (which are never integer).
  static constexpr kernel_dtypes forward_dtypes{.integers = expr::has_integer_form<E>,
                                                .complex = expr::has_complex_form<E>};
  static constexpr bool complex_derivatives = expr::complex_differentiable<E>;

  // The value of e: a rank-0 tensor for a scalar e, else a tensor of the broadcast shape.
  static Tensor forward(const E& e, std::span<const Tensor> in, std::string_view op);

  // forward with input k, for each bit k of Numbers, bound as a number of the expression (its one
  // element; it must have rank 0): what depends on numbers alone is computed once, before the
  // loop, as for numbers given to the compile-time layer. Numbers bind in f32 and f64; in other
  // dtypes every input is an array, as in forward.
  template <std::uint32_t Numbers>
  static Tensor forward_binding(const E& e, std::span<const Tensor> in, std::string_view op);

  // Scalar e only: the value and the gradient of every input (in its shape and dtype), one pass;
  // the inputs of the bits of Numbers bound as numbers, as in forward_binding. A member template
  // (not instantiated with the class): clang 14 instantiates a constrained member function with
  // an explicit instantiation of its class even where the constraint fails.
  template <std::uint32_t Numbers>
  static Tensor value_and_grad_binding(const E& e, std::span<const Tensor> in, std::vector<Tensor>& grads,
                                       std::string_view op) requires expr::is_scalar<E>;

  // The cotangent of every input given the output's cotangent, one pass (plus the reductions that
  // undo broadcasting).
  static std::vector<Tensor> vjp(const E& e, std::span<const Tensor> in, const Tensor& cotangent,
                                 std::string_view op);

  // The output's tangent when input k moves along *tangents[k] (nullptr: it does not move).
  static Tensor jvp(const E& e, std::span<const Tensor> in, std::span<const Tensor* const> tangents,
                    std::string_view op);

  // Elementwise e over n contiguous elements (of `dtype`, f32 or f64) of every input, written to
  // out, on the calling thread for n <= CpuBackend::serial_elements: the block kernel of deferred
  // fusion (ad/deferred.hpp). Bit k of `broadcast`: input k is one element, read for every i.
  static void forward_block(const E& e, DType dtype, void* out, const void* const* in, std::size_t n,
                            std::uint32_t broadcast);
};

// The one-op expressions of the eager elementwise ops.
template <class Op>
using unary_expr = expr::unary<Op, expr::arg<0>>;
template <class Op>
using binary_expr = expr::binary<Op, expr::arg<0>, expr::arg<1>>;
// x op s and s op x for a number s.
template <class Op>
using number_rhs_expr = expr::binary<Op, expr::arg<0>, expr::constant>;
template <class Op>
using number_lhs_expr = expr::binary<Op, expr::constant, expr::arg<0>>;
// The sum, the maximum and the minimum of every element.
using sum_expr = expr::reduction<expr::ops::sum, expr::arg<0>>;
using max_expr = expr::reduction<expr::ops::max, expr::arg<0>>;
using min_expr = decltype(expr::min(expr::arg<0>{}));

// The dtype of an eager op's result: Bool for a predicate (a comparison, a logical op), else
// promote_types over the inputs (docs/eager.md).
template <class E>
DType result_dtype(std::span<const Tensor> in) {
  if constexpr (requires { typename E::op_type; }) {
    if constexpr (expr::ops::is_predicate<typename E::op_type>()) return DType::Bool;
  }
  DType out = in[0].dtype();
  for (const Tensor& t : in) out = promote_types(out, t.dtype());
  return out;
}

namespace detail {

// Input k as the compile-time layer takes it: a TypedTensor<T> view (or converted copy), or, for
// bit k of Numbers, its one element as a T.
template <class T, std::uint32_t Numbers, std::size_t K>
auto bound(const Tensor& t) {
  if constexpr (K < 32 && ((Numbers >> K) & 1u) != 0) {
    return t.dtype() == dtype_of<T> ? t.data<T>()[0] : cast(t, dtype_of<T>).template data<T>()[0];
  } else {
    return typed_as<T>(t);
  }
}

// Calls f with each of the first N tensors bound (`bound`).
template <class T, std::size_t N, class F, std::uint32_t Numbers = 0>
decltype(auto) with_typed(std::span<const Tensor> in, F&& f,
                          std::integral_constant<std::uint32_t, Numbers> = {}) {
  return [&]<std::size_t... K>(std::index_sequence<K...>)->decltype(auto) {
    return f(bound<T, Numbers, K>(in[K])...);
  }
  (std::make_index_sequence<N>{});
}

template <class T>
Tensor to_tensor(T value) requires expr::Number<T> {
  return scalar_tensor<T>(value);
}
template <class T>
Tensor to_tensor(column_major_array<T>&& value) {
  return Tensor(std::move(value));
}

// A gradient (an array, or a number for an input bound as one) as a Tensor, scaled by `scale`
// unless it is 1, then conjugated when `conjugate`.
template <class T, class G>
Tensor gradient_tensor(G&& g, T scale, bool conjugate) {
  auto each = [&](T& v) {
    if (scale != T(1)) v *= scale;
    if constexpr (expr::Complex<T>) {
      if (conjugate) v = std::conj(v);
    }
  };
  if constexpr (expr::Number<std::remove_cvref_t<G>>) {
    T v = g;
    each(v);
    return scalar_tensor<T>(v);
  } else {
    if (scale != T(1) || conjugate) std::for_each(g.data(), g.data() + g.size(), each);
    return Tensor(std::move(g));
  }
}

// Each gradient of a tuple as a Tensor of its input's dtype (a real input of a complex
// computation: the real part), scaled and conjugated as gradient_tensor does.
template <class T, class Tuple>
std::vector<Tensor> gradient_tensors(Tuple&& grads, std::span<const Tensor> in, T scale = T(1),
                                     bool conjugate = false) {
  std::vector<Tensor> out;
  out.reserve(in.size());
  std::apply([&](auto&... g) { (out.push_back(gradient_tensor<T>(std::move(g), scale, conjugate)), ...); },
             grads);
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = cast(out[k], in[k].dtype());
  return out;
}

// True when every tensor has the dtype and the shape of the first (no conversion, no broadcast).
inline bool same_dtype_and_shape(std::span<const Tensor> in) {
  for (std::size_t k = 1; k < in.size(); ++k) {
    if (in[k].dtype() != in[0].dtype() || !std::ranges::equal(in[k].extents(), in[0].extents())) return false;
  }
  return true;
}

template <std::size_t N>
void check_arity(std::span<const Tensor> in, std::string_view op) {
  if (in.size() != N) {
    throw Error(ErrorKind::InvalidArgument, std::string(op),
                "the expression takes " + std::to_string(N) + " inputs but " + std::to_string(in.size()) +
                    " were given");
  }
}

// A Bool result of elementwise e (a predicate) over inputs of dtype T, each contiguous and of
// the broadcast shape or of one element, in one pass: blocks of one chunk are evaluated into a
// buffer on the stack and converted to bool from there. nullopt when the inputs do not qualify.
template <class T, class E>
std::optional<Tensor> predicate_in_one_pass(const E& e, std::span<const Tensor> in, std::string_view op) {
  constexpr std::size_t N = expr::arity<E>, chunk = expr::detail::chunk_elements;
  const Shape shape = broadcast_shapes(op, in);
  const std::size_t n = checked_shape_size(shape).value_or(0);
  std::array<const T*, N> p{};
  std::uint32_t broadcast = 0;
  for (std::size_t k = 0; k < N; ++k) {
    const bool one = in[k].size() == 1 && n != 1;
    if (in[k].dtype() != dtype_of<T> || !in[k].is_contiguous() ||
        !(one || std::ranges::equal(in[k].extents(), shape))) {
      return std::nullopt;
    }
    p[k] = in[k].template data<T>();
    if (one) broadcast |= 1u << k;
  }
  Tensor r = Tensor::for_overwrite<bool>(shape, op);
  bool* out = r.mutable_array<bool>().data();
  auto body = [&](std::size_t begin, std::size_t end) {
    alignas(64) std::array<T, chunk> values;
    for (std::size_t at = begin; at < end; at += chunk) {
      const std::size_t len = std::min(chunk, end - at);
      std::array<const T*, N> q = p;
      for (std::size_t k = 0; k < N; ++k) q[k] += ((broadcast >> k) & 1u) ? 0 : at;
      expr::detail::eval_block(values.data(), e, q, len, broadcast);
      for (std::size_t i = 0; i < len; ++i) out[at + i] = values[i] != T(0);
    }
  };
  if (n > chunk) {
    tenferro::detail::parallel_ranges(n, chunk, tenferro::detail::split::adaptive, body);
  } else {
    body(0, n);
  }
  return r;
}

}  // namespace detail

template <class E>
Tensor fused_kernels<E>::forward(const E& e, std::span<const Tensor> in, std::string_view op) {
  detail::check_arity<arity>(in, op);
  const DType dtype = promote(op, in, forward_dtypes);
  if constexpr (!expr::is_scalar<E> && expr::level<E> == 0) {
    if (result_dtype<E>(in) == DType::Bool) {  // no intermediate array of the compute type
      auto r = visit_compute<forward_dtypes>(dtype, [&]<class T>(T) {
        expr::detail::check_compute_type<T>(op, e);
        return detail::predicate_in_one_pass<T>(e, in, op);
      });
      if (r) return std::move(*r);
    }
  }
  Tensor out = [&] {
    if constexpr (!expr::is_scalar<E>) {
      if (detail::same_dtype_and_shape(in) && in[0].dtype() == dtype) {  // built in place
        return visit_compute<forward_dtypes>(dtype, [&]<class T>(T) {
          expr::detail::check_compute_type<T>(op, e);
          Tensor r = Tensor::for_overwrite<T>(in[0].extents());
          [&]<std::size_t... K>(std::index_sequence<K...>) {
            expr::eval_into(e, r.mutable_array<T>(), in[K].typed<T>()...);
          }
          (std::make_index_sequence<arity>{});
          return r;
        });
      }
    }
    if constexpr (arity > 1) broadcast_shapes(op, in);
    return visit_compute<forward_dtypes>(dtype, [&]<class T>(T) {
      return detail::with_typed<T, arity>(in, [&](const auto&... x) {
        expr::detail::check_compute_type<T>(op, e);
        return detail::to_tensor(expr::eval(e, x...));
      });
    });
  }();
  return cast(out, result_dtype<E>(in));
}

template <class E>
template <std::uint32_t Numbers>
Tensor fused_kernels<E>::value_and_grad_binding(const E& e, std::span<const Tensor> in,
                                                std::vector<Tensor>& grads,
                                                std::string_view op) requires expr::is_scalar<E> {
  detail::check_arity<arity>(in, op);
  const DType dtype = promote_floating(op, in);
  broadcast_shapes(op, in);
  return visit_real(dtype, [&]<class T>(T) {
    return detail::with_typed<T, arity>(
        in,
        [&](const auto&... x) {
          auto r = expr::value_and_grad(e, x...);
          grads = detail::gradient_tensors<T>(std::move(r.grad), in);
          return scalar_tensor<T>(r.value);
        },
        std::integral_constant<std::uint32_t, Numbers>{});
  });
}

template <class E>
template <std::uint32_t Numbers>
Tensor fused_kernels<E>::forward_binding(const E& e, std::span<const Tensor> in, std::string_view op) {
  detail::check_arity<arity>(in, op);
  const DType dtype = promote(op, in, forward_dtypes);
  if (!is_floating(dtype)) return forward(e, in, op);
  if constexpr (arity > 1) broadcast_shapes(op, in);
  Tensor out = visit_real(dtype, [&]<class T>(T) {
    return detail::with_typed<T, arity>(
        in,
        [&](const auto&... x) {
          expr::detail::check_compute_type<T>(op, e);
          return detail::to_tensor(expr::eval(e, x...));
        },
        std::integral_constant<std::uint32_t, Numbers>{});
  });
  return cast(out, result_dtype<E>(in));
}

template <class E>
std::vector<Tensor> fused_kernels<E>::vjp(const E& e, std::span<const Tensor> in, const Tensor& cotangent,
                                          std::string_view op) {
  detail::check_arity<arity>(in, op);
  const DType dtype = promote_floating(op, in, complex_derivatives);
  if constexpr (complex_derivatives) {
    if (is_complex(dtype)) {
      // PyTorch's convention: the cotangent of z is conj(J)^T c = conj(J^T conj(c)) (the plain
      // derivative of the compile-time layer, conjugated around).
      return visit_compute<complex_kernels>(dtype, [&]<class T>(T) {
        if constexpr (expr::Complex<T>) {
          const TypedTensor<T> c = typed_as<T>(cotangent);
          auto conj_c = tenferro::detail::new_array<T>("vjp", c.shape());
          std::transform(c.as_slice().begin(), c.as_slice().end(), conj_c.data(),
                         [](T v) { return std::conj(v); });
          return detail::with_typed<T, arity>(in, [&](const auto&... x) {
            if constexpr (expr::is_scalar<E>) {
              return detail::gradient_tensors<T>(expr::grad(e, x...), in, conj_c.data()[0], true);
            } else {
              return detail::gradient_tensors<T>(expr::vjp(e, conj_c, x...), in, T(1), true);
            }
          });
        } else {
          return std::vector<Tensor>{};  // never: dtype is complex
        }
      });
    }
  }
  if constexpr (!expr::is_scalar<E>) {
    if (detail::same_dtype_and_shape(in) && cotangent.dtype() == dtype &&
        std::ranges::equal(cotangent.extents(), in[0].extents()) && cotangent.is_contiguous() &&
        std::ranges::all_of(in,
                            [](const Tensor& t) { return t.is_contiguous(); })) {  // gradients built in place
      return visit_real(dtype, [&]<class T>(T) {
        std::vector<Tensor> out;
        out.reserve(arity);
        for (std::size_t k = 0; k < arity; ++k) out.push_back(Tensor::for_overwrite<T>(in[0].extents()));
        std::array<column_major_array<T>*, arity> grads;
        for (std::size_t k = 0; k < arity; ++k) grads[k] = &out[k].template mutable_array<T>();
        [&]<std::size_t... K>(std::index_sequence<K...>) {
          expr::vjp_into(e, cotangent.typed<T>(), std::tie(*grads[K]...), in[K].typed<T>()...);
        }
        (std::make_index_sequence<arity>{});
        return out;
      });
    }
  }
  return visit_real(dtype, [&]<class T>(T) {
    return detail::with_typed<T, arity>(in, [&](const auto&... x) {
      if constexpr (expr::is_scalar<E>) {
        const T c = typed_as<T>(cotangent).as_slice()[0];
        return detail::gradient_tensors<T>(expr::grad(e, x...), in, c);
      } else {
        return detail::gradient_tensors<T>(expr::vjp(e, typed_as<T>(cotangent), x...), in);
      }
    });
  });
}

template <class E>
Tensor fused_kernels<E>::jvp(const E& e, std::span<const Tensor> in, std::span<const Tensor* const> tangents,
                             std::string_view op) {
  detail::check_arity<arity>(in, op);
  const DType dtype = promote_floating(op, in, complex_derivatives);  // holomorphic: J t as it is
  return visit_compute<kernel_dtypes{.complex = complex_derivatives}>(dtype, [&]<class T>(T) {
    auto tangent = [&](std::size_t k) {
      return tangents[k] ? typed_as<T>(*tangents[k])
                         : Tensor::zeros(in[k].shape(), dtype_of<T>).template typed<T>();
    };
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      const std::array<TypedTensor<T>, arity> x{typed_as<T>(in[K])...};
      const std::array<TypedTensor<T>, arity> t{tangent(K)...};
      return detail::to_tensor(expr::jvp(e, std::tie(x[K]...), std::tie(t[K]...)).tangent);
    }
    (std::make_index_sequence<arity>{});
  });
}

template <class E>
void fused_kernels<E>::forward_block(const E& e, DType dtype, void* out, const void* const* in, std::size_t n,
                                     std::uint32_t broadcast) {
  if constexpr (expr::is_scalar<E> || expr::level<E> != 0) {
    throw Error(ErrorKind::Unsupported, "forward_block",
                "an expression with reductions has no elementwise block kernel");
  } else {
    visit_real(dtype, [&]<class T>(T) {
      std::array<const T*, arity> p;
      for (std::size_t k = 0; k < arity; ++k) p[k] = static_cast<const T*>(in[k]);
      expr::detail::eval_block(static_cast<T*>(out), e, p, n, broadcast);
    });
  }
}

// One elementwise op on Tensors, without a tape: op(a), op(a, b) (broadcasting, promoting) and
// a * s. Every kernel-level elementwise step of the library goes through these.
template <class Op>
Tensor elementwise(const Tensor& a, std::string_view op) {
  return fused_kernels<unary_expr<Op>>::forward(unary_expr<Op>(expr::arg<0>{}), std::span(&a, 1), op);
}
template <class Op>
Tensor elementwise(const Tensor& a, const Tensor& b, std::string_view op) {
  const std::array<Tensor, 2> in{a, b};
  return fused_kernels<binary_expr<Op>>::forward(binary_expr<Op>(expr::arg<0>{}, expr::arg<1>{}), in, op);
}
inline Tensor scaled(const Tensor& a, double s) {
  using E = number_rhs_expr<expr::ops::mul>;
  return fused_kernels<E>::forward(E(expr::arg<0>{}, expr::constant(s)), std::span(&a, 1), "scale");
}

}  // namespace tenferro::cpu

// Declared only in a program's translation units, and in the part of tenferro::eager that
// compiles the runtime (separate_compilation.hpp).
#if !TENFERRO_HEADER_ONLY || defined(TENFERRO_EXTERN_KERNELS)
namespace tenferro::cpu {
#define TENFERRO_KERNEL(E) extern template struct fused_kernels<E>;
#include <tenferro/cpu/kernel_list.inc>
#undef TENFERRO_KERNEL
}  // namespace tenferro::cpu
#endif
