// The compile-time layer's entry points for the eager runtime's kernels: results written into
// arrays the caller shaped (eval_into, vjp_into), and elementwise blocks of a deferred pass
// (eval_block, eval_blocks, sum_block), on the calling thread.
#pragma once

#include <tenferro/core/dtype.hpp>
#include <tenferro/expr/constants.hpp>
#include <tenferro/expr/eval/binding.hpp>
#include <tenferro/expr/ops/forms.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <span>
#include <tuple>
#include <utility>

namespace tenferro::expr::detail {

[[noreturn, gnu::cold]] TENFERRO_NOINLINE inline void throw_not_whole(std::string_view op, double c,
                                                                      DType dtype) {
  char digits[32];
  const auto end = std::to_chars(digits, digits + sizeof digits, c).ptr;
  throw_error(ErrorKind::InvalidArgument, op,
              {"the number ", std::string_view(digits, static_cast<std::size_t>(end - digits)),
               " is not a whole number of the ", dtype_name(dtype),
               " computation (convert the integer tensors to a floating dtype first)"});
}

// An evaluation in compute type T: every op of e has a form for T (a compile-time error
// otherwise), and for an integer T every constant is a whole number T holds (x * 2 over i32, not
// x * 2.5; throws InvalidArgument naming op and the number).
template <class T, class E>
void check_compute_type(std::string_view op, const E& e) {
  if constexpr (Integer<T>) {
    static_assert(
        has_integer_form<E>,
        "an op of this expression has no integer form: convert the integer inputs to float or double");
    for (const double c : constants_of(e)) {
      if (!(c == std::trunc(c) && c >= double(std::numeric_limits<T>::lowest()) &&
            c <= double(std::numeric_limits<T>::max()))) {
        throw_not_whole(op, c, dtype_of<T>);
      }
    }
  } else {
    static_assert(!Complex<T> || has_complex_form<E>, "an op of this expression has no complex form");
    (void)op, (void)e;
  }
}

// Elementwise e evaluated into `out`, which the caller has shaped (the eager kernels build their
// result Tensor in place this way): inputs of out's shape are read where they are, others
// broadcast. Throws ShapeMismatch when the inputs' broadcast shape is not out's.
template <class T, class E, class... In>
void eval_into(column_major_array<T>& out, const E& e, const In&... in) {
  static_assert(!is_scalar<E>, "eval_into writes an elementwise expression");
  check_compute_type<T>("eval_into", e);
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

}  // namespace tenferro::expr::detail
