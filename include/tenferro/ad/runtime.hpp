// EagerRuntime: the shared context eager tensors live in. It fixes the backend (a CpuBackend and
// its threads), hands out a process-unique ContextId, keeps the registry of gradient slots, and
// offers the functional transforms grad / vjp / jvp (defined in ad/transforms.hpp).
//
// Always held by std::shared_ptr (create, with_cpu_backend, ...). Thread-safe: tensors of one
// runtime may be used from several threads; recording is per thread (no_grad is thread-local).
#pragma once

#include <tenferro/ad/state.hpp>
#include <tenferro/core/context_id.hpp>
#include <tenferro/cpu/backend.hpp>
#include <tenferro/cpu/session.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <type_traits>
#include <utility>
#include <vector>

namespace tenferro {

// Derivative rules beyond the built-in ops (extension families register theirs here). The built-in
// ops need none: AdContext::builder().build() is the default.
class AdContext {
 public:
  class Builder {
   public:
    AdContext build() const { return AdContext(); }
  };
  static Builder builder() { return Builder(); }

 private:
  AdContext() = default;
};

class EagerRuntime : public std::enable_shared_from_this<EagerRuntime> {
  struct private_token {};

 public:
  // A runtime on a CpuBackend using every core.
  static std::shared_ptr<EagerRuntime> create() { return with_cpu_backend(CpuBackend::create()); }
  static std::shared_ptr<EagerRuntime> with_cpu_backend(CpuBackend backend) {
    return with_cpu_backend_and_ad_context(std::move(backend), AdContext::builder().build());
  }
  static std::shared_ptr<EagerRuntime> with_cpu_backend_and_ad_context(CpuBackend backend,
                                                                       const AdContext& ad) {
    return std::make_shared<EagerRuntime>(private_token{}, std::move(backend), ad);
  }

  EagerRuntime(private_token, CpuBackend backend, AdContext ad)
      : backend_(std::move(backend)), ad_(std::move(ad)), id_(ContextId::next()) {}
  EagerRuntime(const EagerRuntime&) = delete;
  EagerRuntime& operator=(const EagerRuntime&) = delete;

  ContextId id() const noexcept { return id_; }
  const CpuBackend& backend() const noexcept { return backend_; }
  const AdContext& ad_context() const noexcept { return ad_; }

  // Stops recording on the current thread (for every runtime) until the guard dies.
  NoGradGuard no_grad() const noexcept { return NoGradGuard(); }

  // Waits for submitted work; CPU kernels finish before their op returns, so this returns at once.
  void synchronize() const noexcept {}

  // Empties every live gradient slot of this runtime; the slots stay registered, so later
  // backward() calls accumulate into them again.
  void clear_grads() {
    for (const auto& slot : live_slots()) {
      std::lock_guard lock(slot->mutex);
      slot->grad.reset();
      slot->traced.reset();
    }
  }

  // Imports a tensor as an untracked constant / as a trainable leaf with a gradient slot.
  EagerTensor constant_from(Tensor tensor);
  EagerTensor variable_from(Tensor tensor);

  // Functional transforms (ad/transforms.hpp). They never touch gradient slots; their results are
  // differentiable again while recording is on.
  EagerTensor grad(const EagerTensor& output, const EagerTensor& wrt);
  std::optional<EagerTensor> grad_optional(const EagerTensor& output, const EagerTensor& wrt);
  EagerTensor vjp(const EagerTensor& output, const EagerTensor& wrt, const EagerTensor& cotangent);
  std::optional<EagerTensor> vjp_optional(const EagerTensor& output, const EagerTensor& wrt,
                                          const EagerTensor& cotangent);
  EagerTensor jvp(const EagerTensor& output, const EagerTensor& wrt, const EagerTensor& tangent);
  std::optional<EagerTensor> jvp_optional(const EagerTensor& output, const EagerTensor& wrt,
                                          const EagerTensor& tangent);

  // Runs f(BackendSession&) inside the backend's arena and returns f's result.
  template <class F>
  decltype(auto) with_execution_session(F&& f) const {
    return backend_.execute([&]() -> decltype(auto) {
      cpu::CpuSession session;
      return std::forward<F>(f)(static_cast<BackendSession&>(session));
    });
  }

  friend std::ostream& operator<<(std::ostream& os, const EagerRuntime& rt) {
    return os << "EagerRuntime(id=" << rt.id_ << ", backend=cpu, threads=" << rt.backend_.threads()
              << ", live gradient slots=" << rt.live_slots().size() << ")";
  }

  // Held while the plan of a deferred computation of this runtime is read or its results are
  // published (ad/deferred.hpp); never while anything is computed.
  std::mutex& fusion_mutex() const noexcept { return fusion_mutex_; }

  // A new gradient slot, registered so clear_grads() reaches it.
  std::shared_ptr<detail::ad::grad_slot> make_slot() {
    auto slot = std::make_shared<detail::ad::grad_slot>();
    std::lock_guard lock(slots_mutex_);
    if (slots_.size() >= prune_at_) {
      std::erase_if(slots_, [](const auto& w) { return w.expired(); });
      prune_at_ = std::max<std::size_t>(64, 2 * slots_.size());
    }
    slots_.push_back(slot);
    return slot;
  }

 private:
  std::vector<std::shared_ptr<detail::ad::grad_slot>> live_slots() const {
    std::lock_guard lock(slots_mutex_);
    std::vector<std::shared_ptr<detail::ad::grad_slot>> out;
    for (const auto& w : slots_) {
      if (auto s = w.lock()) out.push_back(std::move(s));
    }
    return out;
  }

  CpuBackend backend_;
  AdContext ad_;
  ContextId id_;
  mutable std::mutex slots_mutex_;
  mutable std::mutex fusion_mutex_;
  std::vector<std::weak_ptr<detail::ad::grad_slot>> slots_;
  std::size_t prune_at_ = 64;
};

}  // namespace tenferro
