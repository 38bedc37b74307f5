// The entry points: eval, value_and_grad, grad, vjp, jvp.
//
// Inputs bind positionally to arg<0>, arg<1>, ...; more inputs than the expression uses are
// allowed (their gradients are 0). Same-shape column-major inputs of the compute type, and
// scalars, are read in place by the fused SIMD loop; other shapes broadcast NumPy-style (and
// other layouts or element types are converted) through a copy, and gradients of broadcast inputs
// are summed back to the input's shape.
#pragma once

#include <tenferro/expr/derivative.hpp>
#include <tenferro/expr/eval/broadcast.hpp>
#include <tenferro/expr/eval/inputs.hpp>
#include <tenferro/expr/eval/program.hpp>

#include <algorithm>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

namespace tenferro::expr {

// value_and_grad's result: `auto [value, grads] = value_and_grad(e, x, y);`
template <class T, class Grads>
struct value_and_grad_result {
  T value;
  Grads grad;
};

// jvp's result: the value and the tangent (both T for a scalar expression, arrays otherwise).
template <class V>
struct jvp_result {
  V value;
  V tangent;
};

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
Shape broadcast_shape(std::string_view op, std::size_t count, const In&... in) {
  Shape shape;
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
          broadcast_into(shape, shape_of(c), op, k, first);
        }
      }
    }
    ++k;
  };
  (widen(in), ...);
  return shape;
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
  Shape shape;
  std::size_t n = 1;
  std::vector<tenferro::detail::scratch_buffer<T>> copies;  // plain buffers: cheap to compile

  // The shape is the broadcast shape of the first `shaped_inputs` inputs; the others (tangents,
  // cotangents) must broadcast into it without widening it.
  binding(std::string_view op, std::size_t shaped_inputs, const In&... in)
      : shape(broadcast_shape(op, shaped_inputs, in...)) {
    std::size_t k = 0;
    auto check_trailing = [&](const auto& input) {
      if constexpr (ArrayInput<decltype(input)>) {
        if (k >= shaped_inputs) {
          Shape widened = shape;
          broadcast_into(widened, shape_of(container_of(input)), op, k, 0);
          if (widened != shape) {
            throw_error(ErrorKind::ShapeMismatch, op,
                        {"input ", k, " has shape ", shape_of(container_of(input)),
                         ", which does not fit the output shape ", shape});
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
          {"the inputs broadcast to shape ", shape,
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
      copies.emplace_back(n);  // the leaves point into the buffers, which stay where they are
      materialize_into<T>(copies.back().data(), c, shape);
      return {copies.back().data()};
    } else {
      return {static_cast<T>(input)};
    }
  }
};

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
typename column_major_array<T>::shape_type array_shape(const Shape& shape) {
  return {shape.begin(), shape.end()};
}

template <class T, class In>
auto gradient_init(const Shape& shape, const In& input) {
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
column_major_array<T> new_array(const Shape& shape) {
  return column_major_array<T>(array_shape<T>(shape));
}

// Runs `outs` (the outputs that precede the gradients, bound to `first`) and the gradient outputs
// of every input, writing each gradient into `grads` (constructed by gradient_init), then sums the
// gradients of broadcast inputs of several elements back to their shapes.
template <class T, class Leaves, class... Firsts, class... Outs, class E, class Cot, class... In>
void run_with_gradients(const Leaves& leaves, std::size_t n, std::tuple<Firsts&...> first,
                        std::tuple<Outs...> outs, gradients_t<T, In...>& grads, const E& e, Cot cotangent,
                        const In&... in) {
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

namespace detail {
// eval with a chosen policy: simd_policy (the library) or reference_policy (the tests' oracle).
template <class Policy, class E, class... In>
auto eval_with(const E& e, const In&... in) {
  using T = compute_type_t<In...>;
  binding<T, In...> b("eval", sizeof...(In), in...);
  if constexpr (is_scalar<E>) {
    T value = 0;
    run_program_into<Policy, T>(b.leaves, b.n, std::tie(value), as_scalar<E>{e});
    return value;
  } else {
    auto value = new_array<T>(b.shape);
    run_program_into<Policy, T>(b.leaves, b.n, std::tie(value), as_array<E>{e});
    return value;
  }
}

// Elementwise e evaluated into `out`, which the caller has shaped (the eager kernels build their
// result Tensor in place this way): inputs of out's shape are read where they are, others
// broadcast. Throws ShapeMismatch when the inputs' broadcast shape is not out's.
template <class T, class E, class... In>
void eval_into(column_major_array<T>& out, const E& e, const In&... in) {
  static_assert(!is_scalar<E>, "eval_into writes an elementwise expression");
  if ((fits_in_place<T>(in, out.shape()) && ...)) {
    const std::tuple<leaf_t<T, In>...> leaves{leaf_in_place<T>(in)...};
    run_program_into<simd_policy, T>(leaves, out.size(), std::tie(out), as_array<E>{e});
    return;
  }
  binding<T, In...> b("eval_into", sizeof...(In), in...);
  if (!has_shape(out, b.shape)) {
    throw_error(ErrorKind::ShapeMismatch, "eval_into",
                {"the inputs broadcast to shape ", b.shape, " but the output has shape ", shape_of(out)});
  }
  run_program_into<simd_policy, T>(b.leaves, b.n, std::tie(out), as_array<E>{e});
}

template <class T, std::size_t>
using array_leaf_for = array_leaf<T>;

// Several elementwise expressions of the same inputs in one loop over a block, expression k
// written to out[k]; what they share is computed once (sin and cos of one argument: one sincos).
// Each output holds what eval_block would write for its expression alone. Bit k of `broadcast`:
// input k is one element, in[k][0], read for every element.
template <class T, std::size_t N, class... E>
void eval_blocks(const std::array<T*, sizeof...(E)>& out, const std::array<const T*, N>& in, std::size_t n,
                 std::uint32_t broadcast, const E&... e) {
  static_assert(((!is_scalar<E> && level<E> == 0) && ...),
                "eval_blocks writes elementwise expressions without reductions");
  std::array<std::array<T, max_batch_elements>, N> batches;  // of the inputs that broadcast
  auto leaf = [&](std::size_t k) {
    if (((broadcast >> k) & 1u) == 0) return array_leaf<T>{in[k]};
    batches[k].fill(in[k][0]);
    return array_leaf<T>{batches[k].data(), 0};
  };
  const auto leaves = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return std::tuple<array_leaf_for<T, K>...>{leaf(K)...};
  }
  (std::make_index_sequence<N>{});
  const auto stores = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return std::tuple<store_task<0, E, T>...>{{&e, out[K]}...};
  }
  (std::index_sequence_for<E...>{});
  T results[1];
  run_pass<T>(simd_policy{}, std::tuple<>{}, stores, leaves, n, results);
}

// Elementwise e over n contiguous elements of every input, written to out, on the calling thread
// for n <= chunk_elements: the block kernel of the eager runtime's deferred fusion. The same loop
// as eval_into over arrays of n elements.
template <class T, class E, std::size_t N>
void eval_block(T* out, const E& e, const std::array<const T*, N>& in, std::size_t n,
                std::uint32_t broadcast = 0) {
  eval_blocks<T>(std::array<T*, 1>{out}, in, n, broadcast, e);
}

// The sum of n contiguous elements, on the calling thread for n <= chunk_elements: for a block of
// exactly one chunk of a larger array, the same partial sum that array's sum computes for it.
template <class T>
T sum_block(const T* in, std::size_t n) {
  using S = reduction<ops::sum, arg<0>>;
  const std::tuple<array_leaf<T>> leaves{array_leaf<T>{in}};
  T total = 0;
  run_program_into<simd_policy, T>(leaves, n, std::tie(total), as_scalar<S>{S(arg<0>{})});
  return total;
}

// The cotangent of every input of an elementwise e, written into `grads` (one array per input,
// shaped by the caller): the eager kernels' path when the inputs, the cotangent and the gradients
// all have one shape and the compute type. Throws ShapeMismatch otherwise.
template <class T, class E, class C, class... In>
void vjp_into(std::span<column_major_array<T>* const, sizeof...(In)> grads, const E& e, const C& cotangent,
              const In&... in) {
  static_assert(!is_scalar<E> && ArrayInput<C> && (ArrayInput<In> && ...), "vjp_into: arrays only");
  const auto& shape = grads[0]->shape();
  const bool fits = fits_in_place<T>(cotangent, shape) && (fits_in_place<T>(in, shape) && ...) &&
                    std::all_of(grads.begin(), grads.end(),
                                [&](const auto* g) { return std::ranges::equal(g->shape(), shape); });
  if (!fits) {
    throw_error(ErrorKind::ShapeMismatch, "vjp_into",
                {"the inputs, the cotangent and the gradients must all have shape ", shape_of(*grads[0])});
  }
  constexpr std::size_t N = sizeof...(In);
  const std::tuple<leaf_t<T, In>..., leaf_t<T, C>> leaves{leaf_in_place<T>(in)...,
                                                          leaf_in_place<T>(cotangent)};
  std::apply(
      [&](const auto&... outs) {
        [&]<std::size_t... K>(std::index_sequence<K...>) {
          run_program_into<simd_policy, T>(leaves, grads[0]->size(), std::tie(*grads[K]...), outs...);
        }
        (std::make_index_sequence<N>{});
      },
      gradient_outputs(e, std::index_sequence_for<In...>{}, arg<N>{}, in...));
}
}  // namespace detail

// The value of e: a T for a scalar expression (a reduction or an expression of reductions), else
// a column-major array of the broadcast shape of the inputs.
template <Expression E, class... In>
auto eval(const E& e, const In&... in) {
  detail::check_inputs<In...>();
  static_assert(sizeof...(In) >= arity<E>,
                "eval: the expression uses more placeholders than inputs were given");
  return detail::eval_with<detail::simd_policy>(e, in...);
}

// Passes over the data that value_and_grad makes for expression type E with N inputs: the chosen
// evaluation plan is observable at compile time (sum(square(x)) and the normal log-pdf: 1;
// log_sum_exp: 3 — max, sum, gradient).
template <class E, std::size_t N>
inline constexpr std::size_t value_and_grad_passes = []<std::size_t... K>(std::index_sequence<K...>) {
  return std::max(
      {level<E>,
       detail::output_info<
           detail::as_array<decltype(detail::vjp_expr<K>(std::declval<const E&>(), one{}))>>::pass...});
}
(std::make_index_sequence<N>{});

// The value of a scalar e and its gradient w.r.t. every input, in one fused pass (plus one per
// reduction level): an array for an array input, a scalar (the summed adjoint) for a scalar one.
template <Expression E, class... In>
auto value_and_grad(const E& e, const In&... in) {
  detail::check_inputs<In...>();
  static_assert(sizeof...(In) >= arity<E>,
                "value_and_grad: the expression uses more placeholders than inputs were given");
  static_assert(
      is_scalar<E>,
      "value_and_grad: the expression must be a scalar: reduce it with sum, mean, dot or log_sum_exp");
  using T = detail::compute_type_t<In...>;
  detail::binding<T, In...> b("value_and_grad", sizeof...(In), in...);
  // The value and the gradients are written where they are returned (a broadcast input's gradient
  // is then replaced by its sum back to the input's shape).
  value_and_grad_result<T, detail::gradients_t<T, In...>> result{
      T(0), detail::gradients_t<T, In...>(detail::gradient_init<T>(b.shape, in)...)};
  detail::run_with_gradients<T>(b.leaves, b.n, std::tie(result.value),
                                std::make_tuple(detail::as_scalar<E>{e}), result.grad, e, one{}, in...);
  return result;
}

// The gradients alone (a tuple, one per input).
template <Expression E, class... In>
auto grad(const E& e, const In&... in) {
  return value_and_grad(e, in...).grad;
}

// Vector-Jacobian product of an elementwise e: the cotangent of every input, given the
// cotangent of the output (an array of the output's shape, or a scalar meaning that value
// everywhere).
template <Expression E, class C, class... In>
auto vjp(const E& e, const C& cotangent, const In&... in) {
  detail::check_inputs<C, In...>();
  static_assert(sizeof...(In) >= arity<E>,
                "vjp: the expression uses more placeholders than inputs were given");
  static_assert(!is_scalar<E>, "vjp: the expression is a scalar: use grad (and scale by the cotangent)");
  using T = detail::compute_type_t<In..., C>;
  constexpr std::size_t N = sizeof...(In);
  if constexpr (ArrayInput<C>) {
    const Shape out = detail::broadcast_shape("vjp", N, in...);
    const Shape cs = detail::shape_of(detail::container_of(cotangent));
    if (cs != out) {
      throw_error(ErrorKind::ShapeMismatch, "vjp",
                  {"argument 'cotangent' has shape ", cs, " but the output has shape ", out});
    }
  }
  detail::binding<T, In..., C> b("vjp", N, in..., cotangent);
  detail::gradients_t<T, In...> grads(detail::gradient_init<T>(b.shape, in)...);
  detail::run_with_gradients<T>(b.leaves, b.n, std::tie(), std::tuple<>(), grads, e, arg<N>{}, in...);
  return grads;
}

// Jacobian-vector product: the value of e and its tangent when input k moves along tangent k
// (same shape as input k; a scalar for a scalar input), in one pass.
template <Expression E, class... In, class... Tn>
auto jvp(const E& e, const std::tuple<In...>& inputs, const std::tuple<Tn...>& tangents) {
  static_assert(sizeof...(In) == sizeof...(Tn), "jvp: give one tangent per input");
  detail::check_inputs<std::remove_cvref_t<In>..., std::remove_cvref_t<Tn>...>();
  static_assert(sizeof...(In) >= arity<E>,
                "jvp: the expression uses more placeholders than inputs were given");
  constexpr std::size_t N = sizeof...(In);
  using T = detail::compute_type_t<std::remove_cvref_t<In>..., std::remove_cvref_t<Tn>...>;
  // Each tangent has its input's shape (scalars for scalars).
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto check = [&](std::size_t k, const auto& input, const auto& tangent) {
      using I = std::remove_cvref_t<decltype(input)>;
      using D = std::remove_cvref_t<decltype(tangent)>;
      if constexpr (ArrayInput<I> != ArrayInput<D>) {
        throw_error(ErrorKind::ShapeMismatch, "jvp",
                    {"argument 'tangents' ", k, ArrayInput<I> ? " is a scalar" : " is an array",
                     " but input ", k, ArrayInput<I> ? " is an array" : " is a scalar"});
      } else if constexpr (ArrayInput<I>) {
        const Shape si = detail::shape_of(detail::container_of(input));
        const Shape st = detail::shape_of(detail::container_of(tangent));
        if (si != st) {
          throw_error(ErrorKind::ShapeMismatch, "jvp",
                      {"argument 'tangents' ", k, " has shape ", st, " but input ", k, " has shape ", si});
        }
      }
    };
    (check(K, std::get<K>(inputs), std::get<K>(tangents)), ...);
  }
  (std::make_index_sequence<N>{});

  auto run = [&](const auto&... all) {
    detail::binding<T, std::remove_cvref_t<decltype(all)>...> b("jvp", N, all...);
    auto tangent = detail::tangent_expr<N>(e);
    using Tan = decltype(tangent);
    if constexpr (is_scalar<E>) {
      jvp_result<T> r{0, 0};
      detail::run_program_into<detail::simd_policy, T>(b.leaves, b.n, std::tie(r.value, r.tangent),
                                                       detail::as_scalar<E>{e},
                                                       detail::as_scalar<Tan>{tangent});
      return r;
    } else {
      jvp_result<column_major_array<T>> r{detail::new_array<T>(b.shape), detail::new_array<T>(b.shape)};
      detail::run_program_into<detail::simd_policy, T>(b.leaves, b.n, std::tie(r.value, r.tangent),
                                                       detail::as_array<E>{e},
                                                       detail::as_array<Tan>{tangent});
      return r;
    }
  };
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    return run(std::get<K>(inputs)..., std::get<K>(tangents)...);
  }
  (std::make_index_sequence<N>{});
}

}  // namespace tenferro::expr
