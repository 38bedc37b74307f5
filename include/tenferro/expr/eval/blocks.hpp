// The compile-time layer's entry points for the eager runtime's deferred passes: elementwise blocks
// (eval_block, eval_blocks, sum_block), on the calling thread. (The eager kernels write whole
// results through the public eval_into and vjp_into, into.hpp.)
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
// as expr::eval_into over arrays of n elements.
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

}  // namespace tenferro::expr::detail
