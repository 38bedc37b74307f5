// Extension modules (ad/extension.hpp): a complete small family (the example of
// docs/extensions.md) installed, run, recorded and differentiated; epochs; replacing a module; the
// AdContext's rules; the extension caches and their limits; errors that leave the runtime usable;
// concurrent installs and cache use.
#include "../errors.hpp"
#include "eager_testing.hpp"

#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using V = std::vector<EagerTensor>;

// softplus(x) = log(1 + exp(x)), d/dx = sigmoid(x): one op of the family "demo.activations".
// The kernels and rules read the module's own scale (through `this`: the runtime must keep a
// replaced module alive for the nodes recorded with it); with `cached`, the forward takes the scale
// through the family's cache, so a value of another module would show in the result.
class Activations final : public ExtensionModule {
 public:
  explicit Activations(double scale = 1.0, bool cached = false) : scale_(scale), cached_(cached) {}
  std::string module_id() const override { return "demo.activations"; }
  void configure(ExtensionRegistrar& r) const override {
    ExtensionOp softplus;
    softplus.family = "demo.activations";
    softplus.name = "softplus";
    softplus.arity = 1;
    softplus.forward = [this](ExtensionExecutionContext& ctx, std::span<const Tensor> in,
                              const OpAttributes&) {
      BackendSession& s = ctx.backend_mut();
      const Tensor y = s.log(s.add(Tensor::ones(in[0].shape(), in[0].dtype()), s.exp(in[0])));
      double scale = scale_;
      if (cached_) {
        scale = *ctx.caches().get_or_insert<double>({"demo.activations", "scales", "scale"},
                                                    [this] { return scale_; });
        if (scale != scale_) scale = std::nan("");  // another module's value
      }
      return scale == 1.0 ? y : s.mul(y, Tensor::full(in[0].shape(), scale, in[0].dtype()));
    };
    softplus.rules.vjp = [this](const ExtensionCall& call, const EagerTensor& cot, const std::vector<bool>&) {
      return std::vector<std::optional<EagerTensor>>{cot * call.inputs[0].sigmoid() * scale_};
    };
    softplus.rules.jvp = [this](const ExtensionCall& call, std::span<const EagerTensor* const> t) {
      return *t[0] * call.inputs[0].sigmoid() * scale_;
    };
    r.add_op(std::move(softplus));
    r.add_cache("demo.activations", "tables");
    r.add_cache("demo.activations", "scales");
  }

 private:
  double scale_;
  bool cached_;
};

// A module of one op with neither rules nor a name clash.
class NoRules final : public ExtensionModule {
 public:
  std::string module_id() const override { return "demo.norules"; }
  void configure(ExtensionRegistrar& r) const override {
    ExtensionOp op;
    op.family = "demo.norules";
    op.name = "twice";
    op.forward = [](ExtensionExecutionContext& ctx, std::span<const Tensor> in, const OpAttributes&) {
      return ctx.backend_mut().add(in[0], in[0]);
    };
    r.add_op(std::move(op));
  }
};

// A module built from a function (for the error cases).
class Configured final : public ExtensionModule {
 public:
  Configured(std::string id, std::function<void(ExtensionRegistrar&)> f)
      : id_(std::move(id)), f_(std::move(f)) {}
  std::string module_id() const override { return id_; }
  void configure(ExtensionRegistrar& r) const override { f_(r); }

 private:
  std::string id_;
  std::function<void(ExtensionRegistrar&)> f_;
};

EagerTensor softplus(const EagerTensor& x) {
  return x.context()->call_extension("demo.activations", "softplus", std::span(&x, 1));
}

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

}  // namespace

TEST_CASE("an extension op runs, records one node and differentiates", "[extension]") {
  auto ctx = EagerRuntime::create();
  CHECK(ctx->epoch().value == 1);
  CHECK(ctx->install_extension_module(std::make_shared<Activations>()).value == 2);
  const auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({3}, {0, 1, -2}), ctx);
  const auto y = softplus(x);
  const auto v = values_of<double>(y);
  CHECK(v[0] == Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(v[1] == Approx(1.3132616875182228).epsilon(1e-15));
  REQUIRE(y.node_key().has_value());
  std::ostringstream key;
  key << *y.node_key();
  CHECK(key.str() == "softplus{}(f64[3])");
  CHECK(y.node_key()->op == "demo.activations/softplus");  // apart from any built-in op's name

  y.reduce_sum().backward();
  const auto g = as_doubles(*x.grad());
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(g[i] == Approx(sigmoid(std::vector<double>{0, 1, -2}[i])).epsilon(1e-15));

  // Both rule forms against differences, and the second derivative sigmoid * (1 - sigmoid).
  const auto x0 = ctx->constant_from(Tensor::from_vec_col_major<double>({3}, {0.5, -1, 2}));
  const auto r = gradcheck([](const V& in) { return softplus(in[0]); }, {x0});
  INFO(r);
  CHECK(r.passed);
  const auto r2 =
      gradcheck([&](const V& in) { return ctx->grad(softplus(in[0]).reduce_sum(), in[0]); }, {x0});
  INFO(r2);
  CHECK(r2.passed);
}

TEST_CASE("installing: the same module keeps the epoch, a replacement moves it", "[extension]") {
  auto ctx = EagerRuntime::create();
  auto module = std::make_shared<Activations>();
  CHECK(ctx->install_extension_module(module).value == 2);
  CHECK(ctx->install_extension_module(module).value == 2);
  const auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({1}, {0}), ctx);
  const auto before = softplus(x);
  // A replacement under the same id: new results and rules, while the node recorded before keeps
  // its module's rules (and the module stays alive for it).
  std::weak_ptr<ExtensionModule> first = module;
  module.reset();
  CHECK(ctx->install_extension_module(std::make_shared<Activations>(2.0)).value == 3);
  CHECK_FALSE(first.expired());
  const auto after = softplus(x);
  CHECK(values_of<double>(after)[0] == Approx(2 * std::log(2.0)));
  before.backward();
  CHECK(as_doubles(*x.grad())[0] == Approx(0.5));
  ctx->clear_grads();
  after.backward();
  CHECK(as_doubles(*x.grad())[0] == Approx(1.0));
  // Another runtime has its own extensions.
  auto other = EagerRuntime::create();
  const auto z = other->constant_from(Tensor::ones({1}));
  const std::string missing = message_of([&] { (void)softplus(z); });
  CHECK(missing.find("Extension in softplus") == 0);
  CHECK(missing.find("missing extension module") != std::string::npos);
  CHECK(missing.find("'demo.activations'") != std::string::npos);
  CHECK(message_of([&] {
          (void)ctx->call_extension("demo.activations", "softmax", std::span(&x, 1));
        }).find("has no op of this name") != std::string::npos);
}

TEST_CASE("concurrent first installs are serialized into one change", "[extension][threads]") {
  auto ctx = EagerRuntime::create();
  const auto module = std::make_shared<Activations>();
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> epochs(8);
  for (std::size_t t = 0; t < epochs.size(); ++t) {
    threads.emplace_back([&, t] { epochs[t] = ctx->install_extension_module(module).value; });
  }
  for (auto& t : threads) t.join();
  for (const auto e : epochs) CHECK(e == 2);
  CHECK(ctx->epoch().value == 2);
}

TEST_CASE("bad modules are refused and change nothing", "[extension][errors]") {
  auto ctx = EagerRuntime::create();
  ctx->install_extension_module(std::make_shared<Activations>());
  auto op_named = [](std::string family, std::string name) {
    ExtensionOp op;
    op.family = std::move(family);
    op.name = std::move(name);
    op.forward = [](ExtensionExecutionContext&, std::span<const Tensor> in, const OpAttributes&) {
      return in[0];
    };
    return op;
  };
  auto install = [&](std::function<void(ExtensionRegistrar&)> f) {
    return [ctx, f] { ctx->install_extension_module(std::make_shared<Configured>("demo.bad", f)); };
  };
  CHECK(kind_of(install([&](auto& r) { r.add_op(op_named("demo.bad", "softplus")); })) ==
        ErrorKind::NotUnique);
  CHECK(kind_of(install([&](auto& r) { r.add_op(op_named("demo.activations", "relu")); })) ==
        ErrorKind::NotUnique);
  CHECK(message_of(install([&](auto& r) {
          r.add_op(op_named("demo.bad", "f"));
          r.add_op(op_named("demo.bad", "f"));
        })).find("twice in the module") != std::string::npos);
  CHECK(kind_of(install([&](auto& r) {
          r.add_op(ExtensionOp{"demo.bad", "g", 1, {}, {}});
        })) == ErrorKind::Extension);
  CHECK(kind_of(install([&](auto& r) { r.add_op(op_named("demo.bad", "a/b")); })) == ErrorKind::Extension);
  CHECK(kind_of(install([&](auto& r) { r.add_op(op_named("demo/bad", "c")); })) == ErrorKind::Extension);
  CHECK(kind_of([&] { ctx->install_extension_module(nullptr); }) == ErrorKind::InvalidArgument);
  CHECK(ctx->epoch().value == 2);
  const auto x = ctx->constant_from(Tensor::zeros({1}));
  CHECK(values_of<double>(softplus(x))[0] == Approx(std::log(2.0)));
}

TEST_CASE("an AdContext's rules replace a module's, and duplicates are refused", "[extension]") {
  ExtensionRules doubled;
  doubled.vjp = [](const ExtensionCall& call, const EagerTensor& cot, const std::vector<bool>&) {
    return std::vector<std::optional<EagerTensor>>{cot * call.inputs[0].sigmoid() * 2.0};
  };
  auto builder = AdContext::builder();
  builder.with_extension_rules("softplus", doubled);
  const std::string dup = message_of([&] { builder.with_extension_rules("softplus", doubled); });
  CHECK(dup.find("NotUnique") == 0);
  CHECK(dup.find("'softplus'") != std::string::npos);
  auto ctx = EagerRuntime::with_cpu_backend_and_ad_context(CpuBackend::create(), builder.build());
  ctx->install_extension_module(std::make_shared<Activations>());
  const auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({1}, {0}), ctx);
  softplus(x).backward();
  CHECK(as_doubles(*x.grad())[0] == Approx(1.0));  // 2 sigmoid(0)
  // The context gives no jvp rule: the module's stays.
  CHECK(values_of<double>(ctx->jvp(softplus(x), x, ctx->constant_from(Tensor::ones({1}))))[0] == Approx(0.5));
}

TEST_CASE("an op without rules computes but refuses derivatives, naming itself", "[extension][errors]") {
  auto ctx = EagerRuntime::create();
  ctx->install_extension_module(std::make_shared<NoRules>());
  const auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({2}, {1, 2}), ctx);
  const auto y = ctx->call_extension("demo.norules", "twice", std::span(&x, 1));
  CHECK(values_of<double>(y) == std::vector<double>{2, 4});
  const std::string m = message_of([&] { y.reduce_sum().backward(); });
  CHECK(m.find("UnsupportedAdRule in twice") == 0);
  CHECK(m.find("no vjp rule") != std::string::npos);
  CHECK_FALSE(x.grad().has_value());
  CHECK(values_of<double>(ctx->call_extension("demo.norules", "twice", std::span(&x, 1))) ==
        std::vector<double>{2, 4});
}

TEST_CASE("a rule returning the wrong shape is an Extension error", "[extension][errors]") {
  ExtensionRules wrong;
  wrong.vjp = [](const ExtensionCall& call, const EagerTensor&, const std::vector<bool>&) {
    return std::vector<std::optional<EagerTensor>>{call.inputs[0].reshape({2, 1})};
  };
  auto ctx = EagerRuntime::with_cpu_backend_and_ad_context(
      CpuBackend::create(), AdContext::builder().with_extension_rules("softplus", wrong).build());
  ctx->install_extension_module(std::make_shared<Activations>());
  const auto x = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({2}, {1, 2}), ctx);
  const std::string m = message_of([&] { softplus(x).reduce_sum().backward(); });
  CHECK(m.find("Extension in softplus: the vjp rule returned f64[2, 1] for argument 0 of f64[2]") == 0);
}

TEST_CASE("extension caches count, evict, clear and check their keys", "[extension][caches]") {
  auto ctx = EagerRuntime::create();
  CHECK(ctx->cache_stats() == EagerRuntimeCacheStats{});
  CHECK(ctx->extension_cache_limits() == ExtensionCacheLimits{256, std::size_t{64} << 20});
  ctx->install_extension_module(std::make_shared<Activations>());
  const ExtensionCacheKey k1{"demo.activations", "tables", "one"}, k2{"demo.activations", "tables", "two"};
  int made = 0;
  auto get = [&](const ExtensionCacheKey& k, int v) {
    return ctx->with_extension_execution_context([&](ExtensionExecutionContext& e) {
      CHECK(e.backend_mut().backend_name() == "cpu");
      return *e.caches().get_or_insert<int>(k, [&] { return ++made, v; });
    });
  };
  CHECK(get(k1, 10) == 10);
  CHECK(get(k1, 11) == 10);  // a hit: the first value
  CHECK(made == 1);
  auto s = ctx->cache_stats().extensions;
  CHECK(s == CacheStats{1, sizeof(int), 1, 1, 0, 0});

  ctx->set_extension_cache_limits({1, 1024});
  CHECK(get(k2, 20) == 20);
  s = ctx->cache_stats().extensions;
  CHECK(s.entries == 1);
  CHECK(s.evictions == 1);
  CHECK(get(k1, 12) == 12);  // evicted: made again
  CHECK(kind_of([&] { ctx->set_extension_cache_limits({0, 1024}); }) == ErrorKind::InvalidArgument);
  CHECK(kind_of([&] { ctx->set_extension_cache_limits({4, 0}); }) == ErrorKind::InvalidArgument);
  CHECK(ctx->extension_cache_limits() == ExtensionCacheLimits{1, 1024});

  const std::string unregistered = message_of([&] { get({"demo.activations", "other", "x"}, 1); });
  CHECK(unregistered.find("cache 'other' of family 'demo.activations'") != std::string::npos);
  CHECK(kind_of([&] {
          ctx->with_extension_execution_context(
              [&](ExtensionExecutionContext& e) { return e.caches().find<double>(k1); });
        }) == ErrorKind::Extension);

  // A value larger than max_bytes is not kept, and the others stay.
  CHECK(ctx->with_extension_execution_context([&](ExtensionExecutionContext& e) {
    return *e.caches().get_or_insert<int>(
        k2, [] { return 21; }, 2048);
  }) == 21);
  s = ctx->cache_stats().extensions;
  CHECK(s.entries == 1);
  CHECK(s.evictions == 3);
  CHECK(get(k1, 14) == 12);

  ctx->clear_caches();
  CHECK(ctx->cache_stats().extensions.entries == 0);
  CHECK(ctx->cache_stats().extensions.clears == 1);
  // Replacing the module drops its family's entries (they may be stale), and a call that began
  // before the replacement keeps nothing after it.
  CHECK(get(k1, 13) == 13);
  ctx->install_extension_module(std::make_shared<Activations>(3.0));
  CHECK(ctx->cache_stats().extensions.entries == 0);
  CHECK(ctx->with_extension_execution_context([&](ExtensionExecutionContext& e) {
    ctx->install_extension_module(std::make_shared<Activations>(4.0));
    return *e.caches().get_or_insert<int>(k1, [] { return 15; });
  }) == 15);
  CHECK(ctx->cache_stats().extensions.entries == 0);
  CHECK(get(k1, 16) == 16);
  CHECK(ctx->cache_stats().extensions.entries == 1);
  // An exception thrown by the callback comes out unchanged.
  CHECK_THROWS_AS(ctx->with_extension_execution_context(
                      [](ExtensionExecutionContext&) -> int { throw std::out_of_range("mine"); }),
                  std::out_of_range);
}

TEST_CASE("extension caches and calls are safe from several threads", "[extension][caches][threads]") {
  auto ctx = EagerRuntime::create();
  ctx->install_extension_module(std::make_shared<Activations>());
  const auto x = ctx->constant_from(Tensor::from_vec_col_major<double>({2}, {0, 1}));
  const auto want = values_of<double>(softplus(x));
  std::atomic<int> made{0}, wrong{0};
  std::vector<std::thread> threads;
  constexpr int per_thread = 200;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const ExtensionCacheKey k{"demo.activations", "tables", std::to_string(i % 10)};
        const int v = ctx->with_extension_execution_context([&](ExtensionExecutionContext& e) {
          return *e.caches().get_or_insert<int>(k, [&] { return ++made, i % 10; });
        });
        if (v != i % 10) ++wrong;
        if (t == 0 && i % 50 == 0) ctx->clear_extension_caches();
        const auto y = softplus(x).materialized();  // no Catch2 assertions off the main thread
        if (!std::ranges::equal(y.as_slice<double>(), want)) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  const auto s = ctx->cache_stats().extensions;
  CHECK(s.hits + s.misses == 4 * per_thread);
  CHECK(made == static_cast<int>(s.misses));
  CHECK(s.clears == per_thread / 50);
}

TEST_CASE("calls go on while a module is replaced from another thread", "[extension][threads]") {
  auto ctx = EagerRuntime::create();
  ctx->install_extension_module(std::make_shared<Activations>(1.0, true));
  const auto x = ctx->constant_from(Tensor::from_vec_col_major<double>({1}, {0}));
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0}, calls{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&] {
      while (!done) {
        try {
          const double v = softplus(x).materialized().as_slice<double>()[0] / std::log(2.0);
          if (std::abs(v - 1) > 1e-12 && std::abs(v - 2) > 1e-12) ++wrong;  // one module or the other
          ++calls;
        } catch (const Error&) {
          ++wrong;
        }
      }
    });
  }
  while (calls == 0) std::this_thread::yield();
  for (int i = 0; i < 100; ++i)
    ctx->install_extension_module(std::make_shared<Activations>(1.0 + (i % 2), true));
  while (calls < 100) std::this_thread::yield();
  done = true;
  for (auto& t : callers) t.join();
  CHECK(wrong == 0);
  CHECK(ctx->epoch().value == 102);
  CHECK(ctx->cache_stats().extensions.hits > 0);
}

// A module whose configure uses the runtime (here: einsum, which installs its own module).
class UsesRuntime final : public ExtensionModule {
 public:
  explicit UsesRuntime(std::weak_ptr<EagerRuntime> rt) : rt_(std::move(rt)) {}
  std::string module_id() const override { return "demo.uses_runtime"; }
  void configure(ExtensionRegistrar& r) const override {
    const auto v = rt_.lock()->constant_from(Tensor::from_vec_col_major<double>({2}, {3, 4}));
    norm2_ = einsum("i,i->", {v, v}).materialized().as_slice<double>()[0];
    r.add_cache("demo.uses_runtime", "none");
  }
  double norm2() const { return norm2_; }

 private:
  std::weak_ptr<EagerRuntime> rt_;  // the runtime keeps the module: no cycle
  mutable double norm2_ = 0;
};

TEST_CASE("configure may use the runtime it is installed into", "[extension]") {
  auto ctx = EagerRuntime::create();
  const auto module = std::make_shared<UsesRuntime>(ctx);
  CHECK(ctx->install_extension_module(module).value == 3);  // einsum's install, then this one
  CHECK(module->norm2() == 25);
}
