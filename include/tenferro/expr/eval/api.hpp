// The entry points: eval, value_and_grad, grad, vjp, jvp.
//
// Inputs bind positionally to arg<0>, arg<1>, ...; more inputs than the expression uses are
// allowed (their gradients are 0). Same-shape column-major inputs of the compute type, and
// scalars, are read in place by the fused SIMD loop, and an array of one element from a register;
// other shapes broadcast NumPy-style (and other layouts or element types are converted) through a
// copy, and gradients of broadcast inputs are summed back to the input's shape (binding.hpp).
#pragma once

#include <tenferro/expr/eval/binding.hpp>
#include <tenferro/expr/eval/blocks.hpp>

#include <algorithm>
#include <tuple>
#include <utility>

namespace tenferro::expr {

// True when E and the derivatives of E (with respect to each of its placeholders) have complex
// forms: value_and_grad, vjp and jvp then take complex inputs and give the plain (holomorphic)
// derivative, sum_i c_i f_i'(z) without conjugation (the eager runtime applies PyTorch's
// convention on top of it).
template <class E>
inline constexpr bool complex_differentiable =
    has_complex_form<E>&&[]<std::size_t... K>(std::index_sequence<K...>) {
  return (has_complex_form<decltype(detail::vjp_expr<K>(std::declval<const E&>(), one{}))> && ...);
}
(std::make_index_sequence<arity<E>>{});

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

// eval with a chosen policy: simd_policy (the library) or reference_policy (the tests' oracle).
template <class Policy, class E, class... In>
auto eval_with(const E& e, const In&... in) {
  using T = compute_type_t<In...>;
  check_compute_type<T>("eval", e);
  return with_leaves<T>(
      "eval", sizeof...(In),
      [&](const auto& leaves, std::size_t n, std::span<const std::size_t> shape) {
        if constexpr (is_scalar<E>) {
          T value = 0;
          run_program_into<Policy, T>(leaves, n, std::tie(value), as_scalar<E>{e});
          return value;
        } else {
          auto value = new_array<T>(shape);
          run_program_into<Policy, T>(leaves, n, std::tie(value), as_array<E>{e});
          return value;
        }
      },
      in...);
}

// Each tangent of a jvp has its input's shape (a scalar for a scalar).
template <class... In, class... Tn>
void check_tangents(std::string_view op, const std::tuple<In...>& inputs, const std::tuple<Tn...>& tangents) {
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto check = [&](std::size_t k, const auto& input, const auto& tangent) {
      using I = std::remove_cvref_t<decltype(input)>;
      using D = std::remove_cvref_t<decltype(tangent)>;
      if constexpr (ArrayInput<I> != ArrayInput<D>) {
        throw_error(ErrorKind::ShapeMismatch, op,
                    {"argument 'tangents' ", k, ArrayInput<I> ? " is a scalar" : " is an array",
                     " but input ", k, ArrayInput<I> ? " is an array" : " is a scalar"});
      } else if constexpr (ArrayInput<I>) {
        const std::span<const std::size_t> si = shape_view(container_of(input));
        const std::span<const std::size_t> st = shape_view(container_of(tangent));
        if (!std::ranges::equal(si, st)) {
          throw_error(ErrorKind::ShapeMismatch, op,
                      {"argument 'tangents' ", k, " has shape ", st, " but input ", k, " has shape ", si});
        }
      }
    };
    (check(K, std::get<K>(inputs), std::get<K>(tangents)), ...);
  }
  (std::index_sequence_for<In...>{});
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
// log_sum_exp: 2 — max; sum, storing the gradient's exp(x - m), which is then scaled in place).
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
  static_assert(
      Real<T> || Complex<T>,
      "value_and_grad: derivatives need a floating compute type: convert integer inputs to float or double");
  static_assert(!Complex<T> || complex_differentiable<E>,
                "value_and_grad: a derivative rule of this expression has no complex form");
  // The value and the gradients are written where they are returned (a broadcast input's gradient
  // is then replaced by its sum back to the input's shape).
  return detail::with_leaves<T>(
      "value_and_grad", sizeof...(In),
      [&](const auto& leaves, std::size_t n, std::span<const std::size_t> shape) {
        value_and_grad_result<T, detail::gradients_t<T, In...>> result{
            T(0), detail::gradients_t<T, In...>(detail::gradient_init<T>(shape, in)...)};
        detail::run_with_gradients<T>(leaves, n, std::tie(result.value), std::make_tuple(detail::as_scalar<E>{e}),
                                      result.grad, e, one{}, in...);
        return result;
      },
      in...);
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
  static_assert(Real<T> || Complex<T>,
                "vjp: derivatives need a floating compute type: convert integer inputs to float or double");
  static_assert(!Complex<T> || complex_differentiable<E>,
                "vjp: a derivative rule of this expression has no complex form");
  constexpr std::size_t N = sizeof...(In);
  if constexpr (ArrayInput<C>) detail::check_cotangent_shape("vjp", N, cotangent, in...);
  return detail::with_leaves<T>(
      "vjp", N,
      [&](const auto& leaves, std::size_t n, std::span<const std::size_t> shape) {
        detail::gradients_t<T, In...> grads(detail::gradient_init<T>(shape, in)...);
        detail::run_with_gradients<T>(leaves, n, std::tie(), std::tuple<>(), grads, e, arg<N>{}, in...);
        return grads;
      },
      in..., cotangent);
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
  static_assert(Real<T> || Complex<T>,
                "jvp: derivatives need a floating compute type: convert integer inputs to float or double");
  static_assert(!Complex<T> || complex_differentiable<E>,
                "jvp: a derivative rule of this expression has no complex form");
  detail::check_tangents("jvp", inputs, tangents);

  auto run = [&](const auto&... all) {
    return detail::with_leaves<T>(
        "jvp", N,
        [&](const auto& leaves, std::size_t n, std::span<const std::size_t> shape) {
          auto tangent = detail::tangent_expr<N>(e);
          using Tan = decltype(tangent);
          if constexpr (is_scalar<E>) {
            jvp_result<T> r{0, 0};
            detail::run_program_into<detail::simd_policy, T>(leaves, n, std::tie(r.value, r.tangent),
                                                             detail::as_scalar<E>{e},
                                                             detail::as_scalar<Tan>{tangent});
            return r;
          } else {
            jvp_result<column_major_array<T>> r{detail::new_array<T>(shape), detail::new_array<T>(shape)};
            detail::run_program_into<detail::simd_policy, T>(leaves, n, std::tie(r.value, r.tangent),
                                                             detail::as_array<E>{e},
                                                             detail::as_array<Tan>{tangent});
            return r;
          }
        },
        all...);
  };
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    return run(std::get<K>(inputs)..., std::get<K>(tangents)...);
  }
  (std::make_index_sequence<N>{});
}

}  // namespace tenferro::expr
