// The op-table entries of compile-time expressions: every elementwise eager op (a one-op
// expression: exp(arg<0>), arg<0> * arg<1>, arg<0> * 2.5, ...) and tenferro::apply (any expression
// of placeholders). An expression's type fixes the entry; its constants are the node's attributes
// (expr/constants.hpp), so an entry knows everything else at compile time.
//
//   forward   one fused pass (cpu::fused_kernels<E>). For a scalar E with tracked inputs the same
//             pass also computes the gradient of every input, saved in the node for backward.
//   vjp/jvp   the compile-time derivative expressions of E, also one fused pass each.
//   traced    (results that are differentiated again) the derivative expressions are recorded
//             too, op by op (`interpret`: one elementwise entry per node of the expression), or,
//             for an apply node, as ONE node of the derivative expression.
//
// That derivative node (kind derived) has a fused forward only: its own derivatives run op by
// op in both forms. Fused kernels of second derivatives (the derivative expression differentiated
// again, for every input at once) cost minutes of compilation for a few-input expression and
// are rarely the bottleneck, so they are never instantiated.
#pragma once

#include <tenferro/ad/algebra.hpp>
#include <tenferro/ad/deferred.hpp>
#include <tenferro/ad/op.hpp>
#include <tenferro/ad/record.hpp>
#include <tenferro/cpu/fused.hpp>
#include <tenferro/expr/constants.hpp>

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <typeinfo>

namespace tenferro::detail::ad {

// How an expression entry differentiates (see the top of this header).
enum class node_kind {
  primitive,  // an elementwise eager op: kernel rules; recorded rules op by op
  lifted,     // apply: kernel rules; recorded rules as one `derived` node
  derived,    // the derivative of a lifted node: fused forward; rules op by op
};

// The one-op expressions of the eager elementwise ops: op(x), op(x, y), op(x, c), op(c, x).
template <class E>
inline constexpr bool is_primitive_expr = false;
template <class Op>
inline constexpr bool is_primitive_expr<expr::unary<Op, expr::arg<0>>> = true;
template <class Op>
inline constexpr bool is_primitive_expr<expr::binary<Op, expr::arg<0>, expr::arg<1>>> = true;
template <class Op>
inline constexpr bool is_primitive_expr<expr::binary<Op, expr::arg<0>, expr::constant>> = true;
template <class Op>
inline constexpr bool is_primitive_expr<expr::binary<Op, expr::constant, expr::arg<0>>> = true;

// The entry name of a one-op expression: "exp", "mul", "mul_scalar" (x * s), "rsub_scalar" (s - x).
template <class E>
std::string primitive_name() {
  using Op = typename E::op_type;
  if constexpr (std::is_same_v<E, expr::binary<Op, expr::arg<0>, expr::constant>>) {
    return std::string(Op::name) + "_scalar";
  } else if constexpr (std::is_same_v<E, expr::binary<Op, expr::constant, expr::arg<0>>>) {
    return "r" + std::string(Op::name) + "_scalar";
  } else {
    return std::string(Op::name);
  }
}

// What a pass of deferred fusion may treat specially about a one-op expression.
// (The pairing of sin and cos is the ops' `paired_with` trait, shared with eval/cse.hpp.)
template <class E>
struct fusion_of_expr {
  static constexpr fusion_kind value = fusion_kind::other;
};
template <class Op>
requires requires { typename Op::paired_with; }
struct fusion_of_expr<cpu::unary_expr<Op>> {
  // Deferred passes compute a pair with sincos_block (ad/deferred.hpp): sin and cos only so far.
  static_assert(std::is_same_v<Op, expr::ops::sin> || std::is_same_v<Op, expr::ops::cos>,
                "a new pair of ops needs its pair kernel in the deferred passes");
  static constexpr fusion_kind value = Op::pair_slot == 0 ? fusion_kind::sin : fusion_kind::cos;
};
template <>
struct fusion_of_expr<cpu::binary_expr<expr::ops::mul>> {
  static constexpr fusion_kind value = fusion_kind::mul;
};
template <class E>
constexpr fusion_kind fusion_of() {
  return fusion_of_expr<E>::value;
}

// The attributes of an expression: its constants. And the expression of a node's attributes.
template <class E>
OpAttributes attributes_of(const E& e) {
  OpAttributes a;
  for (const double c : expr::constants_of(e)) a.numbers.push_back(c);
  return a;
}
template <class E>
E expression_of(const node& n) {
  return expr::with_constants<E>(
      std::span<const double>(n.attributes().numbers.data(), n.attributes().numbers.size()));
}

template <class E, node_kind Kind>
const op_def& expression_def();

// The result of expression e over `in` as one node of its entry; `op` names the call in errors.
// Input k, for each bit k of Numbers, is bound as a number of the expression when the value is
// computed (cpu::fused_kernels<E>::forward_binding); it must have rank 0.
template <class E, node_kind Kind, std::uint32_t Numbers = 0>
EagerTensor record_expression(std::string_view op, const E& e, std::span<const EagerTensor> in);

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

// Records expression x over `in` op by op (each node of x becomes one elementwise entry's node).
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
      using N = expr::unary<Op, arg<0>>;
      return record_expression<N, node_kind::primitive>(Op::name, N(arg<0>{}), std::span(&a, 1));
    }
  } else if constexpr (requires { x.lhs; }) {
    using Op = typename X::op_type;
    using L = std::remove_cvref_t<decltype(x.lhs)>;
    using R = std::remove_cvref_t<decltype(x.rhs)>;
    if constexpr (is_number_leaf<L>) {
      using N = expr::binary<Op, expr::constant, arg<0>>;
      const EagerTensor b = interpret(x.rhs, in);
      return record_expression<N, node_kind::primitive>(
          Op::name, N(expr::constant(number_of(x.lhs, in)), arg<0>{}), std::span(&b, 1));
    } else if constexpr (is_number_leaf<R>) {
      using N = expr::binary<Op, arg<0>, expr::constant>;
      const EagerTensor a = interpret(x.lhs, in);
      return record_expression<N, node_kind::primitive>(
          Op::name, N(arg<0>{}, expr::constant(number_of(x.rhs, in))), std::span(&a, 1));
    } else {
      using N = expr::binary<Op, arg<0>, arg<1>>;
      const std::array<EagerTensor, 2> ab{interpret(x.lhs, in), interpret(x.rhs, in)};
      return record_expression<N, node_kind::primitive>(Op::name, N(arg<0>{}, arg<1>{}), ab);
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

// Records derivative expression d over `in`: one node for a lifted entry, else op by op.
template <node_kind Kind, class D>
EagerTensor record_derivative(const D& d, std::span<const EagerTensor> in) {
  if constexpr (Kind == node_kind::lifted) {
    return record_expression<D, node_kind::derived>("apply", d, in);
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

}  // namespace tenferro::detail::ad

#include <tenferro/ad/ops/expression_rules.hpp>
