// Differentiating a recorded graph: backward() into gradient slots, and the functional transforms
// grad / vjp / jvp of EagerRuntime.
//
// The sweeps themselves are in ad/sweep.hpp and run through the runtime's prepared-derivative cache
// (ad/plan.hpp). Each sweep runs either with the fused kernels
// (backward(), and transforms while recording is off) or on EagerTensors with recorded ops
// (transforms while recording is on, and backward with create_graph), so results can be
// differentiated again.
//
// Under TENFERRO_SEPARATE_COMPILATION the transforms are compiled once (core/detail/config.hpp).
#pragma once

#include <tenferro/ad/plan.hpp>
#include <tenferro/core/detail/config.hpp>

#include <optional>
#include <string_view>
#include <vector>

namespace tenferro::detail::ad {

inline void check_scalar(std::string_view op, const EagerTensor& output) {
  if (output.size() != 1) {
    throw Error(ErrorKind::NonScalarGrad, std::string(op),
                "the output has shape " + format_shape(output.shape()) + " (" +
                    std::to_string(output.size()) +
                    " elements); a gradient needs a scalar (one element): reduce it first, or use vjp");
  }
  if (is_complex(output.dtype())) {
    throw Error(ErrorKind::DtypeMismatch, std::string(op),
                "the output has dtype " + std::string(dtype_name(output.dtype())) +
                    "; a gradient needs a real loss: take real(), imag() or abs() first, or use vjp");
  }
}

inline void check_same_runtime(std::string_view op, const EagerRuntime* rt,
                               std::initializer_list<EagerTensor> in) {
  std::vector<EagerTensor> all(in);
  common_runtime(op, all);
  if (rt && all[0].context().get() != rt) {
    throw Error(ErrorKind::ContextMismatch, std::string(op),
                "the tensors belong to runtime " + to_string(all[0].context()->id()) +
                    " but the call was made on runtime " + to_string(rt->id()) +
                    ": tensors of different eager AD contexts cannot meet");
  }
}

// Throws DtypeMismatch / ShapeMismatch unless `given` matches `expected` (named `what`).
inline void check_like(std::string_view op, std::string_view arg, const EagerTensor& given,
                       std::string_view what, const EagerTensor& expected) {
  if (given.dtype() != expected.dtype()) {
    throw Error(ErrorKind::DtypeMismatch, std::string(op),
                "argument '" + std::string(arg) + "' has dtype " + std::string(dtype_name(given.dtype())) +
                    " but " + std::string(what) + " has dtype " + std::string(dtype_name(expected.dtype())));
  }
  if (given.shape() != expected.shape()) {
    throw Error(ErrorKind::ShapeMismatch, std::string(op),
                "argument '" + std::string(arg) + "' has shape " + format_shape(given.shape()) + " but " +
                    std::string(what) + " has shape " + format_shape(expected.shape()));
  }
}

inline EagerTensor required(std::optional<EagerTensor> r, std::string_view op, const EagerTensor& output,
                            const EagerTensor& wrt) {
  if (!r) {
    throw Error(ErrorKind::Inactive, std::string(op),
                "the output (shape " + format_shape(output.shape()) + ") does not depend on 'wrt' (shape " +
                    format_shape(wrt.shape()) + ") through recorded ops; use " + std::string(op) +
                    "_optional to get nullopt instead");
  }
  return std::move(*r);
}

inline EagerTensor ones_like(const EagerTensor& t) {
  return EagerTensor::from_tensor_in(Tensor::ones(t.shape(), t.dtype()), t.context());
}

}  // namespace tenferro::detail::ad

#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>

namespace tenferro::detail::ad {

// vjp of output w.r.t. wrt: traced while recording, else with kernels (an untracked result).
TENFERRO_INLINE std::optional<EagerTensor> vjp_impl(const EagerTensor& output, const EagerTensor& wrt,
                                                    const EagerTensor& cotangent) {
  if (!output.tracks_grad() || !wrt.tracks_grad()) return std::nullopt;
  sweep_arena arena;
  const tensor_state* target = wrt.state().get();
  const bool recorded = NoGradGuard::grad_enabled();
  auto g = reverse_sweep(output.state().get(), cotangent, target, recorded, &arena.resource).of(target);
  if (!g || recorded) return g;
  return g->tracks_grad() ? g->detach() : *g;  // the seed itself may track
}

}  // namespace tenferro::detail::ad

namespace tenferro {

TENFERRO_INLINE std::optional<EagerTensor> EagerRuntime::grad_optional(const EagerTensor& output,
                                                                       const EagerTensor& wrt) {
  detail::ad::check_scalar("grad", output);
  detail::ad::check_same_runtime("grad", this, {output, wrt});
  return detail::ad::vjp_impl(output, wrt, detail::ad::ones_like(output));
}
TENFERRO_INLINE EagerTensor EagerRuntime::grad(const EagerTensor& output, const EagerTensor& wrt) {
  return detail::ad::required(grad_optional(output, wrt), "grad", output, wrt);
}

TENFERRO_INLINE std::optional<EagerTensor> EagerRuntime::vjp_optional(const EagerTensor& output,
                                                                      const EagerTensor& wrt,
                                                                      const EagerTensor& cotangent) {
  detail::ad::check_same_runtime("vjp", this, {output, wrt, cotangent});
  detail::ad::check_like("vjp", "cotangent", cotangent, "the output", output);
  return detail::ad::vjp_impl(output, wrt, cotangent);
}
TENFERRO_INLINE EagerTensor EagerRuntime::vjp(const EagerTensor& output, const EagerTensor& wrt,
                                              const EagerTensor& cotangent) {
  return detail::ad::required(vjp_optional(output, wrt, cotangent), "vjp", output, wrt);
}

TENFERRO_INLINE std::optional<EagerTensor> EagerRuntime::jvp_optional(const EagerTensor& output,
                                                                      const EagerTensor& wrt,
                                                                      const EagerTensor& tangent) {
  detail::ad::check_same_runtime("jvp", this, {output, wrt, tangent});
  detail::ad::check_like("jvp", "tangent", tangent, "'wrt'", wrt);
  if (!output.tracks_grad() || !wrt.tracks_grad()) return std::nullopt;
  detail::ad::sweep_arena arena;
  const bool recorded = NoGradGuard::grad_enabled();
  auto t =
      detail::ad::forward_sweep(output.state().get(), wrt.state().get(), tangent, recorded, &arena.resource);
  if (!t || recorded) return t;
  return t->tracks_grad() ? t->detach() : *t;  // the tangent itself may track
}
TENFERRO_INLINE EagerTensor EagerRuntime::jvp(const EagerTensor& output, const EagerTensor& wrt,
                                              const EagerTensor& tangent) {
  return detail::ad::required(jvp_optional(output, wrt, tangent), "jvp", output, wrt);
}

TENFERRO_INLINE void EagerTensor::backward(BackwardOptions options) const {
  detail::ad::check_scalar("backward", *this);
  backward_with(detail::ad::ones_like(*this), options);
}

TENFERRO_INLINE void EagerTensor::backward_with(const EagerTensor& seed, BackwardOptions options) const {
  detail::ad::check_same_runtime("backward", nullptr, {*this, seed});
  detail::ad::check_like("backward", "seed", seed, "the output", *this);
  if (!tracks_grad()) {
    throw Error(ErrorKind::Inactive, "backward",
                "the output (shape " + format_shape(shape()) +
                    ") does not track grad: no trainable leaf reaches it through recorded ops");
  }
  // Slots are written after the sweep, so a failing rule leaves every slot as it was. No slot lock
  // is held while anything is computed (a computation may wait for oneTBB work, and a task run
  // meanwhile may deposit into the same slot): values are materialized first, and a traced sum
  // is made outside the lock and stored only if the slot did not change meanwhile.
  auto add_to = [](std::optional<Tensor>& slot, const Tensor& g) {  // same shape and dtype: a plain loop
    if (slot) {
      cpu::add_into(*slot, g);
    } else {
      slot = g;
    }
  };
  // Leaves reached only through rules that are zero (sign, ...) get zeros, as any other leaf
  // reached through recorded ops gets its gradient.
  auto add_zeros = [](auto& r) {
    for (const detail::ad::tensor_state* s : r.zero) {
      if (s->slot && !r.cot.contains(s)) r.cot.emplace(s, r.zeros_for(*s));
    }
  };
  detail::ad::sweep_arena arena;
  if (options.create_graph) {
    auto r = detail::ad::reverse_sweep(state_.get(), seed, nullptr, true, &arena.resource);
    add_zeros(r);
    for (const auto& [state, g] : r.cot) {
      if (!state->slot) continue;
      auto& slot = *state->slot;
      const Tensor value = g.materialized();
      for (;;) {
        detail::ad::state_ptr old;
        {
          const std::lock_guard lock(slot.mutex);
          old = slot.traced;
        }
        const detail::ad::state_ptr sum = old ? EagerTensor(old).add(g).state() : g.state();
        const std::lock_guard lock(slot.mutex);
        if (slot.traced != old) continue;  // another backward deposited meanwhile
        slot.traced = sum;
        add_to(slot.grad, value);
        break;
      }
    }
    return;
  }
  auto r = detail::ad::reverse_sweep(state_.get(), seed, nullptr, false, &arena.resource);
  add_zeros(r);
  std::vector<const detail::ad::tensor_state*> grads;  // deferred leaf gradients: computed together
  for (const auto& [state, g] : r.cot) {
    if (state->slot) grads.push_back(g.state().get());
  }
  detail::ad::fill_deferred(grads);
  // Compact every gradient (a view is copied out of its buffer) before the first slot changes, so
  // a failing allocation leaves every slot as it was.
  std::vector<Tensor> values;
  values.reserve(r.cot.size());
  for (const auto& [state, g] : r.cot) {
    if (state->slot) values.push_back(g.materialized().materialized());
  }
  std::size_t k = 0;
  for (const auto& [state, g] : r.cot) {
    if (!state->slot) continue;
    const std::lock_guard lock(state->slot->mutex);
    add_to(state->slot->grad, values[k++]);
  }
}

}  // namespace tenferro

#endif  // TENFERRO_HEADER_ONLY
