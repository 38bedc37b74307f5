// Running a set of outputs over bound inputs: the staged, fused evaluation.
//
// Every reduction of level p (see nodes.hpp) across all outputs is computed in pass p, and every
// elementwise output whose own reductions are of level < p is written in that same pass: one
// loop over the data per reduction level, nothing of size n allocated but the outputs. So the
// value sum(f) and the gradient fields of every input come out of ONE loop when the gradients do
// not themselves need the value's reductions (sum(square(x)), the normal log-pdf); log(sum(exp))
// needs its sum first, and takes one more.
// How one pass runs is in pass.hpp.
#pragma once

#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/expr/eval/pass.hpp>

#include <algorithm>
#include <array>
#include <span>
#include <tuple>

namespace tenferro::expr::detail {

// What an output is: an elementwise array (filled with its value when the expression is scalar)
// or one scalar.
template <class E>
struct as_array {
  E expr;
};
template <class E>
struct as_scalar {
  E expr;
  static_assert(is_scalar<E>, "a scalar output needs a scalar expression");
};

// An elementwise output A * S, S * A or A / S whose scale S is a scalar (an expression of
// reductions) of a later pass than everything A needs, and whose A costs a transcendental function
// (tree_cost 8 or more): A is stored in the pass that computes S's reductions and scaled in place
// afterwards (a pass over the output alone), rather than computed again from the inputs one pass
// later. The memory traffic is the same (the output is written once more and read once, an input
// read once less when A reads one); the second evaluation of A is saved. The gradient of
// log_sum_exp, exp(x - m) * (1 / sum(exp(x - m))), takes two passes over x this way.
template <class E>
struct scaled_output {
  static constexpr bool value = false;
  static constexpr std::size_t stored_pass = 0;
};
template <class Op, class L, class R>
requires(std::is_same_v<Op, ops::mul> ||
         std::is_same_v<Op, ops::div>) struct scaled_output<binary<Op, L, R>> {
  static constexpr bool scale_right = is_scalar<R> && !is_scalar<L>;
  static constexpr bool scale_left = std::is_same_v<Op, ops::mul> && is_scalar<L> && !is_scalar<R>;
  using stored_type = std::conditional_t<scale_right, L, R>;
  using scale_type = std::conditional_t<scale_right, R, L>;
  static constexpr bool value =
      (scale_right || scale_left) && level<stored_type> < level<scale_type> && tree_cost<stored_type> >= 8;
  static constexpr bool divides = std::is_same_v<Op, ops::div>;
  static constexpr std::size_t stored_pass = level<stored_type> + 1;  // the pass that stores A
  // The numbers of the first reductions of the stored part and of the scale, from the output's.
  static constexpr std::size_t stored_base = scale_right ? 0 : reduction_count<L>;
  static constexpr std::size_t scale_base = scale_right ? reduction_count<L> : 0;
  static const stored_type& stored(const binary<Op, L, R>& e) {
    if constexpr (scale_right) {
      return e.lhs;
    } else {
      return e.rhs;
    }
  }
  static const scale_type& scale(const binary<Op, L, R>& e) {
    if constexpr (scale_right) {
      return e.rhs;
    } else {
      return e.lhs;
    }
  }
};

template <class O>
struct output_info;
template <class E>
struct output_info<as_array<E>> {
  using expr_type = E;
  static constexpr bool streamed = !is_scalar<E>;  // written by a pass, not filled afterwards
  static constexpr bool scaled = scaled_output<E>::value;
  static constexpr std::size_t pass = !streamed ? level<E>
                                      : scaled  ? scaled_output<E>::stored_pass
                                                : level<E> + 1;
};
template <class E>
struct output_info<as_scalar<E>> {
  using expr_type = E;
  static constexpr bool streamed = false;
  static constexpr bool scaled = false;
  static constexpr std::size_t pass = level<E>;
};

template <class T, class O>
using output_value_t = std::conditional_t<std::is_same_v<O, as_scalar<typename output_info<O>::expr_type>>, T,
                                          column_major_array<T>>;

// True when array output `a` of a pass over n elements is the sum of its expression over the pass
// (one element where the pass has another number): the gradient of a broadcast one-element input.
template <class A>
bool sums(const A& a, std::size_t n) {
  return a.size() == 1 && n != 1;
}

// Column-major storage the caller owns, as an array output of run_program_into (the _into entry
// points, into.hpp).
template <class T>
struct out_span {
  T* pointer = nullptr;
  std::size_t count = 0;
  T* data() const noexcept { return pointer; }
  std::size_t size() const noexcept { return count; }
  std::span<T> storage() const noexcept { return {pointer, count}; }
};

// out[i] = out[i] * s (or / s) for i in [0, count), split over the current task arena's threads
// when it is large: the second stage of a scaled output.
template <bool Divides, class T>
void scale_in_place(T* out, std::size_t count, T s) {
  auto body = [=](std::size_t begin, std::size_t end) {
    std::size_t i = begin;
    if constexpr (Real<T>) {
      using B = xsimd::batch<T>;
      const B bs(s);
      for (; i + B::size <= end; i += B::size) {
        const B v = B::load_unaligned(out + i);
        (Divides ? v / bs : v * bs).store_unaligned(out + i);
      }
    }
    for (; i < end; ++i) out[i] = Divides ? out[i] / s : out[i] * s;
  };
  constexpr std::size_t grain = std::size_t(1) << 16;
  if (count < 2 * grain) {
    body(0, count);
  } else {
    tenferro::detail::parallel_ranges(count, grain, tenferro::detail::split::adaptive, body);
  }
}

// Evaluates every output over the leaves (n elements) into `values`: a T for as_scalar, a
// column-major array (already shaped by the caller) or an out_span for as_array: of n elements, or
// of one element holding the sum over the n (sums()).
template <class Policy, class T, class Leaves, class... Values, class... Outs>
void run_program_into(const Leaves& leaves, std::size_t n, std::tuple<Values&...> values,
                      const Outs&... outs) {
  static_assert(sizeof...(Values) == sizeof...(Outs), "one value per output");
  constexpr std::size_t reductions = (reduction_count<typename output_info<Outs>::expr_type> + ... + 0);
  constexpr std::array<std::size_t, sizeof...(Outs)> bases = [] {
    std::array<std::size_t, sizeof...(Outs)> b{};
    std::size_t next = 0, k = 0;
    ((b[k++] = next, next += reduction_count<typename output_info<Outs>::expr_type>), ...);
    return b;
  }();
  constexpr std::size_t passes = std::max({std::size_t(0), output_info<Outs>::pass...});

  std::array<T, reductions + 1> results{};

  const auto outputs = std::forward_as_tuple(outs...);
  [&]<std::size_t... P>(std::index_sequence<P...>) {
    auto run_level = [&]<std::size_t Pass>(std::integral_constant<std::size_t, Pass>) {
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        auto reds = std::tuple_cat(collect_reductions<Pass, bases[K]>(std::get<K>(outputs).expr)...);
        auto store_of = [&]<std::size_t Kc>(std::integral_constant<std::size_t, Kc>) {
          using O = std::remove_cvref_t<std::tuple_element_t<Kc, std::tuple<Outs...>>>;
          using E = typename output_info<O>::expr_type;
          if constexpr (output_info<O>::scaled && output_info<O>::pass == Pass) {
            using S = scaled_output<E>;
            auto& a = std::get<Kc>(values);
            return std::tuple<store_task<bases[Kc] + S::stored_base, typename S::stored_type, T>>{
                {&S::stored(std::get<Kc>(outputs).expr), a.data(), sums(a, n)}};
          } else if constexpr (output_info<O>::streamed && output_info<O>::pass == Pass) {
            auto& a = std::get<Kc>(values);
            return std::tuple<store_task<bases[Kc], E, T>>{
                {&std::get<Kc>(outputs).expr, a.data(), sums(a, n)}};
          } else {
            return std::tuple<>{};
          }
        };
        auto stores = std::tuple_cat(store_of(std::integral_constant<std::size_t, K>{})...);
        run_pass<T>(Policy{}, reds, stores, leaves, n, results.data());
      }
      (std::index_sequence_for<Outs...>{});
    };
    (void)run_level;
    (run_level(std::integral_constant<std::size_t, P + 1>{}), ...);
  }
  (std::make_index_sequence<passes>{});

  // Scalar outputs, and array outputs whose expression is one value (e.g. a gradient of 1).
  const element_context<T, Leaves> ctx{leaves, results.data(), static_cast<T>(n), 0};
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto finish = [&]<std::size_t Kc>(std::integral_constant<std::size_t, Kc>) {
      using O = std::remove_cvref_t<std::tuple_element_t<Kc, std::tuple<Outs...>>>;
      using E = typename output_info<O>::expr_type;
      if constexpr (std::is_same_v<O, as_scalar<E>>) {
        std::get<Kc>(values) = eval_element<bases[Kc], T>(std::get<Kc>(outputs).expr, ctx);
      } else if constexpr (output_info<O>::scaled) {
        using S = scaled_output<E>;
        auto& a = std::get<Kc>(values);
        scale_in_place<S::divides>(
            a.data(), a.size(),
            eval_element<bases[Kc] + S::scale_base, T>(S::scale(std::get<Kc>(outputs).expr), ctx));
      } else if constexpr (!output_info<O>::streamed) {
        auto& a = std::get<Kc>(values);
        const T v = eval_element<bases[Kc], T>(std::get<Kc>(outputs).expr, ctx);
        // A sum over n equal values (none: 0).
        std::fill(a.storage().begin(), a.storage().end(),
                  !sums(a, n) ? v
                  : n == 0    ? T(0)
                              : v * static_cast<T>(n));
      }
    };
    (finish(std::integral_constant<std::size_t, K>{}), ...);
  }
  (std::index_sequence_for<Outs...>{});
}

}  // namespace tenferro::expr::detail
