// How an eager op turns its result into an EagerTensor: the inputs must share one runtime, and a
// tape node is made only while recording is on and some input tracks grad.
#pragma once

#include <tenferro/ad/tensor.hpp>

#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tenferro::detail::ad {

// The runtime every input belongs to. Throws ContextMismatch naming the op and both runtimes.
inline const std::shared_ptr<EagerRuntime>& common_runtime(std::string_view op,
                                                           std::span<const EagerTensor> in) {
  const auto& rt = in[0].context();
  for (std::size_t k = 1; k < in.size(); ++k) {
    if (in[k].context() != rt) {
      throw Error(ErrorKind::ContextMismatch, std::string(op),
                  "argument " + std::to_string(k) + " (shape " + format_shape(in[k].shape()) +
                      ") belongs to runtime " + to_string(in[k].context()->id()) + " but argument 0 (shape " +
                      format_shape(in[0].shape()) + ") to runtime " + to_string(rt->id()) +
                      ": tensors of different eager AD contexts cannot meet");
    }
  }
  return rt;
}

// True when an op over `in` records a node: recording is on and a gradient flows into some input
// (tensor_state::gradient_flows). An op whose result is neither floating nor complex records
// nothing either (record_expression, record_rule).
inline bool should_record(std::span<const EagerTensor> in) {
  if (!NoGradGuard::grad_enabled()) return false;
  for (const auto& x : in) {
    if (x.state()->gradient_flows()) return true;
  }
  return false;
}

// promote_types over the inputs' dtypes.
inline DType promoted_dtype(std::span<const EagerTensor> in) {
  DType out = in[0].dtype();
  for (const auto& x : in) out = promote_types(out, x.dtype());
  return out;
}

inline std::size_t largest_size(std::span<const EagerTensor> in) {
  std::size_t n = 0;
  for (const auto& x : in) n = std::max(n, x.size());
  return n;
}

// The result of an op: `value` in runtime rt and, when `record`, the node make() returns (by
// value: it is built in place next to the result's state).
template <class Make>
EagerTensor make_result(Tensor value, const std::shared_ptr<EagerRuntime>& rt, bool record, Make&& make) {
  state_ptr s;
  if (record) {
    s = std::allocate_shared<recorded_state>(pool_allocator<recorded_state>{}, std::forward<Make>(make));
  } else {
    s = std::allocate_shared<tensor_state>(pool_allocator<tensor_state>{});
  }
  s->value_ = std::move(value);
  s->runtime = rt;
  return EagerTensor(std::move(s));
}

// The handles of a node's inputs.
inline std::vector<EagerTensor> handles(const input_states& states) { return {states.begin(), states.end()}; }

}  // namespace tenferro::detail::ad
