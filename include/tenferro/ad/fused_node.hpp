// fused_node<E, Kind>: one tape node for a compile-time expression E of placeholders, the node of
// every elementwise op (E = exp(arg<0>), arg<0> * arg<1>, ...) and of tenferro::apply.
//
//   forward   one fused pass (cpu::fused_kernels<E>). For a scalar E with tracked inputs the same
//             pass also computes the gradient of every input, kept for the backward sweep.
//   vjp/jvp   the compile-time derivative expressions of E, also one fused pass each.
//   traced    (results that are differentiated again) the derivative expressions are recorded
//             too, op by op (`interpret`: one single-op fused node per node of the expression),
//             or, for an apply node, as ONE fused node of the derivative expression.
//
// That derivative node (Kind derived) has a fused forward only: its own derivatives run op by op
// in both forms. Fused kernels of second derivatives (the derivative expression differentiated
// again, for every input at once) cost minutes of compilation for a few-input expression and
// are rarely the bottleneck, so they are never instantiated.
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/deferred.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/cpu/fused.hpp>

#include <array>
#include <optional>
#include <span>
#include <type_traits>

namespace tenferro::detail::ad {

// How a fused node differentiates (see the top of this header).
enum class node_kind {
  primitive,  // an elementwise eager op: kernel rules; recorded rules op by op
  lifted,     // apply: kernel rules; recorded rules as one `derived` node
  derived,    // the derivative of a lifted node: fused forward; rules op by op
};

template <class E, node_kind Kind>
EagerTensor record_fused(std::string_view op, const E& e, std::span<const EagerTensor> in);

// The printed name of an op struct (unary ops have a name, binary ops a symbol).
template <class Op>
constexpr std::string_view op_name() {
  if constexpr (requires { Op::name; }) {
    return Op::name;
  } else {
    return Op::symbol;
  }
}

template <class X>
inline constexpr bool is_number_leaf = std::is_same_v<X, expr::constant> || std::is_same_v<X, expr::zero> ||
                                       std::is_same_v<X, expr::one> || std::is_same_v<X, expr::numel>;

inline Shape broadcast_shape_of(std::span<const EagerTensor> in) {
  Shape shape;
  for (const auto& x : in) shape = cpu::broadcast_shapes("interpret", shape, x.shape());
  return shape;
}

template <class X>
double number_of(const X& x, std::span<const EagerTensor> in) {
  if constexpr (std::is_same_v<X, expr::constant>) {
    return x.value;
  } else if constexpr (std::is_same_v<X, expr::one>) {
    return 1.0;
  } else if constexpr (std::is_same_v<X, expr::zero>) {
    return 0.0;
  } else {
    return static_cast<double>(checked_shape_size(broadcast_shape_of(in)).value_or(0));
  }
}

// Records expression x over `in` op by op (each node of x becomes a single-op fused node).
template <class X>
EagerTensor interpret(const X& x, std::span<const EagerTensor> in) {
  using expr::arg;
  if constexpr (requires { X::index; }) {
    return in[X::index];
  } else if constexpr (is_number_leaf<X>) {
    return EagerTensor::from_tensor_in(Tensor::full({}, number_of(x, in), in[0].dtype()), in[0].context());
  } else if constexpr (requires { x.operand; }) {
    using Op = typename X::op_type;
    const EagerTensor a = interpret(x.operand, in);
    if constexpr (std::is_same_v<Op, expr::ops::stop_gradient>) {
      return a.detach();
    } else {
      return record_fused<expr::unary<Op, arg<0>>, node_kind::primitive>(
          op_name<Op>(), expr::unary<Op, arg<0>>(arg<0>{}), std::span(&a, 1));
    }
  } else if constexpr (requires { x.lhs; }) {
    using Op = typename X::op_type;
    using L = std::remove_cvref_t<decltype(x.lhs)>;
    using R = std::remove_cvref_t<decltype(x.rhs)>;
    if constexpr (is_number_leaf<L>) {
      using N = expr::binary<Op, expr::constant, arg<0>>;
      const EagerTensor b = interpret(x.rhs, in);
      return record_fused<N, node_kind::primitive>(
          op_name<Op>(), N(expr::constant(number_of(x.lhs, in)), arg<0>{}), std::span(&b, 1));
    } else if constexpr (is_number_leaf<R>) {
      using N = expr::binary<Op, arg<0>, expr::constant>;
      const EagerTensor a = interpret(x.lhs, in);
      return record_fused<N, node_kind::primitive>(
          op_name<Op>(), N(arg<0>{}, expr::constant(number_of(x.rhs, in))), std::span(&a, 1));
    } else {
      using N = expr::binary<Op, arg<0>, arg<1>>;
      const std::array<EagerTensor, 2> ab{interpret(x.lhs, in), interpret(x.rhs, in)};
      return record_fused<N, node_kind::primitive>(op_name<Op>(), N(arg<0>{}, arg<1>{}), ab);
    }
  } else {
    // A reduction runs over the broadcast shape of the whole evaluation.
    using Op = typename X::op_type;
    EagerTensor body = interpret(x.body, in);
    const Shape full = broadcast_shape_of(in);
    if (body.shape() != full) body = body.broadcast_to(full);
    if constexpr (std::is_same_v<Op, expr::ops::sum>) {
      return body.reduce_sum();
    } else {
      static_assert(std::is_same_v<Op, expr::ops::max>);
      return body.reduce_max();
    }
  }
}

// Records derivative expression d over `in`: one fused node for a lifted node, else op by op.
template <node_kind Kind, class D>
EagerTensor record_derivative(std::string_view op, const D& d, std::span<const EagerTensor> in) {
  if constexpr (Kind == node_kind::lifted) {
    return record_fused<D, node_kind::derived>(op, d, in);
  } else {
    return interpret(d, in);
  }
}

// f'(x) as an expression of the output y = f(x) (arg<0>), for the unary ops whose derivative would
// evaluate a costly f again (exp'(x) = exp(x) = y); void for the others. A primitive node of such
// an op runs its vjp and jvp as one kernel over (y, cotangent or tangent): `y * g` for exp
// instead of `exp(x) * g`, as fast as a multiplication.
template <class Op>
auto output_derivative() {
  namespace d = expr::detail;
  using expr::one;
  using y = expr::arg<0>;
  if constexpr (std::is_same_v<Op, expr::ops::exp>) {
    return y{};
  } else if constexpr (std::is_same_v<Op, expr::ops::expm1>) {
    return d::make_add(y{}, one{});
  } else if constexpr (std::is_same_v<Op, expr::ops::tanh>) {
    return d::make_sub(one{}, expr::square(y{}));
  } else if constexpr (std::is_same_v<Op, expr::ops::tan>) {
    return d::make_add(one{}, expr::square(y{}));
  } else if constexpr (std::is_same_v<Op, expr::ops::sigmoid>) {
    return d::make_mul(y{}, d::make_sub(one{}, y{}));
  } else if constexpr (std::is_same_v<Op, expr::ops::sqrt>) {
    return d::make_div(expr::constant(0.5), y{});
  } else if constexpr (std::is_same_v<Op, expr::ops::rsqrt>) {  // -x^(-3/2) / 2 = -y^3 / 2
    return d::make_mul(expr::constant(-0.5), d::make_mul(y{}, expr::square(y{})));
  } else {
    return;
  }
}

template <class E>
struct output_rule {
  static constexpr bool exists = false;
};
template <class Op>
requires(
    !std::is_void_v<decltype(output_derivative<Op>())>) struct output_rule<expr::unary<Op, expr::arg<0>>> {
  static constexpr bool exists = true;
  // The kernel of the vjp and the jvp: f'(y) * arg<1>.
  static auto kernel() { return expr::detail::make_mul(output_derivative<Op>(), expr::arg<1>{}); }

  // f'(x) * g over the output y, in the dtype of the node's input.
  static Tensor apply(const CpuBackend& backend, const Tensor& y, const Tensor& g, DType input_dtype,
                      std::string_view op) {
    using K = decltype(kernel());
    const std::array<Tensor, 2> in{y, g};
    Tensor r = backend.run(y.size(), [&] { return cpu::fused_kernels<K>::forward(kernel(), in, op); });
    return r.dtype() == input_dtype ? r : cpu::cast(r, input_dtype);
  }
  // The same with the runtime's ops (differentiable again; deferred on large tensors).
  static EagerTensor traced(const EagerTensor& y, const EagerTensor& g, DType input_dtype) {
    const std::array<EagerTensor, 2> in{y, g};
    EagerTensor r = interpret(kernel(), in);
    return r.dtype() == input_dtype ? r : r.to(input_dtype);
  }
};

template <class E, node_kind Kind>
class fused_node final : public node {
  static constexpr std::size_t N = expr::arity<E>;

 public:
  fused_node(std::span<const EagerTensor> inputs, E e, std::string_view name, std::vector<Tensor> grads)
      : node(inputs), expr_(std::move(e)), name_(name), grads_(std::move(grads)) {}

  std::string_view name() const noexcept override { return name_; }

  // A primitive node's vjp on large tensors is recorded op by op (deferred, so the whole backward
  // sweep fuses) rather than run as one kernel.
  bool defers_vjp(const tensor_state& output, const EagerTensor& cotangent) const override {
    if constexpr (Kind == node_kind::primitive && is_primitive_expr<E>) {
      if (cotangent.size() < CpuBackend::fusion_elements) return false;
      const auto in = [&]<std::size_t... K>(std::index_sequence<K...>) {
        return std::array<EagerTensor, N + 1>{EagerTensor(inputs()[K])..., cotangent};
      }
      (std::make_index_sequence<N>{});
      return can_defer(in) && output.dtype() == cotangent.dtype();
    } else {
      return false;
    }
  }

  std::vector<std::optional<Tensor>> vjp(const Tensor& output, const Tensor& cotangent,
                                         const std::vector<bool>& needed) const override {
    if constexpr (Kind == node_kind::derived) {  // op by op, recording nothing
      const NoGradGuard no_grad;
      const auto& rt = inputs()[0]->runtime;
      const auto traced = vjp_traced(EagerTensor::from_tensor_in(output, rt),
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
        if (cotangent.size() == output.size()) {
          const auto& x = inputs()[0];
          out[0] = output_rule<E>::apply(x->runtime->backend(), output, cotangent, x->dtype(), name_);
          return out;
        }
      }
      return kernel_vjp(cotangent, needed);
    }
  }

  std::vector<std::optional<EagerTensor>> vjp_traced(const EagerTensor& output, const EagerTensor& cotangent,
                                                     const std::vector<bool>& needed) const override {
    if constexpr (Kind == node_kind::primitive && output_rule<E>::exists) {
      if (cotangent.shape() == output.shape()) {  // f'(y) * g over the output
        std::vector<std::optional<EagerTensor>> out(1);
        if (needed[0]) out[0] = output_rule<E>::traced(output, cotangent, inputs()[0]->dtype());
        return out;
      }
    }
    std::vector<EagerTensor> in = handles(inputs());
    in.push_back(cotangent);
    std::vector<std::optional<EagerTensor>> out(N);
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto one_input = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        if (!needed[I]) return;
        auto d = cotangent_expr<I>();
        if constexpr (!std::is_same_v<decltype(d), expr::zero>) {
          EagerTensor r = record_derivative<Kind>(name_, d, in);
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

  Tensor jvp(const Tensor& output, std::span<const Tensor* const> tangents) const override {
    if constexpr (Kind == node_kind::derived) {  // op by op, recording nothing
      const NoGradGuard no_grad;
      const auto& rt = inputs()[0]->runtime;
      std::vector<EagerTensor> t;
      t.reserve(N);
      std::vector<const EagerTensor*> tp(N, nullptr);
      for (std::size_t k = 0; k < N; ++k) {
        if (tangents[k]) t.push_back(EagerTensor::from_tensor_in(*tangents[k], rt));
      }
      for (std::size_t k = 0, j = 0; k < N; ++k) {
        if (tangents[k]) tp[k] = &t[j++];
      }
      return jvp_traced(EagerTensor::from_tensor_in(output, rt), tp).materialized();
    } else {
      if constexpr (Kind == node_kind::primitive && output_rule<E>::exists) {
        if (tangents[0] && tangents[0]->size() == output.size()) {
          const auto& x = inputs()[0];
          return output_rule<E>::apply(x->runtime->backend(), output, *tangents[0], output.dtype(), name_);
        }
      }
      const auto in = input_values();
      return inputs()[0]->runtime->backend().run(
          largest(in), [&] { return cpu::fused_kernels<E>::jvp(expr_, in, tangents, name_); });
    }
  }

  EagerTensor jvp_traced(const EagerTensor& output,
                         std::span<const EagerTensor* const> tangents) const override {
    if constexpr (Kind == node_kind::primitive && output_rule<E>::exists) {
      if (tangents[0] && tangents[0]->shape() == output.shape()) {
        return output_rule<E>::traced(output, *tangents[0], output.dtype());
      }
    }
    std::vector<EagerTensor> in = handles(inputs());
    for (std::size_t k = 0; k < N; ++k) {
      in.push_back(tangents[k] ? *tangents[k]
                               : EagerTensor::from_tensor_in(Tensor::zeros(in[k].shape(), in[k].dtype()),
                                                             output.context()));
    }
    auto t = expr::detail::tangent_expr<N>(expr_);
    if constexpr (std::is_same_v<decltype(t), expr::zero>) {
      return EagerTensor::from_tensor_in(Tensor::zeros(output.shape(), output.dtype()), output.context());
    } else {
      return record_derivative<Kind>(name_, t, in);
    }
  }

 private:
  // vjp with the fused kernels.
  std::vector<std::optional<Tensor>> kernel_vjp(const Tensor& cotangent,
                                                const std::vector<bool>& needed) const {
    std::vector<std::optional<Tensor>> out(N);
    const auto in = input_values();
    const CpuBackend& backend = inputs()[0]->runtime->backend();
    if (!grads_.empty()) {  // scalar E: the forward pass computed the gradients already
      const kernel_scale scale{backend, cotangent};
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        auto take = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
          if (needed[I] && !std::is_same_v<decltype(cotangent_expr<I>()), expr::zero>)
            out[I] = scale(grads_[I]);
        };
        (take(std::integral_constant<std::size_t, K>{}), ...);
      }
      (std::make_index_sequence<N>{});
      return out;
    }
    // Inputs whose cotangent is the output's cotangent itself (x + y, ...) share its buffer; those
    // whose cotangent is identically zero (sign, comparisons) get none, as in the traced rules,
    // so the sweep treats them alike (ad/transforms.hpp: reached with zero).
    bool kernel = false;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto pass = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        if (!needed[I] || std::is_same_v<decltype(cotangent_expr<I>()), expr::zero>) return;
        constexpr bool identity = std::is_same_v<decltype(cotangent_expr<I>()), expr::arg<N>>;
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
    std::vector<Tensor> g =
        backend.run(largest(in), [&] { return cpu::fused_kernels<E>::vjp(expr_, in, cotangent, name_); });
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto take = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        if (needed[I] && !out[I] && !std::is_same_v<decltype(cotangent_expr<I>()), expr::zero>) {
          out[I] = std::move(g[I]);
        }
      };
      (take(std::integral_constant<std::size_t, K>{}), ...);
    }
    (std::make_index_sequence<N>{});
    return out;
  }

  // The cotangent reaching input I as an expression of (inputs..., cotangent = arg<N>).
  template <std::size_t I>
  auto cotangent_expr() const {
    if constexpr (expr::is_scalar<E>) {
      return expr::detail::make_mul(expr::detail::vjp_expr<I>(expr_, expr::one{}), expr::arg<N>{});
    } else {
      return expr::detail::vjp_expr<I>(expr_, expr::arg<N>{});
    }
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

  std::array<Tensor, N> input_values() const {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      return std::array<Tensor, N>{inputs()[K]->value()...};
    }
    (std::make_index_sequence<N>{});
  }
  static std::size_t largest(std::span<const Tensor> in) {
    std::size_t n = 0;
    for (const auto& t : in) n = std::max(n, t.size());
    return n;
  }

  E expr_;
  std::string_view name_;
  std::vector<Tensor> grads_;
};

template <class E, node_kind Kind>
EagerTensor record_fused(std::string_view op, const E& e, std::span<const EagerTensor> in) {
  static_assert(expr::arity<E> >= 1, "a fused node needs at least one input");
  if (in.size() != expr::arity<E>) {
    throw Error(ErrorKind::InvalidArgument, std::string(op),
                "the expression takes " + std::to_string(expr::arity<E>) + " inputs but " +
                    std::to_string(in.size()) + " were given");
  }
  const auto& rt = common_runtime(op, in);
  const bool record = should_record(in);
  if constexpr (Kind == node_kind::primitive && is_primitive_expr<E>) {
    if (can_defer(in)) return defer(e, in, rt, record, [&] { return fused_node<E, Kind>(in, e, op, {}); });
  }
  std::vector<Tensor> grads;
  auto run = [&](std::span<const Tensor> values) {
    return rt->backend().run(largest_size(in), [&] {
      if constexpr (expr::is_scalar<E> && Kind != node_kind::derived) {
        if (record) return cpu::fused_kernels<E>::value_and_grad(e, values, grads, op);
      }
      return cpu::fused_kernels<E>::forward(e, values, op);
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
                     [&] { return fused_node<E, Kind>(in, e, op, std::move(grads)); });
}

}  // namespace tenferro::detail::ad
