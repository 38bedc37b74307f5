// The _into entry points: eval_into, value_and_grad_into, vjp_into, jvp_into. They compute what
// eval, value_and_grad, vjp and jvp compute, in the same pass, into outputs the caller owns:
// numbers (T&) and column-major arrays of T (xtensor containers, xt::adapt views of the caller's
// memory, TypedTensors). A call allocates nothing for its outputs; the one exception is the
// gradient of an array input broadcast to a larger shape, which is computed at the evaluation's
// shape and summed back into the caller's array (an allocation of the evaluation's size).
//
// Every output is checked before anything is written: its shape (ShapeMismatch), its layout
// (column-major contiguous, InvalidArgument) and that it does not overlap an input
// (InvalidArgument), each error naming the op, the output's position and the shapes.
#pragma once

#include <tenferro/expr/eval/api.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace tenferro::expr {

namespace detail {

// The bytes [first, last) an input's elements lie in (a view's strides may skip or run backwards).
template <class C>
std::pair<std::uintptr_t, std::uintptr_t> byte_range(const C& c) {
  using V = typename std::remove_cvref_t<decltype(c)>::value_type;
  std::ptrdiff_t low = 0, high = 0;
  for (std::size_t d = 0; d < c.dimension(); ++d) {
    if (c.shape()[d] == 0) return {0, 0};
    const std::ptrdiff_t reach = static_cast<std::ptrdiff_t>(c.shape()[d] - 1) * c.strides()[d];
    (reach < 0 ? low : high) += reach;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(c.data());
  return {base + low * static_cast<std::ptrdiff_t>(sizeof(V)), base + (high + 1) * sizeof(V)};
}

// Throws unless output k (elements at o) stays clear of every array input.
template <class T, class... In>
void check_clear_of_inputs(std::string_view op, std::size_t k, const out_span<T>& o, const In&... in) {
  const auto first = reinterpret_cast<std::uintptr_t>(o.data());
  const auto last = first + o.size() * sizeof(T);
  std::size_t j = 0;
  auto clear = [&](const auto& input) {
    if constexpr (ArrayInput<decltype(input)>) {
      const auto [a, b] = byte_range(container_of(input));
      if (a < last && first < b) {
        throw_error(
            ErrorKind::InvalidArgument, op,
            {"argument 'outputs' ", k, " overlaps input ", j, " (shape ", shape_of(container_of(input)),
             "): results are written while inputs are read, so give outputs their own memory"});
      }
    }
    ++j;
  };
  (clear(in), ...);
}

// The storage of array output k, checked to be an array of T of `shape` (the shape of input
// `input`, or with input == npos of the evaluation), in column-major order (a TypedTensor is made
// compact and unshared first), clear of the inputs.
template <class T, class O, class... In>
out_span<T> output_span(std::string_view op, std::size_t k, O& o, std::span<const std::size_t> shape,
                        std::size_t input, const In&... in) {
  static_assert(ArrayInput<O>,
                "an array result needs an array output: an xtensor container or adaptor, or a TypedTensor");
  static_assert(std::is_same_v<typename O::value_type, T>,
                "an output's element type must be the compute type of the inputs");
  if (!std::ranges::equal(container_of(o).shape(), shape)) {
    const Shape expected(shape.begin(), shape.end());
    throw_error(ErrorKind::ShapeMismatch, op,
                {"argument 'outputs' ", k, " has shape ", shape_of(container_of(o)), " but ",
                 input == std::size_t(-1) ? std::string("the inputs' broadcast shape is ")
                                          : "input " + std::to_string(input) + " has shape ",
                 expected});
  }
  out_span<T> span;
  if constexpr (TypedTensorInput<O>) {
    auto& a = o.mutable_array();
    span = {a.data(), a.size()};
  } else {
    if (!column_major_storage(o)) {
      throw_error(ErrorKind::InvalidArgument, op,
                  {"argument 'outputs' ", k, " (shape ", shape_of(o),
                   ") is not contiguous in column-major order: give a column-major container or adaptor"});
    }
    span = {o.data(), o.size()};
  }
  check_clear_of_inputs(op, k, span, in...);
  return span;
}

// Output k for a scalar result: a T.
template <class T, class O>
constexpr void check_scalar_output() {
  static_assert(std::is_same_v<O, T>, "a scalar result needs an output of the compute type (a T&)");
}

// Throws unless the array outputs are pairwise disjoint.
template <class T, std::size_t N>
void check_disjoint(std::string_view op, const std::array<out_span<T>, N>& outputs) {
  for (std::size_t i = 0; i < N; ++i) {
    for (std::size_t j = i + 1; j < N; ++j) {
      const T *a = outputs[i].data(), *b = outputs[j].data();
      if (a && b && std::less<>{}(a, b + outputs[j].size()) && std::less<>{}(b, a + outputs[i].size())) {
        throw_error(ErrorKind::InvalidArgument, op,
                    {"arguments 'outputs' ", i, " and ", j, " overlap: give each output its own memory"});
      }
    }
  }
}

// Where the gradient of each input goes, given the caller's outputs `grads` (the first at position
// `first_position` of the op's outputs): a T& for a scalar input; for an array input the caller's
// array, or, when the input is broadcast to the larger evaluation shape, a scratch array of that
// shape summed into the caller's after the pass (finish()).
template <class T, class... In>
struct gradient_sinks {
  // (declared first: make() fills them while sinks is constructed; a null pointer where the
  // gradient goes straight to the caller's output, so a call without broadcasting neither builds
  // nor destroys an array here)
  std::array<std::unique_ptr<column_major_array<T>>, sizeof...(In)> scratch;
  std::array<out_span<T>, sizeof...(In)> given{};  // the caller's outputs (a number: one element)
  std::tuple<std::conditional_t<ArrayInput<In>, out_span<T>, T&>...> sinks;

  template <class... G>
  gradient_sinks(std::string_view op, std::size_t first_position, std::span<const std::size_t> shape,
                 std::tuple<G&...> grads, const In&... in)
      : sinks(make(op, first_position, shape, grads, std::index_sequence_for<In...>{}, in...)) {
    check_disjoint(op, given);
  }

  template <class... G, std::size_t... K>
  auto make(std::string_view op, std::size_t first_position, std::span<const std::size_t> shape,
            std::tuple<G&...> grads, std::index_sequence<K...>, const In&... in) {
    const auto inputs = std::forward_as_tuple(in...);
    auto sink = [&]<std::size_t Kc>(std::integral_constant<std::size_t, Kc>) -> decltype(auto) {
      using I = std::tuple_element_t<Kc, std::tuple<In...>>;
      auto& g = std::get<Kc>(grads);
      if constexpr (ArrayInput<I>) {
        const auto& c = container_of(std::get<Kc>(inputs));
        const auto& s = c.shape();
        const std::span<const std::size_t> input_shape(s.data(), s.size());
        given[Kc] = output_span<T>(op, first_position + Kc, g, input_shape, Kc, in...);
        if (c.size() == 1 || std::ranges::equal(input_shape, shape)) return out_span<T>(given[Kc]);
        scratch[Kc] = std::make_unique<column_major_array<T>>(
            typename column_major_array<T>::shape_type(shape.begin(), shape.end()));
        return out_span<T>{scratch[Kc]->data(), scratch[Kc]->size()};
      } else {
        check_scalar_output<T, std::remove_cvref_t<decltype(g)>>();
        given[Kc] = {&g, 1};
        return static_cast<T&>(g);
      }
    };
    return std::tuple<std::conditional_t<ArrayInput<In>, out_span<T>, T&>...>(
        sink(std::integral_constant<std::size_t, K>{})...);
  }

  // Throws unless `other` (output `position`: the value, a cotangent read by the pass) stays clear
  // of every gradient output.
  void check_apart(std::string_view op, std::string_view what, const out_span<T>& other) const {
    for (std::size_t k = 0; k < given.size(); ++k) {
      const T *a = given[k].data(), *b = other.data();
      if (a && b && std::less<>{}(a, b + other.size()) && std::less<>{}(b, a + given[k].size())) {
        throw_error(ErrorKind::InvalidArgument, op,
                    {"argument 'outputs' ", k, " (the gradient of input ", k, ") overlaps ", what,
                     ": give each output its own memory"});
      }
    }
  }

  // Sums the scratch gradients back into the caller's arrays.
  void finish(const In&... in) {
    std::size_t k = 0;
    auto fit = [&](const auto& input) {
      if constexpr (ArrayInput<decltype(input)>) {
        if (scratch[k]) {
          const auto summed = reduce_to_shape<T>(*scratch[k], shape_of(container_of(input)));
          std::copy(summed.storage().begin(), summed.storage().end(), given[k].data());
        }
      }
      ++k;
    };
    (fit(in), ...);
  }
};

}  // namespace detail

// eval(e, in...) into `out`: a T& for a scalar e, else a column-major array of T of the inputs'
// broadcast shape.
template <Expression E, class O, class... In>
void eval_into(const E& e, O& out, const In&... in) {
  detail::check_inputs<In...>();
  static_assert(sizeof...(In) >= arity<E>,
                "eval_into: the expression uses more placeholders than inputs were given");
  using T = detail::compute_type_t<In...>;
  constexpr std::string_view op = "eval_into";
  detail::check_compute_type<T>(op, e);
  detail::with_leaves<T>(
      op, sizeof...(In),
      [&](const auto& leaves, std::size_t n, std::span<const std::size_t> shape) {
        if constexpr (is_scalar<E>) {
          detail::check_scalar_output<T, O>();
          detail::run_program_into<detail::simd_policy, T>(leaves, n, std::tie(out), detail::as_scalar<E>{e});
        } else {
          auto span = detail::output_span<T>(op, 0, out, shape, std::size_t(-1), in...);
          detail::run_program_into<detail::simd_policy, T>(leaves, n, std::tie(span), detail::as_array<E>{e});
        }
      },
      in...);
}

// value_and_grad(e, in...) into std::tie(value, gradient_0, gradient_1, ...): the value a T&, the
// gradient of an array input an array of T of that input's shape, of a scalar input a T&.
template <Expression E, class V, class... G, class... In>
void value_and_grad_into(const E& e, std::tuple<V&, G&...> outputs, const In&... in) {
  detail::check_inputs<In...>();
  static_assert(sizeof...(In) >= arity<E>,
                "value_and_grad_into: the expression uses more placeholders than inputs were given");
  static_assert(
      sizeof...(G) == sizeof...(In),
      "value_and_grad_into: give the value and one gradient per input: std::tie(value, g0, g1, ...)");
  static_assert(is_scalar<E>,
                "value_and_grad_into: the expression must be a scalar: reduce it with sum, "
                "mean, dot or log_sum_exp");
  using T = detail::compute_type_t<In...>;
  static_assert(Real<T> || Complex<T>, "value_and_grad_into: derivatives need a floating compute type");
  static_assert(!Complex<T> || complex_differentiable<E>,
                "value_and_grad_into: a derivative rule of this expression has no complex form");
  detail::check_scalar_output<T, V>();
  constexpr std::string_view op = "value_and_grad_into";
  auto grads = std::apply([](auto&, auto&... g) { return std::tie(g...); }, outputs);
  detail::with_leaves<T>(
      op, sizeof...(In),
      [&](const auto& leaves, std::size_t n, std::span<const std::size_t> shape) {
        detail::gradient_sinks<T, In...> sinks(op, 1, shape, grads, in...);
        sinks.check_apart(op, "argument 'outputs' 0 (the value)", {&std::get<0>(outputs), 1});
        detail::run_gradient_pass<T>(leaves, n, std::tie(std::get<0>(outputs)),
                                     std::make_tuple(detail::as_scalar<E>{e}), sinks.sinks, e, one{}, in...);
        sinks.finish(in...);
      },
      in...);
}

// vjp(e, cotangent, in...) into std::tie(gradient_0, gradient_1, ...), shaped as
// value_and_grad_into's gradients.
template <Expression E, class C, class... G, class... In>
void vjp_into(const E& e, const C& cotangent, std::tuple<G&...> outputs, const In&... in) {
  detail::check_inputs<C, In...>();
  static_assert(sizeof...(In) >= arity<E>,
                "vjp_into: the expression uses more placeholders than inputs were given");
  static_assert(sizeof...(G) == sizeof...(In), "vjp_into: give one output per input: std::tie(g0, g1, ...)");
  static_assert(!is_scalar<E>, "vjp_into: the expression is a scalar: use value_and_grad_into");
  using T = detail::compute_type_t<In..., C>;
  static_assert(Real<T> || Complex<T>, "vjp_into: derivatives need a floating compute type");
  static_assert(!Complex<T> || complex_differentiable<E>,
                "vjp_into: a derivative rule of this expression has no complex form");
  constexpr std::string_view op = "vjp_into";
  constexpr std::size_t N = sizeof...(In);
  if constexpr (ArrayInput<C>) {  // (inputs read in place have the cotangent's shape)
    if (!detail::bind_in_place<T>(N, in..., cotangent)) detail::check_cotangent_shape(op, N, cotangent, in...);
  }
  detail::with_leaves<T>(
      op, N,
      [&](const auto& leaves, std::size_t n, std::span<const std::size_t> shape) {
        detail::gradient_sinks<T, In...> sinks(op, 0, shape, outputs, in...);
        if constexpr (ArrayInput<C>) {
          const auto [first, last] = detail::byte_range(detail::container_of(cotangent));
          sinks.check_apart(op, "the cotangent",
                            {reinterpret_cast<T*>(first), first == last ? 0 : (last - first) / sizeof(T)});
        }
        detail::run_gradient_pass<T>(leaves, n, std::tie(), std::tuple<>(), sinks.sinks, e, arg<N>{}, in...);
        sinks.finish(in...);
      },
      in..., cotangent);
}

// jvp(e, inputs, tangents) into std::tie(value, tangent): T& for a scalar e, else arrays of T of
// the inputs' broadcast shape.
template <Expression E, class V, class Tv, class... In, class... Tn>
void jvp_into(const E& e, std::tuple<V&, Tv&> outputs, const std::tuple<In...>& inputs,
              const std::tuple<Tn...>& tangents) {
  static_assert(sizeof...(In) == sizeof...(Tn), "jvp_into: give one tangent per input");
  detail::check_inputs<std::remove_cvref_t<In>..., std::remove_cvref_t<Tn>...>();
  static_assert(sizeof...(In) >= arity<E>,
                "jvp_into: the expression uses more placeholders than inputs were given");
  constexpr std::size_t N = sizeof...(In);
  using T = detail::compute_type_t<std::remove_cvref_t<In>..., std::remove_cvref_t<Tn>...>;
  static_assert(Real<T> || Complex<T>, "jvp_into: derivatives need a floating compute type");
  static_assert(!Complex<T> || complex_differentiable<E>,
                "jvp_into: a derivative rule of this expression has no complex form");
  constexpr std::string_view op = "jvp_into";
  detail::check_tangents(op, inputs, tangents);
  const auto tangent = detail::tangent_expr<N>(e);
  using Tan = std::remove_const_t<decltype(tangent)>;
  V& value = std::get<0>(outputs);
  Tv& tan = std::get<1>(outputs);
  auto run = [&](const auto&... all) {
    detail::with_leaves<T>(
        op, N,
        [&](const auto& leaves, std::size_t n, std::span<const std::size_t> shape) {
          if constexpr (is_scalar<E>) {
            detail::check_scalar_output<T, V>();
            detail::check_scalar_output<T, Tv>();
            if (static_cast<const void*>(&value) == static_cast<const void*>(&tan)) {
              throw_error(ErrorKind::InvalidArgument, op,
                          {"arguments 'outputs' 0 and 1 are the same number"});
            }
            detail::run_program_into<detail::simd_policy, T>(
                leaves, n, std::tie(value, tan), detail::as_scalar<E>{e}, detail::as_scalar<Tan>{tangent});
          } else {
            const std::array<detail::out_span<T>, 2> out{
                detail::output_span<T>(op, 0, value, shape, std::size_t(-1), all...),
                detail::output_span<T>(op, 1, tan, shape, std::size_t(-1), all...)};
            detail::check_disjoint(op, out);
            detail::run_program_into<detail::simd_policy, T>(
                leaves, n, std::tie(out[0], out[1]), detail::as_array<E>{e}, detail::as_array<Tan>{tangent});
          }
        },
        all...);
  };
  [&]<std::size_t... K>(std::index_sequence<K...>) { run(std::get<K>(inputs)..., std::get<K>(tangents)...); }
  (std::make_index_sequence<N>{});
}

}  // namespace tenferro::expr
