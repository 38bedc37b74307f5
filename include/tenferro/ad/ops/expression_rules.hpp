// The derivative rules and the entry of an expression (ad/ops/expression.hpp): expression_rules
// gives the functions of an op_def for expression type E, expression_def registers it once, and
// record_expression runs E as one node (deferred on large tensors when E is one elementwise op).
#pragma once

#include <tenferro/ad/ops/expression.hpp>

namespace tenferro::detail::ad {

template <class E, node_kind Kind>
struct expression_rules {
  static constexpr std::size_t N = expr::arity<E>;

  // A primitive node's vjp on large tensors is recorded op by op (deferred, so the whole backward
  // sweep fuses) rather than run as one kernel.
  static bool defers_vjp(const node& n, const tensor_state& output, const EagerTensor& cotangent) {
    if constexpr (Kind == node_kind::primitive && is_primitive_expr<E>) {
      const auto in = [&]<std::size_t... K>(std::index_sequence<K...>) {
        return std::array<EagerTensor, N + 1>{EagerTensor(n.inputs()[K])..., cotangent};
      }
      (std::make_index_sequence<N>{});
      return can_defer(in) && output.dtype() == cotangent.dtype();
    } else {
      (void)n, (void)output, (void)cotangent;
      return false;
    }
  }

  static std::vector<std::optional<Tensor>> vjp(const node& n, const Tensor& output, const Tensor& cotangent,
                                                const std::vector<bool>& needed) {
    if constexpr (Kind == node_kind::derived) {  // op by op, recording nothing
      const NoGradGuard no_grad;
      const auto& rt = n.inputs()[0]->runtime;
      const auto traced = vjp_traced(n, EagerTensor::from_tensor_in(output, rt),
                                     EagerTensor::from_tensor_in(cotangent, rt), needed);
      std::vector<std::optional<Tensor>> out(N);
      for (std::size_t k = 0; k < N; ++k) {
        if (traced[k]) out[k] = traced[k]->materialized();
      }
      return out;
    } else {
      if constexpr (Kind == node_kind::primitive && output_rule<E>::exists) {
        std::vector<std::optional<Tensor>> out(1);
        if (!needed[0]) return out;
        if (cotangent.size() == output.size() && !is_complex(output.dtype())) {  // complex: conjugated
          const auto& x = n.inputs()[0];
          out[0] = output_rule<E>::apply(x->runtime->backend(), output, cotangent, x->dtype(), n.name());
          return out;
        }
      }
      return kernel_vjp(n, cotangent, needed);
    }
  }

  static std::vector<std::optional<EagerTensor>> vjp_traced(const node& n, const EagerTensor& output,
                                                            const EagerTensor& cotangent,
                                                            const std::vector<bool>& needed) {
    if (is_complex(output.dtype())) {
      // PyTorch's convention: conj(J^T conj(c)), J^T c being what the rules below record.
      auto out = plain_vjp_traced(n, output, cotangent.conj(), needed);
      for (auto& g : out) {
        if (g) g = g->conj();
      }
      return out;
    }
    return plain_vjp_traced(n, output, cotangent, needed);
  }

  static std::vector<std::optional<EagerTensor>> plain_vjp_traced(const node& n, const EagerTensor& output,
                                                                  const EagerTensor& cotangent,
                                                                  const std::vector<bool>& needed) {
    if constexpr (Kind == node_kind::primitive && output_rule<E>::exists) {
      if (cotangent.shape() == output.shape()) {  // f'(y) * g over the output
        std::vector<std::optional<EagerTensor>> out(1);
        if (needed[0]) out[0] = output_rule<E>::traced(output, cotangent, n.inputs()[0]->dtype());
        return out;
      }
    }
    const E e = expression_of<E>(n);
    std::vector<EagerTensor> in = handles(n.inputs());
    in.push_back(cotangent);
    std::vector<std::optional<EagerTensor>> out(N);
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto one_input = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        if (!needed[I]) return;
        auto d = cotangent_expr<I>(e);
        if constexpr (!std::is_same_v<decltype(d), expr::zero>) {
          EagerTensor r = record_derivative<Kind>(d, in);
          if (r.shape() != in[I].shape()) r = r.sum_to(in[I].shape());
          if (r.dtype() != in[I].dtype()) r = r.to(in[I].dtype());
          out[I] = std::move(r);
        }
      };
      (one_input(std::integral_constant<std::size_t, K>{}), ...);
    }
    (std::make_index_sequence<N>{});
    return out;
  }

  static Tensor jvp(const node& n, const Tensor& output, std::span<const Tensor* const> tangents) {
    if constexpr (Kind == node_kind::derived) {  // op by op, recording nothing
      const NoGradGuard no_grad;
      const auto& rt = n.inputs()[0]->runtime;
      std::vector<EagerTensor> t;
      t.reserve(N);
      std::vector<const EagerTensor*> tp(N, nullptr);
      for (std::size_t k = 0; k < N; ++k) {
        if (tangents[k]) t.push_back(EagerTensor::from_tensor_in(*tangents[k], rt));
      }
      for (std::size_t k = 0, j = 0; k < N; ++k) {
        if (tangents[k]) tp[k] = &t[j++];
      }
      return jvp_traced(n, EagerTensor::from_tensor_in(output, rt), tp).materialized();
    } else {
      if constexpr (Kind == node_kind::primitive && output_rule<E>::exists) {
        if (tangents[0] && tangents[0]->size() == output.size()) {
          const auto& x = n.inputs()[0];
          return output_rule<E>::apply(x->runtime->backend(), output, *tangents[0], output.dtype(), n.name());
        }
      }
      const auto in = input_values(n);
      return n.inputs()[0]->runtime->backend().run(largest(in), [&] {
        return cpu::fused_kernels<E>::jvp(expression_of<E>(n), in, tangents, n.name());
      });
    }
  }

  static EagerTensor jvp_traced(const node& n, const EagerTensor& output,
                                std::span<const EagerTensor* const> tangents) {
    if constexpr (Kind == node_kind::primitive && output_rule<E>::exists) {
      if (tangents[0] && tangents[0]->shape() == output.shape()) {
        return output_rule<E>::traced(output, *tangents[0], output.dtype());
      }
    }
    std::vector<EagerTensor> in = handles(n.inputs());
    for (std::size_t k = 0; k < N; ++k) {
      in.push_back(tangents[k] ? *tangents[k]
                               : EagerTensor::from_tensor_in(Tensor::zeros(in[k].shape(), in[k].dtype()),
                                                             output.context()));
    }
    auto t = expr::detail::tangent_expr<N>(expression_of<E>(n));
    if constexpr (std::is_same_v<decltype(t), expr::zero>) {
      return EagerTensor::from_tensor_in(Tensor::zeros(output.shape(), output.dtype()), output.context());
    } else {
      return record_derivative<Kind>(t, in);
    }
  }

  // The cotangent reaching input I as an expression of (inputs..., cotangent = arg<N>).
  template <std::size_t I>
  static auto cotangent_expr(const E& e) {
    if constexpr (expr::is_scalar<E>) {
      return expr::detail::make_mul(expr::detail::vjp_expr<I>(e, expr::one{}), expr::arg<N>{});
    } else {
      return expr::detail::vjp_expr<I>(e, expr::arg<N>{});
    }
  }
  template <std::size_t I>
  static constexpr bool zero_cotangent =
      std::is_same_v<decltype(cotangent_expr<I>(std::declval<const E&>())), expr::zero>;

 private:
  // vjp with the fused kernels. Inputs whose cotangent is the output's cotangent itself (x + y,
  // ...) share its buffer; those whose cotangent is identically zero (sign, comparisons) get none,
  // as in the traced rules, so the sweep treats them alike (ad/transforms.hpp: reached with zero).
  static std::vector<std::optional<Tensor>> kernel_vjp(const node& n, const Tensor& cotangent,
                                                       const std::vector<bool>& needed) {
    std::vector<std::optional<Tensor>> out(N);
    const auto in = input_values(n);
    const CpuBackend& backend = n.inputs()[0]->runtime->backend();
    if (!n.saved().empty()) {  // scalar E: the forward pass computed the gradients already
      const kernel_scale scale{backend, cotangent};
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        auto take = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
          if (needed[I] && !zero_cotangent<I>) out[I] = scale(n.saved()[I]);
        };
        (take(std::integral_constant<std::size_t, K>{}), ...);
      }
      (std::make_index_sequence<N>{});
      return out;
    }
    bool kernel = false;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto pass = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        if (!needed[I] || zero_cotangent<I>) return;
        constexpr bool identity =
            std::is_same_v<decltype(cotangent_expr<I>(std::declval<const E&>())), expr::arg<N>>;
        if (identity && in[I].shape() == cotangent.shape() && in[I].dtype() == cotangent.dtype()) {
          out[I] = cotangent;
        } else {
          kernel = true;
        }
      };
      (pass(std::integral_constant<std::size_t, K>{}), ...);
    }
    (std::make_index_sequence<N>{});
    if (!kernel) return out;
    std::vector<Tensor> g = backend.run(largest(in), [&] {
      return cpu::fused_kernels<E>::vjp(expression_of<E>(n), in, cotangent, n.name());
    });
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto take = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        if (needed[I] && !out[I] && !zero_cotangent<I>) out[I] = std::move(g[I]);
      };
      (take(std::integral_constant<std::size_t, K>{}), ...);
    }
    (std::make_index_sequence<N>{});
    return out;
  }

  // g scaled by a rank-0 cotangent, in g's dtype (g itself when the cotangent is 1).
  struct kernel_scale {
    const CpuBackend& backend;
    const Tensor& cotangent;
    Tensor operator()(const Tensor& g) const {
      const double c =
          cpu::visit_real(cotangent.dtype(), [&]<class T>(T) { return double(cotangent.as_slice<T>()[0]); });
      return c == 1.0 ? g : kernel_algebra{backend}.scale(g, c);
    }
  };

  static std::array<Tensor, N> input_values(const node& n) {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      return std::array<Tensor, N>{n.inputs()[K]->value()...};
    }
    (std::make_index_sequence<N>{});
  }
  static std::size_t largest(std::span<const Tensor> in) {
    std::size_t m = 0;
    for (const auto& t : in) m = std::max(m, t.size());
    return m;
  }
};

// The block kernel of a one-op expression for deferred passes, per floating dtype.
template <class E, DType D>
void expression_block(void* out, const void* const* in, std::size_t n, const double* numbers,
                      std::uint32_t broadcast) {
  cpu::fused_kernels<E>::forward_block(
      expr::with_constants<E>(std::span<const double>(numbers, expr::constant_count<E>)), D, out, in, n,
      broadcast);
}
template <class E>
block_kernel expression_block_for(DType dtype) {
  if (dtype == DType::F32) return &expression_block<E, DType::F32>;
  if (dtype == DType::F64) return &expression_block<E, DType::F64>;
  return nullptr;
}

// The entry of expression type E (with `Kind`), registered the first time it is used. One-op
// expressions are named after their op ("exp", "mul_scalar"); applied expressions and their
// derivatives after their type, and print as "apply".
template <class E, node_kind Kind>
const op_def& expression_def() {
  static const op_def& def = [] {
    std::string name;
    if constexpr (Kind == node_kind::primitive) {
      name = primitive_name<E>();
    } else {
      name = std::string(Kind == node_kind::lifted ? "apply<" : "apply_derivative<") + typeid(E).name() + ">";
    }
    return std::ref(entry(name, [] {
      auto d = std::make_unique<op_def>();
      if constexpr (Kind != node_kind::primitive) d->label = "apply";
      d->arity = expr::arity<E>;
      d->integers = expr::has_integer_form<E>;
      d->complex = expr::has_complex_form<E>;
      if constexpr (requires { typename E::op_type; })
        d->predicate = expr::ops::is_predicate<typename E::op_type>();
      if constexpr (Kind == node_kind::primitive && expr::level<E> == 0) {
        d->block = &expression_block_for<E>;
        d->fusion = fusion_of<E>();
      }
      set_rules<expression_rules<E, Kind>>(*d);
      return d;
    }));
  }();
  return def;
}

template <class E, node_kind Kind, std::uint32_t Numbers>
EagerTensor record_expression(std::string_view op, const E& e, std::span<const EagerTensor> in) {
  static_assert(expr::arity<E> >= 1, "an expression node needs at least one input");
  if (in.size() != expr::arity<E>) {
    throw Error(ErrorKind::InvalidArgument, std::string(op),
                "the expression takes " + std::to_string(expr::arity<E>) + " inputs but " +
                    std::to_string(in.size()) + " were given");
  }
  for (std::size_t k = 0; k < in.size(); ++k) {
    if (k < 32 && ((Numbers >> k) & 1u) != 0 && in[k].rank() != 0) {
      throw Error(ErrorKind::InvalidArgument, std::string(op),
                  "argument " + std::to_string(k) + " is given as_scalar but has shape " +
                      format_shape(in[k].shape()) + "; as_scalar takes a tensor of rank 0");
    }
  }
  const auto& rt = common_runtime(op, in);
  const op_def& def = expression_def<E, Kind>();
  const DType dtype = promoted_dtype(in);
  const bool record = !def.predicate && (is_floating(dtype) || is_complex(dtype)) && should_record(in);
  if constexpr (Kind == node_kind::primitive && is_primitive_expr<E>) {
    if (!def.predicate && can_defer(in)) return defer(def, attributes_of(e), in, rt, record);
  }
  std::vector<Tensor> grads;
  auto run = [&](std::span<const Tensor> values) {
    return rt->backend().run(largest_size(in), [&] {
      if constexpr (expr::is_scalar<E> && Kind != node_kind::derived) {
        if (record && is_floating(dtype)) {
          return cpu::fused_kernels<E>::template value_and_grad_binding<Numbers>(e, values, grads, op);
        }
      }
      if constexpr (Numbers == 0) {
        return cpu::fused_kernels<E>::forward(e, values, op);
      } else {
        return cpu::fused_kernels<E>::template forward_binding<Numbers>(e, values, op);
      }
    });
  };
  Tensor value = [&] {
    if constexpr (expr::arity<E> == 1) {
      return run(std::span(&in[0].state()->value(), 1));  // the input's own value, no handle copied
    } else {
      const auto values = [&]<std::size_t... K>(std::index_sequence<K...>) {
        return std::array<Tensor, expr::arity<E>>{in[K].materialized()...};
      }
      (std::make_index_sequence<expr::arity<E>>{});
      return run(values);
    }
  }();
  return make_result(std::move(value), rt, record,
                     [&] { return node(in, def, attributes_of(e), std::move(grads)); });
}

}  // namespace tenferro::detail::ad
