// tenferro::apply: a compile-time expression of placeholders lifted over eager tensors as ONE tape
// node. Forward is one fused pass; the vjp and jvp are the expression's compile-time derivatives,
// also fused; the vjp of the node, when differentiated again, is again one fused node (then op by
// op beyond that). For a scalar expression with tracked inputs, the forward pass also computes
// every input's gradient (one pass, like expr::value_and_grad), so backward() only scales it.
#pragma once

#include <tenferro/ad/ops.hpp>
#include <tenferro/ad/ops/expression.hpp>

#include <array>
#include <concepts>

namespace tenferro {

template <expr::Expression E, std::same_as<EagerTensor>... In>
EagerTensor apply(const E& e, const In&... inputs) {
  static_assert(
      sizeof...(In) == expr::arity<E>,
      "apply: give exactly one EagerTensor per placeholder the expression uses (arg<0> .. arg<N-1>)");
  const std::array<EagerTensor, sizeof...(In)> in{inputs...};
  return detail::ad::record_expression<E, detail::ad::node_kind::lifted>("apply", e, in);
}

}  // namespace tenferro
