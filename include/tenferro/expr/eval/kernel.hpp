// Evaluating one node: on an xsimd batch of elements (the fused loop's body) or on one element
// (the scalar path: expressions of reductions, and the scalar reference used by the tests).
//
// Reductions are numbered in pre-order; `Base` is the number of the first reduction inside the
// node being evaluated. A reduction met inside an elementwise expression was computed by an
// earlier pass and is read from `results[Base]`.
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/detail/xtensor.hpp>
#include <tenferro/expr/eval/cse.hpp>
#include <tenferro/expr/nodes.hpp>

#include <cstddef>
#include <tuple>

namespace tenferro::expr::detail {

template <class T>
struct gather_source;

// Leaves the kernels read: a contiguous column-major array of the broadcast shape, or a scalar.
// An array input of one element broadcast against larger ones is an array leaf over one batch of
// copies of that element with `mask` 0, so every load reads that batch: a register's worth, never
// a copy of the broadcast shape, and no branch in the loop. Any other input the loop cannot read as
// it lies (a strided view, a partial broadcast, another element type) has a `gather`: the pass
// copies each chunk of it into a chunk of scratch before the loop reads the chunk (broadcast.hpp).
// The choices are made at run time, so they cost no second instantiation (hoisting, which needs
// the type to say a value is uniform, applies to scalar leaves only).
template <class T>
struct array_leaf {
  using value_type = T;
  const T* data;
  std::size_t mask = ~std::size_t(0);          // 0: data holds one batch of one value
  const gather_source<T>* gather = nullptr;  // set: data is filled chunk by chunk (pass.hpp)
  template <class B>
  TENFERRO_ALWAYS_INLINE B load(std::size_t i) const {
    return B::load_unaligned(data + (i & mask));
  }
  T at(std::size_t i) const { return data[i & mask]; }
  bool broadcast() const { return mask == 0; }
};

// Room for one SIMD batch of any element type the kernels use: what a broadcast leaf points to.
inline constexpr std::size_t max_batch_elements = 64 / sizeof(float);

template <class T>
struct scalar_leaf {
  using value_type = T;
  T value;
  template <class B>
  TENFERRO_ALWAYS_INLINE B load(std::size_t) const {
    return B(value);
  }
  T at(std::size_t) const { return value; }
};

// A leaf already loaded into a register: the fused loop loads every input once per batch, so
// every output computed in that batch shares the same values (and the compiler can share the
// subexpressions they have in common, which it could not across stores to the outputs).
template <class B>
struct register_leaf {
  B value;
  template <class>
  TENFERRO_ALWAYS_INLINE B load(std::size_t) const {
    return value;
  }
};

template <class T, class Leaves, class Shared = type_list<>, class B = T>
struct element_context {
  using shared_types = Shared;
  const Leaves& leaves;
  const T* results;           // one per reduction, by pre-order number
  T n;                        // element count of the broadcast shape (numel)
  std::size_t i;              // first element
  const B* shared = nullptr;  // values of the shared subtrees in this batch (cse.hpp)
};

template <std::size_t Base, class B, class E, class Ctx>
TENFERRO_ALWAYS_INLINE B eval_batch(const E& e, const Ctx& ctx);

// The node's own op on its operands' values (never its shared value: this computes it).
template <std::size_t Base, class B, class E, class Ctx>
TENFERRO_ALWAYS_INLINE B eval_node(const E& e, const Ctx& ctx) {
  using T = typename B::value_type;
  if constexpr (requires { E::index; }) {
    return std::get<E::index>(ctx.leaves).template load<B>(ctx.i);
  } else if constexpr (std::is_same_v<E, constant>) {
    return B(static_cast<T>(e.value));
  } else if constexpr (std::is_same_v<E, zero>) {
    return B(T(0));
  } else if constexpr (std::is_same_v<E, one>) {
    return B(T(1));
  } else if constexpr (std::is_same_v<E, numel>) {
    return B(ctx.n);
  } else if constexpr (requires { e.value; }) {  // constant handled above: a hoisted value
    return B(static_cast<T>(e.value));
  } else if constexpr (requires { e.operand; }) {
    return E::op_type::batch(eval_batch<Base, B>(e.operand, ctx));
  } else if constexpr (requires { e.lhs; }) {
    using L = std::remove_cvref_t<decltype(e.lhs)>;
    return E::op_type::batch(eval_batch<Base, B>(e.lhs, ctx),
                             eval_batch<Base + reduction_count<L>, B>(e.rhs, ctx));
  } else {
    return B(ctx.results[Base]);
  }
}

// A shared subtree has one value wherever it occurs in the pass: the pass checks that before it
// runs the loop with sharing (run_hoisted_pass), so the loop body looks nothing up at run time.
template <std::size_t Base, class B, class E, class Ctx>
TENFERRO_ALWAYS_INLINE B eval_batch(const E& e, const Ctx& ctx) {
  if constexpr (constexpr std::size_t k = shared_index<typename Ctx::shared_types, E>; k != not_shared) {
    return ctx.shared[k];
  } else {
    return eval_node<Base, B>(e, ctx);
  }
}

template <std::size_t Base, class T, class E, class Ctx>
T eval_element(const E& e, const Ctx& ctx) {
  if constexpr (requires { E::index; }) {
    return static_cast<T>(std::get<E::index>(ctx.leaves).at(ctx.i));
  } else if constexpr (std::is_same_v<E, constant>) {
    return static_cast<T>(e.value);
  } else if constexpr (std::is_same_v<E, zero>) {
    return T(0);
  } else if constexpr (std::is_same_v<E, one>) {
    return T(1);
  } else if constexpr (std::is_same_v<E, numel>) {
    return ctx.n;
  } else if constexpr (requires { e.value; }) {  // a hoisted value
    return static_cast<T>(e.value);
  } else if constexpr (requires { e.operand; }) {
    return E::op_type::scalar(eval_element<Base, T>(e.operand, ctx));
  } else if constexpr (requires { e.lhs; }) {
    using L = std::remove_cvref_t<decltype(e.lhs)>;
    return E::op_type::scalar(eval_element<Base, T>(e.lhs, ctx),
                              eval_element<Base + reduction_count<L>, T>(e.rhs, ctx));
  } else {
    return ctx.results[Base];
  }
}

// ---- what one pass computes ------------------------------------------------------------------

// Reduction number Id, of Body with Op, computed in this pass.
template <std::size_t Id, class Op, class Body>
struct reduce_task {
  static constexpr std::size_t id = Id;
  using op = Op;
  using body_type = Body;
  const Body* body;
  double scale = 1.0;  // the result is scale * (reduction of body) + n * offset (hoist.hpp)
  double offset = 0.0;
};

// An elementwise output written in this pass; its reductions start at number Base; element i
// goes to out[i]. With `sum`, the output is the sum of its elements over the pass, written
// to out[0]: the gradient of an input of one element broadcast against the others, summed where
// it is computed (pass.hpp).
template <std::size_t Base, class E, class T>
struct store_task {
  static constexpr std::size_t base = Base;
  using expr_type = E;
  const E* expr;
  T* out;
  bool sum = false;
};

// The reductions of level P inside e, whose first reduction has number Base.
template <std::size_t P, std::size_t Base, class E>
auto collect_reductions(const E& e) {
  if constexpr (level<E> < P) {
    return std::tuple<>{};
  } else if constexpr (requires { e.operand; }) {
    return collect_reductions<P, Base>(e.operand);
  } else if constexpr (requires { e.lhs; }) {
    using L = std::remove_cvref_t<decltype(e.lhs)>;
    return std::tuple_cat(collect_reductions<P, Base>(e.lhs),
                          collect_reductions<P, Base + reduction_count<L>>(e.rhs));
  } else if constexpr (level<E> == P) {
    using Body = std::remove_cvref_t<decltype(e.body)>;
    return std::tuple<reduce_task<Base, typename E::op_type, Body>>{{&e.body}};
  } else {
    return collect_reductions<P, Base + 1>(e.body);
  }
}

// Index of the first task in Tasks with the same op and body type as task J (J itself if none):
// a reduction the value and a gradient both contain is computed once when the values agree.
template <class Tasks, std::size_t J>
constexpr std::size_t first_same_task() {
  using TJ = std::tuple_element_t<J, Tasks>;
  std::size_t found = J;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    ((found == J && K < J && std::is_same_v<typename std::tuple_element_t<K, Tasks>::op, typename TJ::op> &&
              std::is_same_v<typename std::tuple_element_t<K, Tasks>::body_type, typename TJ::body_type>
          ? (found = K, 0)
          : 0),
     ...);
  }
  (std::make_index_sequence<J>{});
  return found;
}

}  // namespace tenferro::expr::detail
