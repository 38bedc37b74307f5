// Inputs bound to the leaves of a pass (binding: the compute type, the broadcast shape, gathers
// of inputs the loop cannot read in place, one-element inputs as broadcast leaves), and the
// gradient outputs of value_and_grad and vjp: their shapes, and the sum back over broadcast axes.
#pragma once

#include <tenferro/expr/derivative.hpp>
#include <tenferro/expr/eval/broadcast.hpp>
#include <tenferro/expr/eval/inputs.hpp>
#include <tenferro/expr/eval/program.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

namespace tenferro::expr {

namespace detail {

template <class T, class In>
using leaf_t = std::conditional_t<ArrayInput<In>, array_leaf<T>, scalar_leaf<T>>;

template <class In>
inline constexpr bool is_tensor = std::is_same_v<std::remove_cvref_t<In>, Tensor>;

template <class... In>
constexpr void check_inputs() {
  static_assert(!(is_tensor<In> || ...),
                "a tenferro::Tensor has a run-time dtype: pass tensor.typed<double>() (or <float>) instead");
  static_assert(
      (Input<In> && ...),
      "every input must be an xtensor container or TypedTensor of float or double, or an arithmetic scalar");
}

// The NumPy broadcast shape of the array inputs among the first `count` inputs ({} when none).
template <class... In>
eval_shape broadcast_shape(std::string_view op, std::size_t count, const In&... in) {
  eval_shape shape;
  std::size_t k = 0;
  std::size_t first = sizeof...(In);
  auto widen = [&](const auto& input) {
    if constexpr (ArrayInput<decltype(input)>) {
      if (k < count) {
        const auto& c = container_of(input);
        if (first == sizeof...(In)) {
          first = k;
          shape.assign(c.shape().begin(), c.shape().end());
        } else {
          broadcast_into(shape, shape_view(c), op, k, first);
        }
      }
    }
    ++k;
  };
  (widen(in), ...);
  return shape;
}

// Throws ShapeMismatch from `op` unless the array `cotangent` has the broadcast shape of the first
// `count` inputs (the output's).
template <class C, class... In>
void check_cotangent_shape(std::string_view op, std::size_t count, const C& cotangent, const In&... in) {
  const eval_shape out = broadcast_shape(op, count, in...);
  const std::span<const std::size_t> given = shape_view(container_of(cotangent));
  if (!std::ranges::equal(given, out)) {
    throw_error(ErrorKind::ShapeMismatch, op,
                {"argument 'cotangent' has shape ", given, " but the output has shape ",
                 std::span<const std::size_t>(out)});
  }
}

// An input the fused loop reads where it is, for an evaluation of shape `shape`: a scalar, or a
// column-major container of T of exactly that shape (anything else is copied first).
template <class T, class In, class S>
bool fits_in_place(const In& input, const S& shape) {
  if constexpr (ArrayInput<In>) {
    const auto& c = container_of(input);
    if constexpr (std::is_same_v<typename std::remove_cvref_t<decltype(c)>::value_type, T>) {
      return std::equal(c.shape().begin(), c.shape().end(), shape.begin(), shape.end()) &&
             column_major_storage(c);
    } else {
      return false;
    }
  } else {
    return true;
  }
}

template <class T, class In>
leaf_t<T, In> leaf_in_place(const In& input) {
  if constexpr (ArrayInput<In>) {
    return {container_of(input).data()};
  } else {
    return {static_cast<T>(input)};
  }
}

// Inputs bound to leaves of compute type T, with the broadcast shape and any converted copies.
template <class T, class... In>
struct binding {
  std::tuple<leaf_t<T, In>...> leaves;
  eval_shape shape;
  std::size_t n = 1;
  std::vector<tenferro::detail::scratch_buffer<T>> copies;  // plain buffers: cheap to compile
  // One per input at most; the leaves point at them (a binding moves without moving them).
  std::unique_ptr<gather_source<T>[]> gathers;
  std::size_t gathered = 0;

  // The shape is the broadcast shape of the first `shaped_inputs` inputs; the others (tangents,
  // cotangents) must broadcast into it without widening it.
  binding(std::string_view op, std::size_t shaped_inputs, const In&... in)
      : shape(broadcast_shape(op, shaped_inputs, in...)) {
    std::size_t k = 0;
    auto check_trailing = [&](const auto& input) {
      if constexpr (ArrayInput<decltype(input)>) {
        if (k >= shaped_inputs) {
          eval_shape widened = shape;
          broadcast_into(widened, shape_view(container_of(input)), op, k, 0);
          if (widened != shape) {
            throw_error(ErrorKind::ShapeMismatch, op,
                        {"input ", k, " has shape ", shape_view(container_of(input)),
                         ", which does not fit the output shape ", std::span<const std::size_t>(shape)});
          }
        }
      }
      ++k;
    };
    (check_trailing(in), ...);
    const auto size = checked_shape_size(shape);
    if (!size) {
      throw_error(
          ErrorKind::InvalidArgument, op,
          {"the inputs broadcast to shape ", std::span<const std::size_t>(shape),
           ", which has too many elements (the product of its non-zero extents must not exceed 2^63 - "
           "1)"});
    }
    n = *size;
    leaves = std::tuple<leaf_t<T, In>...>{bind(in)...};
  }

  template <class I>
  leaf_t<T, I> bind(const I& input) {
    if constexpr (ArrayInput<I>) {
      const auto& c = container_of(input);
      if (c.size() == 1) {  // one element: one batch of it, read wherever it broadcasts
        copies.emplace_back(max_batch_elements);
        std::fill_n(copies.back().data(), max_batch_elements, static_cast<T>(c.data()[0]));
        return {copies.back().data(), 0};
      }
      if constexpr (std::is_same_v<typename std::remove_cvref_t<decltype(c)>::value_type, T>) {
        if (fits_in_place<T>(input, shape)) return {c.data()};
      }
      if (!gathers) gathers = std::make_unique<gather_source<T>[]>(sizeof...(In));
      gather_source<T>& g = gathers[gathered++] = make_gather<T>(c, Shape(shape.begin(), shape.end()));  // chunk by chunk
      return {nullptr, ~std::size_t(0), &g};
    } else {
      return {static_cast<T>(input)};
    }
  }
};

// Inputs read where they lie, without a binding (no shape is built, nothing allocated): when every
// array input is a column-major array of T of one shape.
template <class T, class... In>
struct in_place_inputs {
  std::tuple<leaf_t<T, In>...> leaves;
  std::span<const std::size_t> shape;
  std::size_t n;
};

// Whether input In is read as T where it lies (a number always is: it is converted into its leaf).
template <class T, class In>
inline constexpr bool of_compute_type = [] {
  if constexpr (ArrayInput<In>) {
    return std::is_same_v<typename std::remove_cvref_t<decltype(container_of(std::declval<const In&>()))>::value_type,
                          T>;
  } else {
    return true;
  }
}();

// The shape is the first array's among the first `shaped_inputs` inputs (the others, a
// cotangent or tangents, must have it too).
template <class T, class... In>
std::optional<in_place_inputs<T, In...>> bind_in_place(std::size_t shaped_inputs, const In&... in) {
  if constexpr (!(of_compute_type<T, In> && ...)) {  // some input is converted
    (void)shaped_inputs;
    ((void)in, ...);
    return std::nullopt;
  } else {
    std::span<const std::size_t> shape;
    bool any = false;
    std::size_t k = 0;
    auto first = [&](const auto& input) {
      if constexpr (ArrayInput<decltype(input)>) {
        if (!any && k < shaped_inputs) {
          shape = shape_view(container_of(input));
          any = true;
        }
      }
      ++k;
    };
    (first(in), ...);
    if (!any || !(fits_in_place<T>(in, shape) && ...)) return std::nullopt;
    // A size that overflows is the binding's to report, with its usual error.
    const std::optional<std::size_t> n = checked_shape_size(shape);
    if (!n) return std::nullopt;
    return in_place_inputs<T, In...>{{leaf_in_place<T>(in)...}, shape, *n};
  }
}

// f(leaves, n, shape) over the inputs read in place when they can be, else bound (binding<T, In...>,
// its shape the broadcast shape of the first `shaped_inputs`).
template <class T, class... In, class F>
decltype(auto) with_leaves(std::string_view op, std::size_t shaped_inputs, F&& f, const In&... in) {
  if (auto p = bind_in_place<T>(shaped_inputs, in...)) return f(p->leaves, p->n, p->shape);
  binding<T, In...> b(op, shaped_inputs, in...);
  return f(b.leaves, b.n, std::span<const std::size_t>(b.shape));
}

// The gradient output for input K of a scalar gradient field expression G.
template <class In, class G>
auto gradient_output(G g) {
  if constexpr (ArrayInput<In>) {
    return as_array<G>{std::move(g)};
  } else {
    return as_scalar<decltype(make_reduction<ops::sum>(g))>{make_reduction<ops::sum>(std::move(g))};
  }
}

template <class E, std::size_t... K>
auto gradient_outputs(const E& e, std::index_sequence<K...>, auto cotangent, const auto&... in) {
  using Inputs = std::tuple<std::remove_cvref_t<decltype(in)>...>;
  return std::make_tuple(gradient_output<std::tuple_element_t<K, Inputs>>(vjp_expr<K>(e, cotangent))...);
}

// The gradient of input In as value_and_grad returns it: an array for an array input, a T for a
// scalar one.
template <class T, class In>
using gradient_t = std::conditional_t<ArrayInput<In>, column_major_array<T>, T>;

// What a gradient is constructed from, in place in value_and_grad's result: an array input's
// gradient is shaped like the evaluation (summed back to the input's shape afterwards when the
// input was broadcast), except that of an input of one element, which the pass sums as it goes
// (program.hpp, sums()); a scalar's starts at 0.
template <class T>
typename column_major_array<T>::shape_type array_shape(std::span<const std::size_t> shape) {
  return {shape.begin(), shape.end()};
}

template <class T, class In>
auto gradient_init(std::span<const std::size_t> shape, const In& input) {
  if constexpr (ArrayInput<In>) {
    const auto& c = container_of(input);
    if (c.size() == 1) return typename column_major_array<T>::shape_type(c.shape().begin(), c.shape().end());
    return array_shape<T>(shape);
  } else {
    (void)shape, (void)input;
    return T(0);
  }
}

template <class T, class... In>
using gradients_t = std::tuple<gradient_t<T, In>...>;

// An uninitialised array of `shape`, constructed where the caller's result lives.
template <class T>
column_major_array<T> new_array(std::span<const std::size_t> shape) {
  return column_major_array<T>(array_shape<T>(shape));
}

// The pass of run_with_gradients: `outs` into `first`, and the gradient field of every input into
// `grads` (arrays or out_spans of the evaluation's n elements, or of one element, which sums).
template <class T, class Leaves, class... Firsts, class... Outs, class Grads, class E, class Cot, class... In>
void run_gradient_pass(const Leaves& leaves, std::size_t n, std::tuple<Firsts&...> first,
                       std::tuple<Outs...> outs, Grads& grads, const E& e, Cot cotangent, const In&... in) {
  std::apply(
      [&](const auto&... out) {
        [&]<std::size_t... F, std::size_t... K>(std::index_sequence<F...>, std::index_sequence<K...>) {
          run_program_into<simd_policy, T>(leaves, n, std::tie(std::get<F>(first)..., std::get<K>(grads)...),
                                           out...);
        }
        (std::index_sequence_for<Firsts...>{}, std::index_sequence_for<In...>{});
      },
      std::tuple_cat(std::move(outs),
                     gradient_outputs(e, std::index_sequence_for<In...>{}, cotangent, in...)));
}

// Runs `outs` (the outputs that precede the gradients, bound to `first`) and the gradient outputs
// of every input, writing each gradient into `grads` (constructed by gradient_init), then sums the
// gradients of broadcast inputs of several elements back to their shapes.
template <class T, class Leaves, class... Firsts, class... Outs, class Grads, class E, class Cot, class... In>
void run_with_gradients(const Leaves& leaves, std::size_t n, std::tuple<Firsts&...> first,
                        std::tuple<Outs...> outs, Grads& grads, const E& e, Cot cotangent, const In&... in) {
  run_gradient_pass<T>(leaves, n, first, std::move(outs), grads, e, cotangent, in...);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto fit = [&](auto& g, const auto& input) {
      if constexpr (ArrayInput<decltype(input)>) {
        const auto& c = container_of(input);
        if (!std::ranges::equal(g.shape(), c.shape())) g = reduce_to_shape<T>(g, shape_of(c));
      }
    };
    (fit(std::get<K>(grads), in), ...);
  }
  (std::index_sequence_for<In...>{});
}

}  // namespace detail

}  // namespace tenferro::expr
