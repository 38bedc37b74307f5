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
#include <cstdint>

namespace tenferro {

// An input of apply bound as a number of the expression: a rank-0 tensor whose value the fused
// loop reads as a number, so that what depends on numbers alone (log(sigma), 1 / sigma) is computed
// once before the loop, as for numbers given to the compile-time layer; its gradient is as for any
// input. Which inputs are numbers is part of the kernel's type, like a C++ number's in the
// compile-time layer: the runtime cannot choose it from shapes without compiling every choice.
struct ScalarInput {
  EagerTensor tensor;
};
inline ScalarInput as_scalar(const EagerTensor& t) { return {t}; }

namespace detail::ad {
inline const EagerTensor& apply_input(const EagerTensor& t) { return t; }
inline const EagerTensor& apply_input(const ScalarInput& s) { return s.tensor; }
}  // namespace detail::ad

template <class T>
concept ApplyInput = std::same_as<T, EagerTensor> || std::same_as<T, ScalarInput>;

template <expr::Expression E, ApplyInput... In>
EagerTensor apply(const E& e, const In&... inputs) {
  static_assert(sizeof...(In) == expr::arity<E>,
                "apply: give exactly one EagerTensor (or as_scalar of one) per placeholder the expression "
                "uses (arg<0> .. arg<N-1>)");
  constexpr std::uint32_t numbers = [] {
    std::uint32_t mask = 0, k = 0;
    ((mask |= std::same_as<In, ScalarInput> && k < 32 ? std::uint32_t{1} << k : 0, ++k), ...);
    return mask;
  }();
  static_assert(
      [] {
        std::size_t k = 0;
        bool ok = true;
        ((ok = ok && !(std::same_as<In, ScalarInput> && k >= 32), ++k), ...);
        return ok;
      }(),
      "apply: as_scalar applies to the first 32 inputs");
  const std::array<EagerTensor, sizeof...(In)> in{detail::ad::apply_input(inputs)...};
  return detail::ad::record_expression<E, detail::ad::node_kind::lifted, numbers>("apply", e, in);
}

}  // namespace tenferro
