// EagerRuntime: the shared context eager tensors live in. It fixes the backend (a CpuBackend and
// its threads), hands out a process-unique ContextId, keeps the registry of gradient slots, and
// offers the functional transforms grad / vjp / jvp (defined in ad/transforms.hpp).
//
// Always held by std::shared_ptr (create, with_cpu_backend, ...). Thread-safe: tensors of one
// runtime may be used from several threads; recording is per thread (no_grad is thread-local).
#pragma once

#include <tenferro/ad/extension.hpp>
#include <tenferro/ad/plan_cache.hpp>
#include <tenferro/ad/state.hpp>
#include <tenferro/core/context_id.hpp>
#include <tenferro/cpu/backend.hpp>
#include <tenferro/cpu/session.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tenferro {

// How a runtime differentiates: derivative rules for extension ops, given by the user (a runtime
// built with this context uses them in place of the rules the ops' modules register, rule by
// rule: a vjp given replaces the module's vjp, and likewise the jvp; ad/extension.hpp), and
// whether kernel sweeps keep prepared derivatives (ad/plan.hpp; on by default, off to compare).
// The built-in ops need no rules: AdContext::builder().build() is the default. Copies share their
// rules.
class AdContext {
 public:
  using rule_map = std::map<std::string, ExtensionRules, std::less<>>;

  class Builder {
   public:
    // Rules for the extension op `op`. Throws NotUnique naming the op when it already has rules.
    Builder& with_extension_rules(std::string op, ExtensionRules rules) {
      if (rules_.contains(op)) {
        throw_error(ErrorKind::NotUnique, "AdContext::Builder::with_extension_rules",
                    {"the extension op '", op, "' already has rules in this context"});
      }
      rules_.emplace(std::move(op), std::move(rules));
      return *this;
    }
    // Whether the runtime's kernel sweeps keep and reuse plans of graph structures (default on).
    Builder& with_prepared_derivatives(bool on) {
      prepared_ = on;
      return *this;
    }
    AdContext build() const { return AdContext(std::make_shared<const rule_map>(rules_), prepared_); }

   private:
    rule_map rules_;
    bool prepared_ = true;
  };
  static Builder builder() { return Builder(); }

  // The rules given for `op`, or nullptr.
  const ExtensionRules* extension_rules(std::string_view op) const {
    auto it = rules_->find(op);
    return it == rules_->end() ? nullptr : &it->second;
  }
  bool prepared_derivatives() const noexcept { return prepared_; }

 private:
  AdContext(std::shared_ptr<const rule_map> rules, bool prepared)
      : rules_(std::move(rules)), prepared_(prepared) {}
  std::shared_ptr<const rule_map> rules_;
  bool prepared_;
};

// What each cache of a runtime holds and has done (docs/caches.md).
struct EagerRuntimeCacheStats {
  CacheStats extensions;
  CacheStats prepared_derivatives;
  friend bool operator==(const EagerRuntimeCacheStats&, const EagerRuntimeCacheStats&) = default;
};

// A runtime's work on one CPU placement, from EagerRuntime::on_cpu: BackendSessions run by the
// threads of that placement's arena. It holds the arena (shared), no lock and no thread while idle.
// Movable, not copyable.
class CpuPlacementBoundEager {
 public:
  CpuPlacementBoundEager(ContextId runtime, CpuBackend backend)
      : runtime_(runtime), backend_(std::move(backend)) {}
  CpuPlacementBoundEager(CpuPlacementBoundEager&&) noexcept = default;
  CpuPlacementBoundEager& operator=(CpuPlacementBoundEager&&) noexcept = default;
  CpuPlacementBoundEager(const CpuPlacementBoundEager&) = delete;
  CpuPlacementBoundEager& operator=(const CpuPlacementBoundEager&) = delete;

  ContextId runtime_id() const noexcept { return runtime_; }
  const CpuPlacement& placement() const noexcept { return backend_.placement(); }
  const CpuExecutionInfo& execution_info() const noexcept { return backend_.execution_info(); }

  // Runs f(BackendSession&) on this placement's threads and returns f's result; an exception from
  // f comes out unchanged. May be entered again from inside f or a kernel (docs/threads.md).
  template <class F>
  decltype(auto) with_eager_session(F&& f) const {
    return cpu::run_session(backend_, std::forward<F>(f));
  }

 private:
  ContextId runtime_;
  CpuBackend backend_;
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
    return cpu::run_session(backend_, std::forward<F>(f));
  }

  // This runtime's work on `placement`: automatic() is the runtime's own backend, the others a
  // backend of that placement (cpu/placement.hpp) with this backend's fusion setting. An unusable
  // placement throws RuntimeState with the CpuPlacementError as its cause (Error::cause()).
  CpuPlacementBoundEager on_cpu(const CpuPlacement& placement) const {
    if (placement == CpuPlacement::automatic()) return {id_, backend_};
    try {
      return {id_, CpuBackend::for_placement(placement).with_fusion(backend_.fuses())};
    } catch (const CpuPlacementError&) {
      Error::throw_with_cause(Error(ErrorKind::RuntimeState, "EagerRuntime::on_cpu",
                                    "runtime " + to_string(id_) + " cannot run on " + to_string(placement)));
    }
  }

  // Extensions (ad/extension.hpp, docs/extensions.md).
  //
  // Installs `module`, or replaces the module installed under its id, and returns the new epoch;
  // the module installed already returns the current epoch unchanged. Concurrent installs are
  // serialized. Throws NotUnique when an op or family of the module belongs to another module or an
  // op name comes twice; Extension when the module registers an op without a forward kernel, or a
  // family or op name that is empty or holds '/'. Nothing changes when it throws. (An op's node key
  // names it "family/op", apart from every built-in op.) A replaced module is kept alive with the
  // runtime, for the nodes recorded with its ops: replace modules rarely. configure() must not
  // install its own module.
  RuntimeEpoch install_extension_module(std::shared_ptr<ExtensionModule> module);
  RuntimeEpoch epoch() const;
  // Runs the extension op `op` of `family` on `inputs` (one runtime: this one) and records it while
  // recording is on. Throws Extension ("missing extension module") when no installed module
  // provides the family, and when it has no such op.
  EagerTensor call_extension(std::string_view family, std::string_view op,
                             std::span<const EagerTensor> inputs, const OpAttributes& attributes = {});
  // Runs f(ExtensionExecutionContext&) in a backend session (entered first) with this runtime's
  // extension caches as of the current epoch, and returns f's result (an exception from f comes
  // out unchanged). Called from inside an extension op's forward, it has the epoch of its own
  // call, not of the forward's.
  template <class F>
  decltype(auto) with_extension_execution_context(F&& f) const {
    return in_extension_context(epoch(), std::forward<F>(f));
  }

  // Caches (docs/caches.md). Thread-safe.
  EagerRuntimeCacheStats cache_stats() const { return {extension_caches_.stats(), plans_.stats()}; }
  void clear_extension_caches() { extension_caches_.clear(); }
  void clear_prepared_derivative_cache() { plans_.clear(); }
  void clear_caches() {
    clear_extension_caches();
    clear_prepared_derivative_cache();
  }
  ExtensionCacheLimits extension_cache_limits() const { return extension_caches_.limits(); }
  AdTransformCacheLimits prepared_derivative_cache_limits() const { return plans_.limits(); }
  // Both throw InvalidArgument when a limit is zero.
  void set_extension_cache_limits(const ExtensionCacheLimits& limits) {
    extension_caches_.set_limits(limits);
  }
  void set_prepared_derivative_cache_limits(const AdTransformCacheLimits& limits) {
    detail::check_cache_limits("set_prepared_derivative_cache_limits", limits);
    plans_.set_limits(limits);
  }
  // The plans of kernel sweeps (ad/plan.hpp).
  detail::ad::plan_cache& prepared_derivative_plans() const noexcept { return plans_; }

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

  // What install_extension_module set up (ad/extension_impl.hpp). Every op_def ever installed is
  // kept: nodes recorded before a module was replaced still point at theirs.
  struct installed_module {
    std::shared_ptr<ExtensionModule> module;
    std::vector<std::string> families;
  };
  struct extension_op {
    std::string family;
    const detail::ad::op_def* def;
  };

  CpuBackend backend_;
  AdContext ad_;
  ContextId id_;
  mutable std::shared_mutex extensions_mutex_;  // readers: call_extension; writer: install
  std::mutex install_mutex_;
  RuntimeEpoch epoch_;
  std::map<std::string, installed_module, std::less<>> modules_;
  std::map<std::string, extension_op, std::less<>> extension_ops_;
  std::map<std::string, std::string, std::less<>> family_owner_;  // family -> module id
  std::vector<std::unique_ptr<detail::ad::op_def>> extension_defs_;
  std::vector<std::unique_ptr<detail::ad::extension_entry>> extension_entries_;
  std::vector<std::shared_ptr<ExtensionModule>> retired_modules_;  // replaced; their ops may still run
  mutable detail::extension_cache_table extension_caches_;
  mutable detail::ad::plan_cache plans_;

  // with_extension_execution_context, for a call that began at `epoch`.
  template <class F>
  decltype(auto) in_extension_context(RuntimeEpoch epoch, F&& f) const {
    return with_execution_session([&](BackendSession& session) -> decltype(auto) {
      ExtensionExecutionContext ctx(session, ExtensionCacheStore(extension_caches_, epoch));
      return std::forward<F>(f)(ctx);
    });
  }
  mutable std::mutex slots_mutex_;
  mutable std::mutex fusion_mutex_;
  std::vector<std::weak_ptr<detail::ad::grad_slot>> slots_;
  std::size_t prune_at_ = 64;
};

}  // namespace tenferro
