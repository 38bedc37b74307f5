// The differential tester: seeded random eager programs (random_program.hpp) over every eager op,
// checked against central finite differences in f64 — backward(), grad (traced and kernel), vjp,
// jvp, the Hessian-vector product jvp(grad) and backward with create_graph — and, batched to
// sizes where elementwise ops are deferred, fusion on against fusion off (values bit-identical,
// gradients within 1e-12).
//
//   TENFERRO_RANDOM_PROGRAMS=n  how many programs (default 4000)
//   TENFERRO_RANDOM_SEED=s      the first seed (default 1); program k has seed s + k
//   TENFERRO_RANDOM_DUMP=path   also write each program with its loss and gradients as a JSON line
//                               (scripts/differential_torch.py runs them in PyTorch)
//
// A failing program is shrunk (the shortest failing prefix, unused instructions dropped) and
// printed as C++ with its seed.
#include "random_program.hpp"
#include "random_program_text.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

using namespace tenferro;
using namespace tenferro::test;

namespace {

std::size_t env_or(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? static_cast<std::size_t>(std::stoull(v)) : fallback;
}

std::vector<double> values(const EagerTensor& t) {
  const Tensor m = t.materialized();
  auto s = m.as_slice<double>();
  return {s.begin(), s.end()};
}

std::vector<EagerTensor> make_leaves(const program& p, const std::shared_ptr<EagerRuntime>& ctx,
                                     bool trainable, const std::vector<std::vector<double>>& data) {
  std::vector<EagerTensor> leaves;
  for (std::size_t k = 0; k < p.leaf_shapes.size(); ++k) {
    Tensor t = Tensor::from_vec_col_major<double>(p.leaf_shapes[k], data[k]);
    leaves.push_back(trainable ? ctx->variable_from(t) : ctx->constant_from(t));
  }
  return leaves;
}

double loss_at(const program& p, const std::shared_ptr<EagerRuntime>& ctx,
               const std::vector<std::vector<double>>& data) {
  const auto no_grad = ctx->no_grad();
  const auto r = run(p, make_leaves(p, ctx, false, data), 0);
  return values(loss_of(p, r.back(), 0))[0];
}

// Empty when close: equal, or |got - want| <= tol (1 + |want|), element by element.
std::string compare(const std::vector<double>& got, const std::vector<double>& want, double tol,
                    const std::string& what) {
  if (got.size() != want.size())
    return what + ": " + std::to_string(got.size()) + " elements, want " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool equal = got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]));  // infinities too
    if (!equal && !(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])))) {
      std::ostringstream os;
      os.precision(17);
      os << what << ": element " << i << " is " << got[i] << ", want " << want[i];
      return os.str();
    }
  }
  return {};
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Whether every register of a run is finite and moderate (else finite differences mean nothing).
bool tame(const std::vector<EagerTensor>& regs) {
  for (const auto& r : regs) {
    for (double v : values(r)) {
      if (!std::isfinite(v) || std::abs(v) > 1e4) return false;
    }
  }
  return true;
}

struct outcome {
  bool skipped = false;
  std::string failure;  // empty: passed
  double loss = 0;
  std::vector<std::vector<double>> grads;
};

// Every check on one program at its own (unbatched) size.
outcome check_small(const program& p) {
  outcome o;
  auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  auto leaves = make_leaves(p, ctx, true, p.leaf_values);
  const auto regs = run(p, leaves, 0);
  if (!tame(regs)) {
    o.skipped = true;
    return o;
  }
  const EagerTensor loss = loss_of(p, regs.back(), 0);
  o.loss = values(loss)[0];
  loss.backward();
  const std::size_t L = leaves.size();
  for (std::size_t k = 0; k < L; ++k)
    o.grads.push_back(leaves[k].grad() ? values(ctx->constant_from(*leaves[k].grad()))
                                       : std::vector<double>(p.leaf_values[k].size(), 0.0));
  auto fail = [&](std::string what) {
    o.failure = std::move(what);
    return o;
  };
  // Prepared derivatives (ad/plan.hpp): the program again on this runtime (a hit of the plan the
  // first backward made) and on a runtime with the cache off give those gradients bit for bit.
  for (const bool prepared : {true, false}) {
    const auto other = prepared ? ctx
                                : EagerRuntime::with_cpu_backend_and_ad_context(
                                      CpuBackend::with_threads(1),
                                      AdContext::builder().with_prepared_derivatives(false).build());
    const auto again = make_leaves(p, other, true, p.leaf_values);
    const auto hits = other->cache_stats().prepared_derivatives.hits;
    loss_of(p, run(p, again, 0).back(), 0).backward();
    if (prepared && other->cache_stats().prepared_derivatives.hits != hits + 1)
      return fail("the program's second backward() did not run by the plan of its first");
    for (std::size_t k = 0; k < L; ++k) {
      const auto g = again[k].grad() ? values(other->constant_from(*again[k].grad()))
                                     : std::vector<double>(p.leaf_values[k].size(), 0.0);
      if (std::memcmp(g.data(), o.grads[k].data(), g.size() * sizeof(double)) != 0)
        return fail(std::string(prepared ? "a plan's hit" : "the cache off") +
                    " changed the gradient of leaf " + std::to_string(k));
    }
  }
  // Recorded sweeps run by the same plans: the recorded grad of every leaf and its jvp (an HVP)
  // along the leaf's own values, cold, warm and with the cache off, bit for bit.
  auto second_order = [&](const std::shared_ptr<EagerRuntime>& rt) {
    const auto l = make_leaves(p, rt, true, p.leaf_values);
    const EagerTensor f = loss_of(p, run(p, l, 0).back(), 0);
    std::vector<double> out;
    for (std::size_t k = 0; k < L; ++k) {
      const auto g = rt->grad_optional(f, l[k]);
      if (!g) continue;
      const auto gv = values(*g);
      out.insert(out.end(), gv.begin(), gv.end());
      const auto no_grad = rt->no_grad();
      const auto hv = rt->jvp_optional(*g, l[k], rt->constant_from(l[k].materialized()));
      out.push_back(hv ? 1.0 : 0.0);
      const auto hvv = hv ? values(*hv) : std::vector<double>{};
      out.insert(out.end(), hvv.begin(), hvv.end());
    }
    return out;
  };
  const auto cold = second_order(ctx), warm = second_order(ctx);
  const auto unplanned = second_order(EagerRuntime::with_cpu_backend_and_ad_context(
      CpuBackend::with_threads(1), AdContext::builder().with_prepared_derivatives(false).build()));
  if (cold.size() != warm.size() || cold.size() != unplanned.size() ||
      std::memcmp(cold.data(), warm.data(), cold.size() * sizeof(double)) != 0 ||
      std::memcmp(cold.data(), unplanned.data(), cold.size() * sizeof(double)) != 0)
    return fail("recorded grads or their jvp differ between cold, warm and the cache off");
  // Central differences of the loss, element by element, at steps h and h/2 combined by
  // Richardson extrapolation (error O(h^4)); their difference bounds the error where the loss
  // curves hard (cos(square(expm1(expm1(x))))).
  for (std::size_t k = 0; k < L; ++k) {
    for (std::size_t i = 0; i < p.leaf_values[k].size(); ++i) {
      auto central = [&](double h) {
        auto data = p.leaf_values;
        data[k][i] = p.leaf_values[k][i] + h;
        const double up = loss_at(p, ctx, data);
        data[k][i] = p.leaf_values[k][i] - h;
        return (up - loss_at(p, ctx, data)) / (2 * h);
      };
      // Smaller steps only where the larger disagree (a fast-oscillating loss).
      const double g = o.grads[k][i];
      double fd = 0, d1 = 0, d2 = 0;
      bool agree = false;
      for (double h = 1e-4 * (1 + std::abs(p.leaf_values[k][i])); !agree && h > 1e-7; h /= 10) {
        d1 = central(h);
        d2 = central(h / 2);
        fd = (4 * d2 - d1) / 3;
        agree = std::abs(g - fd) <= 1e-6 * (1 + std::abs(fd)) + 1e-9 * std::abs(o.loss) + std::abs(d1 - d2);
      }
      if (!agree) {
        std::ostringstream os;
        os.precision(17);
        os << "backward vs finite differences, leaf " << k << " element " << i << ": " << g << ", want " << fd
           << " (steps h, h/2: " << d1 << ", " << d2 << ")";
        return fail(os.str());
      }
    }
  }
  // The functional transforms against backward().
  const EagerTensor w = ctx->constant_from(Tensor::from_vec_col_major<double>(p.shapes.back(), p.weights));
  const std::vector<bool> used = used_registers(p);
  for (std::size_t k = 0; k < L; ++k) {
    const std::string leaf = ", leaf " + std::to_string(k);
    const auto g = ctx->grad_optional(loss, leaves[k]);
    if (!used[k]) {  // the output does not depend on this leaf: no gradient anywhere
      if (g) return fail("grad_optional of an unused leaf is not nullopt" + leaf);
      if (leaves[k].grad()) return fail("backward() filled the slot of an unused leaf" + leaf);
      continue;
    }
    if (!g) return fail("grad_optional is nullopt" + leaf);
    if (auto e = compare(values(*g), o.grads[k], 1e-10, "grad (traced) vs backward" + leaf); !e.empty())
      return fail(e);
    {
      const auto no_grad = ctx->no_grad();
      if (auto e = compare(values(ctx->grad(loss, leaves[k])), o.grads[k], 1e-10,
                           "grad (kernels) vs backward" + leaf);
          !e.empty())
        return fail(e);
    }
    if (auto e =
            compare(values(ctx->vjp(regs.back(), leaves[k], w)), o.grads[k], 1e-10, "vjp vs backward" + leaf);
        !e.empty())
      return fail(e);
    std::vector<double> t(p.leaf_values[k].size());
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = 0.5 - 0.25 * static_cast<double>(i % 5);
    const auto tangent = ctx->constant_from(Tensor::from_vec_col_major<double>(p.leaf_shapes[k], t));
    if (auto e = compare(values(ctx->jvp(loss, leaves[k], tangent)), {dot(o.grads[k], t)}, 1e-10,
                         "jvp vs backward" + leaf);
        !e.empty())
      return fail(e);
  }
  // Second order on the first leaf the output uses (q), along t: jvp(grad) against central
  // differences of backward().
  const std::size_t q =
      static_cast<std::size_t>(std::find(used.begin(), used.begin() + L, true) - used.begin());
  if (q == L) return o;  // the output is a function of no leaf
  std::vector<double> t(p.leaf_values[q].size());
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = 0.25 + 0.125 * static_cast<double>(i % 3);
  const auto tangent = ctx->constant_from(Tensor::from_vec_col_major<double>(p.leaf_shapes[q], t));
  auto grad_at = [&](double step) {
    auto data = p.leaf_values;
    for (std::size_t i = 0; i < t.size(); ++i) data[q][i] += step * t[i];
    auto fresh = make_leaves(p, ctx, true, data);
    loss_of(p, run(p, fresh, 0).back(), 0).backward();
    return fresh[q].grad() ? values(ctx->constant_from(*fresh[q].grad()))
                           : std::vector<double>(t.size(), 0.0);
  };
  const double h = 1e-4;  // Richardson on steps h and h/2, as above
  const auto up = grad_at(h), down = grad_at(-h), up2 = grad_at(h / 2), down2 = grad_at(-h / 2);
  std::vector<double> hv_fd(t.size());
  double spread = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double d1 = (up[i] - down[i]) / (2 * h), d2 = (up2[i] - down2[i]) / h;
    hv_fd[i] = (4 * d2 - d1) / 3;
    spread = std::max(spread, std::abs(d1 - d2) / (1 + std::abs(hv_fd[i])));
  }
  const double hv_tol = 1e-4 + spread;
  try {
    const auto g = ctx->grad(loss, leaves[q]);
    const auto hv = ctx->jvp_optional(g, leaves[q], tangent);
    const auto hv_values = hv ? values(*hv) : std::vector<double>(t.size(), 0.0);
    if (auto e = compare(hv_values, hv_fd, hv_tol, "jvp(grad) vs finite differences of backward"); !e.empty())
      return fail(e);
    // backward with create_graph: the slot's traced gradient, differentiated again along t.
    auto fresh = make_leaves(p, ctx, true, p.leaf_values);
    loss_of(p, run(p, fresh, 0).back(), 0).backward({.create_graph = true});
    const auto traced = fresh[q].grad_tensor();
    ctx->clear_grads();  // traced gradients refer to their leaves: a slot holding one is a cycle
    if (!traced) return fail("backward with create_graph left no traced gradient in leaf q");
    if (auto e = compare(values(*traced), o.grads[q], 1e-10, "create_graph gradient vs backward"); !e.empty())
      return fail(e);
    const auto second = ctx->grad_optional(traced->mul(tangent).reduce_sum(), fresh[q]);
    if (second) {
      if (auto e = compare(values(*second), hv_fd, hv_tol,
                           "grad of the create_graph gradient vs finite differences");
          !e.empty())
        return fail(e);
    } else if (auto e = compare(std::vector<double>(t.size(), 0.0), hv_fd, hv_tol,
                                "no second derivative, but finite differences");
               !e.empty()) {
      return fail(e);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::UnsupportedAdRule) return fail(std::string("second order threw ") + e.what());
  }
  return o;
}

// Batched (every elementwise op large enough to defer): fusion on against fusion off.
std::string check_fusion(const program& p) {
  constexpr std::size_t batch = CpuBackend::fusion_elements + 27;
  std::vector<std::vector<double>> data;
  for (std::size_t k = 0; k < p.leaf_shapes.size(); ++k) {
    std::vector<double> v(p.leaf_values[k].size() * batch);
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = p.leaf_values[k][i % p.leaf_values[k].size()] *
             (1 + 1e-3 * static_cast<double>(i / p.leaf_values[k].size() % 13));
    }
    data.push_back(std::move(v));
  }
  struct result {
    std::vector<std::vector<double>> regs, grads;
  };
  auto run_with = [&](bool fusion) {
    auto ctx = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(2).with_fusion(fusion));
    std::vector<EagerTensor> leaves;
    for (std::size_t k = 0; k < p.leaf_shapes.size(); ++k) {
      leaves.push_back(
          ctx->variable_from(Tensor::from_vec_col_major<double>(run_shape(p, k, batch), data[k])));
    }
    const auto regs = run(p, leaves, batch);
    result r;
    loss_of(p, regs.back(), batch).backward();
    for (const auto& reg : regs) r.regs.push_back(values(reg));
    for (const auto& leaf : leaves)
      r.grads.push_back(leaf.grad() ? values(ctx->constant_from(*leaf.grad())) : std::vector<double>{});
    return r;
  };
  const result on = run_with(true), off = run_with(false);
  for (std::size_t j = 0; j < on.regs.size(); ++j) {
    for (std::size_t i = 0; i < on.regs[j].size(); ++i) {
      const double a = on.regs[j][i], b = off.regs[j][i];
      if (!(a == b || (std::isnan(a) && std::isnan(b)))) {
        std::ostringstream os;
        os.precision(17);
        os << "batched: register " << j << " element " << i << " is " << a << " with fusion, " << b
           << " without";
        return os.str();
      }
    }
  }
  for (std::size_t k = 0; k < on.grads.size(); ++k) {
    if (auto e = compare(on.grads[k], off.grads[k], 1e-12,
                         "batched: gradient of leaf " + std::to_string(k) + " with fusion vs without");
        !e.empty())
      return e;
  }
  return {};
}

std::string check(const program& p, bool fusion, outcome* out = nullptr) {
  try {
    outcome o = check_small(p);
    if (out) *out = o;
    if (!o.failure.empty() || o.skipped) return o.failure;
    if (fusion && p.batchable) return check_fusion(p);
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
  return {};
}

// The shortest failing prefix, with the instructions its output does not use dropped.
program shrink(const program& p, bool fusion) {
  program best = p;
  for (std::size_t n = 1; n < p.code.size(); ++n) {
    program q = prefix(p, n);
    if (!check(q, fusion).empty()) {
      best = q;
      break;
    }
  }
  return best;
}

}  // namespace

TEST_CASE("random eager programs: every transform against finite differences, fusion on against off") {
  const std::size_t count = env_or("TENFERRO_RANDOM_PROGRAMS", 4000);
  const std::size_t first = env_or("TENFERRO_RANDOM_SEED", 1);
  std::optional<std::ofstream> dump;
  if (const char* path = std::getenv("TENFERRO_RANDOM_DUMP"); path && *path) dump.emplace(path);
  std::size_t skipped = 0, batched = 0;
  std::vector<std::size_t> op_count(static_cast<std::size_t>(op_code::sum_to) + 1, 0);
  for (std::size_t k = 0; k < count; ++k) {
    const std::uint64_t seed = first + k;
    const program p = generate(seed, 2 + seed % 11);
    const bool fusion = seed % 4 == 0;  // batched runs are the slow part: one program in four
    outcome o;
    const std::string failure = check(p, fusion, &o);
    if (!failure.empty()) {
      const program small = shrink(p, fusion);
      FAIL_CHECK("random program " << seed << " (rerun: TENFERRO_RANDOM_SEED=" << seed
                                   << " TENFERRO_RANDOM_PROGRAMS=1): " << failure << "\nminimal repro:\n"
                                   << to_cpp(small) << "that is: " << check(small, fusion));
      continue;
    }
    if (o.skipped) {
      ++skipped;
      continue;
    }
    batched += fusion && p.batchable;
    for (const auto& in : p.code) ++op_count[static_cast<std::size_t>(in.op)];
    if (dump) write_json(*dump, p, o.loss, o.grads);
  }
  INFO(count << " programs: " << skipped << " skipped (values not finite or above 1e4), " << batched
             << " also batched with fusion on and off");
  CHECK(skipped <= count / 4);
  for (std::size_t op = 0; op < op_count.size(); ++op) {
    INFO("op " << op_names[op] << " was never checked");
    CHECK((count < 500 || op_count[op] > 0));
  }
}
