// The definitions of ad/extension.hpp and of EagerRuntime's extension methods, compiled once with
// the runtime: installing a module, calling an extension op, and the rules of its tape nodes,
// which dispatch to the op's ExtensionRules.
#pragma once

#include <tenferro/ad/record.hpp>
#include <tenferro/core/detail/config.hpp>

#include <algorithm>
#include <mutex>
#include <shared_mutex>

namespace tenferro {

namespace detail {

TENFERRO_INLINE extension_cache_table::replacement extension_cache_table::prepare(
    std::span<const std::string> old_families, std::span<const std::pair<std::string, std::string>> caches,
    RuntimeEpoch epoch) const {
  replacement r;
  r.old_families.assign(old_families.begin(), old_families.end());
  {
    const std::lock_guard lock(mutex_);
    r.registered = registered_;
    r.installed_at = installed_at_;
  }
  auto old = [&](std::string_view family) {
    return std::ranges::find(old_families, family) != old_families.end();
  };
  std::erase_if(r.registered, [&](const auto& p) { return old(p.first); });
  for (const auto& p : caches) {
    if (std::ranges::find(r.registered, p) == r.registered.end()) r.registered.push_back(p);
  }
  auto mark = [&](const std::string& family) {
    auto it = std::ranges::find(r.installed_at, family, &std::pair<std::string, RuntimeEpoch>::first);
    if (it == r.installed_at.end()) {
      r.installed_at.emplace_back(family, epoch);
    } else {
      it->second = epoch;
    }
  };
  for (const std::string& family : old_families) mark(family);
  for (const auto& p : caches) mark(p.first);
  return r;
}

TENFERRO_INLINE void extension_cache_table::commit(replacement& r) noexcept {
  const std::lock_guard lock(mutex_);
  registered_.swap(r.registered);
  installed_at_.swap(r.installed_at);
  cache_.evict_if([&](const ExtensionCacheKey& k) {
    return std::ranges::find(r.old_families, k.family) != r.old_families.end();
  });
}

TENFERRO_INLINE bool extension_cache_table::usable(const ExtensionCacheKey& key, RuntimeEpoch epoch) const {
  const std::lock_guard lock(mutex_);
  const bool registered = std::ranges::any_of(
      registered_, [&](const auto& p) { return p.first == key.family && p.second == key.cache; });
  if (!registered) {
    throw_error(ErrorKind::Extension, "ExtensionCacheStore",
                {"no installed module registers the cache '", key.cache, "' of family '", key.family, "'"});
  }
  return current(key, epoch);
}

TENFERRO_INLINE bool extension_cache_table::current(const ExtensionCacheKey& key, RuntimeEpoch epoch) const {
  const bool registered = std::ranges::any_of(
      registered_, [&](const auto& p) { return p.first == key.family && p.second == key.cache; });
  auto it = std::ranges::find(installed_at_, key.family, &std::pair<std::string, RuntimeEpoch>::first);
  return registered && (it == installed_at_.end() || it->second <= epoch);
}

TENFERRO_INLINE void extension_cache_table::wrong_type(const ExtensionCacheKey& key) {
  throw_error(ErrorKind::Extension, "ExtensionCacheStore",
              {"the value under '", key.discriminator, "' in cache '", key.cache, "' of family '", key.family,
               "' has another type than the one asked for"});
}

}  // namespace detail

namespace detail::ad {

inline const ExtensionOp& extension_of(const node& n) { return n.def().extension->op; }

// A rule's cotangent (tangent) must have its input's (the output's) shape and dtype, in its runtime.
inline void check_rule_result(const ExtensionOp& op, std::string_view rule, const EagerTensor& v,
                              const EagerTensor& like, std::size_t k) {
  if (v.shape() != like.shape() || v.dtype() != like.dtype() || !v.same_context(like)) {
    throw_error(
        ErrorKind::Extension, op.name,
        {"the ", rule, " rule returned ", dtype_name(v.dtype()), v.shape(), " for argument ", k, " of ",
         dtype_name(like.dtype()), like.shape(), v.same_context(like) ? "" : " (in another runtime)"});
  }
}

// The traced rules: the op's ExtensionRules on EagerTensors.
inline std::vector<std::optional<EagerTensor>> extension_vjp_traced(const node& n, const EagerTensor& output,
                                                                    const EagerTensor& cotangent,
                                                                    const std::vector<bool>& needed) {
  const ExtensionOp& op = extension_of(n);
  if (!op.rules.vjp) {
    throw_error(ErrorKind::UnsupportedAdRule, op.name,
                {"the extension op has no vjp rule (family ", op.family, ")"});
  }
  const std::vector<EagerTensor> in = handles(n.inputs());
  auto out = op.rules.vjp(ExtensionCall{in, n.attributes(), output}, cotangent, needed);
  if (out.size() != in.size()) {
    throw_error(ErrorKind::Extension, op.name,
                {"the vjp rule returned ", out.size(), " cotangents for ", in.size(), " inputs"});
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    if (out[k] && !needed[k]) out[k].reset();
    if (out[k]) check_rule_result(op, "vjp", *out[k], in[k], k);
  }
  return out;
}

inline EagerTensor extension_jvp_traced(const node& n, const EagerTensor& output,
                                        std::span<const EagerTensor* const> tangents) {
  const ExtensionOp& op = extension_of(n);
  if (!op.rules.jvp) {
    throw_error(ErrorKind::UnsupportedAdRule, op.name,
                {"the extension op has no jvp rule (family ", op.family, ")"});
  }
  const std::vector<EagerTensor> in = handles(n.inputs());
  EagerTensor t = op.rules.jvp(ExtensionCall{in, n.attributes(), output}, tangents);
  check_rule_result(op, "jvp", t, output, 0);
  return t;
}

// The kernel forms: the same rules on untracked handles, recording nothing.
inline std::vector<std::optional<Tensor>> extension_vjp(const node& n, const Tensor& output,
                                                        const Tensor& cotangent,
                                                        const std::vector<bool>& needed) {
  const NoGradGuard no_grad;
  const auto& rt = n.inputs()[0]->runtime;
  auto r = extension_vjp_traced(n, EagerTensor::from_tensor_in(output, rt),
                                EagerTensor::from_tensor_in(cotangent, rt), needed);
  std::vector<std::optional<Tensor>> out(r.size());
  for (std::size_t k = 0; k < r.size(); ++k) {
    if (r[k]) out[k] = r[k]->state()->value();
  }
  return out;
}

inline Tensor extension_jvp(const node& n, const Tensor& output, std::span<const Tensor* const> tangents) {
  const NoGradGuard no_grad;
  const auto& rt = n.inputs()[0]->runtime;
  std::vector<std::optional<EagerTensor>> held(tangents.size());
  std::vector<const EagerTensor*> t(tangents.size(), nullptr);
  for (std::size_t k = 0; k < tangents.size(); ++k) {
    if (tangents[k]) t[k] = &held[k].emplace(EagerTensor::from_tensor_in(*tangents[k], rt));
  }
  return extension_jvp_traced(n, EagerTensor::from_tensor_in(output, rt), t).state()->value();
}

}  // namespace detail::ad

TENFERRO_INLINE RuntimeEpoch EagerRuntime::epoch() const {
  const std::shared_lock lock(extensions_mutex_);
  return epoch_;
}

TENFERRO_INLINE RuntimeEpoch EagerRuntime::install_extension_module(std::shared_ptr<ExtensionModule> module) {
  constexpr std::string_view op = "EagerRuntime::install_extension_module";
  if (!module) throw_error(ErrorKind::InvalidArgument, op, {"the module is null"});
  const std::string id = module->module_id();
  {  // installed already (every call of a wrapper that ensures its module): readers only
    const std::shared_lock lock(extensions_mutex_);
    if (auto it = modules_.find(id); it != modules_.end() && it->second.module == module) return epoch_;
  }
  ExtensionRegistrar registrar;
  module->configure(registrar);                   // before the lock: configure may use the runtime
  const std::lock_guard install(install_mutex_);  // one install at a time; calls go on meanwhile
  if (auto it = modules_.find(id); it != modules_.end() && it->second.module == module) return epoch();
  // Check everything before changing anything.
  std::vector<std::string> families;
  auto claim_family = [&](const std::string& family) {
    if (family.empty() || family.find('/') != std::string::npos) {
      throw_error(
          ErrorKind::Extension, op,
          {"module '", id, "' registers the family id '", family, "': it must be non-empty and without '/'"});
    }
    if (auto owner = family_owner_.find(family); owner != family_owner_.end() && owner->second != id) {
      throw_error(ErrorKind::NotUnique, op,
                  {"family '", family, "' of module '", id, "' belongs to the installed module '",
                   owner->second, "'"});
    }
    if (std::ranges::find(families, family) == families.end()) families.push_back(family);
  };
  for (std::size_t i = 0; i < registrar.ops().size(); ++i) {
    const ExtensionOp& x = registrar.ops()[i];
    claim_family(x.family);
    if (x.name.empty() || x.name.find('/') != std::string::npos || !x.forward) {
      throw_error(ErrorKind::Extension, op,
                  {"op ", i, " ('", x.name, "') of module '", id, "' has ",
                   x.forward ? "a name that is empty or holds '/'" : "no forward kernel"});
    }
    auto taken = extension_ops_.find(x.name);
    const bool other_module = taken != extension_ops_.end() && family_owner_.at(taken->second.family) != id;
    const bool twice = std::ranges::count(registrar.ops(), x.name, &ExtensionOp::name) > 1;
    if (other_module || twice) {
      throw_error(ErrorKind::NotUnique, op,
                  {"the op name '", x.name, "' of module '", id, "' is taken",
                   other_module ? " by another module" : " twice in the module"});
    }
  }
  for (const auto& [family, cache] : registrar.caches()) claim_family(family);

  std::vector<std::unique_ptr<detail::ad::op_def>> defs;
  std::vector<std::unique_ptr<detail::ad::extension_entry>> entries;
  for (const ExtensionOp& x : registrar.ops()) {
    auto entry = std::make_unique<detail::ad::extension_entry>(detail::ad::extension_entry{x});
    if (const ExtensionRules* given = ad_.extension_rules(x.name)) {  // rule by rule
      if (given->vjp) entry->op.rules.vjp = given->vjp;
      if (given->jvp) entry->op.rules.jvp = given->jvp;
    }
    auto def = std::make_unique<detail::ad::op_def>();
    def->name = x.family + "/" + x.name;  // apart from every built-in entry's name (no '/')
    def->label = x.name;
    def->arity = x.arity;
    def->vjp = &detail::ad::extension_vjp;
    def->vjp_traced = &detail::ad::extension_vjp_traced;
    def->jvp = &detail::ad::extension_jvp;
    def->jvp_traced = &detail::ad::extension_jvp_traced;
    def->extension = entry.get();
    defs.push_back(std::move(def));
    entries.push_back(std::move(entry));
  }

  const std::unique_lock lock(extensions_mutex_);
  const RuntimeEpoch next{epoch_.value + 1};
  // Everything that allocates is built aside first; the commit below swaps and moves only, so a
  // failure (bad_alloc included) leaves the runtime as it was.
  auto ops = extension_ops_;
  auto owners = family_owner_;
  auto modules = modules_;
  std::vector<std::string> old_families;
  std::shared_ptr<ExtensionModule> retired;
  if (auto old = modules.find(id); old != modules.end()) {  // replace: drop the old module's ops and caches
    old_families = old->second.families;
    for (const std::string& family : old_families) owners.erase(family);
    std::erase_if(ops, [&](const auto& kv) { return !owners.contains(kv.second.family); });
    retired = old->second.module;  // calls in flight and recorded nodes may still run its kernels and rules
  }
  for (const std::string& family : families) owners[family] = id;
  for (std::size_t i = 0; i < defs.size(); ++i) {
    ops[registrar.ops()[i].name] = extension_op{registrar.ops()[i].family, defs[i].get()};
  }
  modules[id] = installed_module{std::move(module), std::move(families)};
  auto caches = extension_caches_.prepare(old_families, registrar.caches(), next);
  extension_defs_.reserve(extension_defs_.size() + defs.size());
  extension_entries_.reserve(extension_entries_.size() + entries.size());
  retired_modules_.reserve(retired_modules_.size() + 1);

  extension_ops_.swap(ops);
  family_owner_.swap(owners);
  modules_.swap(modules);
  extension_caches_.commit(caches);
  for (auto& d : defs) extension_defs_.push_back(std::move(d));
  for (auto& e : entries) extension_entries_.push_back(std::move(e));
  if (retired) retired_modules_.push_back(std::move(retired));
  epoch_ = next;
  return epoch_;
}

// g++ 12 sees the copy of the attributes' inline small_vector as reading past its 48 bytes
// (-Wstringop-overread, a false positive: the copy reads size() elements).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
TENFERRO_INLINE EagerTensor EagerRuntime::call_extension(std::string_view family, std::string_view op,
                                                         std::span<const EagerTensor> inputs,
                                                         const OpAttributes& attributes) {
  const detail::ad::op_def* def = nullptr;
  RuntimeEpoch epoch;  // the def's: what its forward may keep in the caches
  {
    const std::shared_lock lock(extensions_mutex_);
    auto it = extension_ops_.find(op);
    if (it == extension_ops_.end() || it->second.family != family) {
      if (!family_owner_.contains(family)) {
        throw_error(ErrorKind::Extension, op,
                    {"missing extension module: no module providing family '", family,
                     "' is installed in runtime ", to_string(id_)});
      }
      throw_error(ErrorKind::Extension, op, {"the installed family '", family, "' has no op of this name"});
    }
    def = it->second.def;
    epoch = epoch_;
  }
  const ExtensionOp& x = def->extension->op;
  if (inputs.empty() || (x.arity != 0 && inputs.size() != x.arity)) {
    throw_error(ErrorKind::InvalidArgument, op,
                {"expected ", x.arity == 0 ? std::string("at least 1") : std::to_string(x.arity),
                 " inputs, got ", inputs.size()});
  }
  const auto& rt = detail::ad::common_runtime(op, inputs);
  if (rt.get() != this) {
    throw_error(ErrorKind::ContextMismatch, op,
                {"the inputs belong to runtime ", to_string(rt->id()), ", the op was called on runtime ",
                 to_string(id_)});
  }
  std::vector<Tensor> values;
  values.reserve(inputs.size());
  for (const EagerTensor& v : inputs) values.push_back(v.state()->value());
  Tensor value = in_extension_context(
      epoch, [&](ExtensionExecutionContext& ctx) { return x.forward(ctx, values, attributes); });
  const bool record =
      detail::ad::should_record(inputs) && (is_floating(value.dtype()) || is_complex(value.dtype()));
  return detail::ad::make_result(std::move(value), rt, record,
                                 [&] { return detail::ad::node(inputs, *def, attributes); });
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace tenferro
