// ad/deferred: large elementwise ops run later, together, block by block: values bit-identical
// to op by op for any thread count, one pass per chain, gradients through fused backward sweeps,
// and parameters of one element broadcast from registers.
#include "../normal_logpdf.hpp"
#include "../settings.hpp"
#include "eager_testing.hpp"

#include <tenferro/ad/deferred.hpp>  // detail::ad::deferred_passes
#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace tenferro;
using namespace tenferro::test;

namespace {

// x, y of n elements in [-1, 1] on a runtime with fusion on or off and `threads` threads.
struct fusion_inputs {
  std::shared_ptr<EagerRuntime> rt;
  EagerTensor x, y;
  fusion_inputs(bool fuse, std::size_t threads, DType dtype, std::size_t n) : x(make(fuse, threads)), y(x) {
    std::mt19937 rng(7);
    auto values = [&] {
      std::vector<double> v = random_values(n, {-1, 1}, rng);
      return Tensor::from_vec_col_major<double>({n}, v);
    };
    x = EagerTensor::requires_grad_in(cpu::cast(values(), dtype), rt);
    y = EagerTensor::requires_grad_in(cpu::cast(values(), dtype), rt);
  }
  EagerTensor make(bool fuse, std::size_t threads) {
    rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(threads).with_fusion(fuse));
    return EagerTensor::from_tensor_in(Tensor::zeros({1}), rt);
  }
};

// sin(x) and cos(x) in one pass share one sincos; cos(y) has no partner.
EagerTensor fusion_loss_body(const EagerTensor& x, const EagerTensor& y) {
  return (x.sin() * y + (x * y).exp()).tanh() * 0.5 - (y.square() + 1.0).log() + y.cos() * x.cos();
}

}  // namespace

TEST_CASE("deferred fusion: values bit-identical to op by op, one pass, any thread count") {
  // The largest size writes with streaming stores (a pass writing more than 4 MB), its last tile
  // not whole cache lines.
  const store_threshold rule(std::size_t(4) << 20);
  for (const DType dtype : {DType::F64, DType::F32}) {
    for (const std::size_t n : {std::size_t(16384), std::size_t(100003), (std::size_t(1) << 20) + 3}) {
      fusion_inputs off(false, 1, dtype, n);
      const Tensor want = fusion_loss_body(off.x, off.y).materialized();
      const Tensor want_sum = fusion_loss_body(off.x, off.y).reduce_sum().materialized();
      for (const std::size_t threads : {1, 2}) {
        fusion_inputs on(true, threads, dtype, n);
        const EagerTensor body = fusion_loss_body(on.x, on.y);
        CHECK(body.state()->deferred());
        CHECK(body.shape() == Shape{n});  // shape and dtype without computing
        CHECK(body.dtype() == dtype);
        const auto before = detail::ad::deferred_passes().load();
        const auto streamed = detail::streamed_passes().load();
        const Tensor got = body.materialized();
        CHECK(detail::ad::deferred_passes().load() == before + 1);  // the whole chain in one pass
        CHECK(detail::streamed_passes().load() == streamed + (n * dtype_size(dtype) > (std::size_t(4) << 20)));
        CHECK_FALSE(body.state()->deferred());
        CHECK(as_doubles(got) == as_doubles(want));
        // A sum over every element of a deferred value never writes that value, and sums the
        // same chunks in the same order.
        const EagerTensor again = fusion_loss_body(on.x, on.y);
        CHECK(as_doubles(again.reduce_sum().materialized()) == as_doubles(want_sum));
        CHECK(again.state()->deferred());
      }
    }
  }
}

TEST_CASE("deferred fusion: backward and grad agree with op by op and with the analytic gradient") {
  // 50001: gradients written through the caches; 2^20 + 3 doubles: with streaming stores.
  const store_threshold rule(std::size_t(4) << 20);
  for (const std::size_t n : {std::size_t(50001), (std::size_t(1) << 20) + 3}) {
    INFO("n = " << n);
    auto run = [&](bool fuse, std::size_t threads) {
      fusion_inputs in(fuse, threads, DType::F64, n);
      (in.x.sin() * in.y + (in.x * in.y).exp()).reduce_sum().backward();
      return std::pair{as_doubles(*in.x.grad()), as_doubles(*in.y.grad())};
    };
    const auto [gx, gy] = run(true, 1);
    const auto [gx_off, gy_off] = run(false, 1);
    const auto [gx2, gy2] = run(true, 2);
    CHECK(gx2 == gx);  // bit-identical for 1 and 2 threads
    CHECK(gy2 == gy);
    require_close(gx, gx_off, 1e-14, "gx fused vs op by op");
    require_close(gy, gy_off, 1e-14, "gy fused vs op by op");
    fusion_inputs in(false, 1, DType::F64, n);
    const auto x = as_doubles(in.x.materialized()), y = as_doubles(in.y.materialized());
    std::vector<double> ax(n), ay(n);
    for (std::size_t i = 0; i < n; ++i) {
      ax[i] = std::cos(x[i]) * y[i] + std::exp(x[i] * y[i]) * y[i];
      ay[i] = std::sin(x[i]) + std::exp(x[i] * y[i]) * x[i];
    }
    require_close(gx, ax, 1e-13, "gx analytic");
    require_close(gy, ay, 1e-13, "gy analytic");
  }
  const std::size_t n = 50001;

  // The functional transforms: grad of a deferred loss, and grad of grad (recorded, then fused).
  fusion_inputs on(true, 1, DType::F64, n);
  const EagerTensor g = on.rt->grad((on.x * on.x * on.x).reduce_sum(), on.x);  // 3 x^2
  const EagerTensor h = on.rt->grad(g.reduce_sum(), on.x);                     // 6 x
  const auto xs = as_doubles(on.x.materialized());
  std::vector<double> g_want(n), h_want(n);
  for (std::size_t i = 0; i < n; ++i) {
    g_want[i] = 3 * xs[i] * xs[i];
    h_want[i] = 6 * xs[i];
  }
  require_close(as_doubles(g.materialized()), g_want, 1e-14, "grad of x^3");
  require_close(as_doubles(h.materialized()), h_want, 1e-14, "grad of grad of x^3");
}

TEST_CASE("deferred fusion: several values written by one streaming pass, read by later ops in it") {
  // 2^20 + 3 elements, more than 4 MB written: every value goes out with streaming stores, the last
  // tile by an ordinary copy. sin(x) and cos(x) are a written sincos pair; x * y is written and also
  // read by exp in the same pass.
  const store_threshold rule(std::size_t(4) << 20);
  for (const DType dtype : {DType::F64, DType::F32}) {
    const std::size_t n = (std::size_t(1) << 20) + 3;
    fusion_inputs off(false, 1, dtype, n);
    const std::vector<double> want_sin = as_doubles(off.x.sin().materialized()),
                              want_cos = as_doubles(off.x.cos().materialized()),
                              want_xy = as_doubles((off.x * off.y).materialized()),
                              want_exp = as_doubles((off.x * off.y).exp().materialized());
    for (const std::size_t threads : {1, 2}) {
      INFO("dtype " << dtype << ", threads " << threads);
      fusion_inputs on(true, threads, dtype, n);
      const EagerTensor s = on.x.sin(), c = on.x.cos(), xy = on.x * on.y, e = xy.exp();
      const std::array<const detail::ad::tensor_state*, 4> states{s.state().get(), c.state().get(),
                                                                  xy.state().get(), e.state().get()};
      const auto before = detail::ad::deferred_passes().load();
      detail::ad::fill_deferred(states);
      CHECK(detail::ad::deferred_passes().load() == before + 1);
      CHECK(as_doubles(s.materialized()) == want_sin);
      CHECK(as_doubles(c.materialized()) == want_cos);
      CHECK(as_doubles(xy.materialized()) == want_xy);
      CHECK(as_doubles(e.materialized()) == want_exp);
    }
  }
}

TEST_CASE("deferred fusion: inputs are released once computed, long chains are bounded, errors stay eager") {
  fusion_inputs in(true, 1, DType::F64, 20000);
  const NoGradGuard no_grad;
  const EagerTensor x = in.x.detach();
  EagerTensor y = x.sin();
  CHECK(x.state().use_count() == 2);  // x and y's pending op
  y.materialized();
  CHECK(x.state().use_count() == 1);
  // 200 ops deferred one after another: computed in passes of at most max_cone ops, same values.
  const auto before = detail::ad::deferred_passes().load();
  EagerTensor acc = x;
  for (int k = 0; k < 200; ++k) acc = (acc * 0.5).sin() + x;
  const Tensor fused = acc.materialized();
  CHECK(detail::ad::deferred_passes().load() - before >= 200 * 3 / detail::ad::max_cone);
  fusion_inputs off(false, 1, DType::F64, 20000);
  EagerTensor ref = off.x.detach();
  for (int k = 0; k < 200; ++k) ref = (ref * 0.5).sin() + off.x.detach();
  CHECK(as_doubles(fused) == as_doubles(ref.materialized()));
  // Validation happens when the op is called, not when it runs.
  const EagerTensor other = EagerTensor::from_tensor_in(Tensor::zeros({19999}), in.rt);
  CHECK_THROWS_AS(x.add(other), Error);
  CHECK_THROWS_AS(x.sin().broadcast_to({3, 20000}).add(x.reshape({2, 10000})), Error);
}

TEST_CASE("deferred fusion: a product with a broadcast 1 reads its other factor, exactly") {
  const std::size_t n = 30001;
  auto run = [&](bool fuse, double c) {
    fusion_inputs in(fuse, 1, DType::F64, n);
    const NoGradGuard no_grad;
    const EagerTensor s = in.x.sin();  // deferred when fusing
    const EagerTensor ones = EagerTensor::from_tensor_in(Tensor::full({}, c), in.rt).broadcast_to({n});
    const EagerTensor a = ones * s;           // skipped by the pass when c == 1
    const EagerTensor b = (s * ones) * in.y;  // reads sin(x) directly when c == 1
    const EagerTensor r = a + b;
    const auto before = detail::ad::deferred_passes().load();
    std::vector<double> got = as_doubles(r.materialized());
    if (fuse) {
      CHECK(detail::ad::deferred_passes().load() == before + 1);
      CHECK(a.state()->deferred());  // never written, never requested
    }
    return got;
  };
  for (const double c : {1.0, 2.0}) {
    INFO("fill " << c);
    const std::vector<double> fused = run(true, c), by_op = run(false, c);
    CHECK(fused == by_op);  // bit for bit: x * 1 == x
    fusion_inputs in(false, 1, DType::F64, n);
    const auto x = as_doubles(in.x.materialized()), y = as_doubles(in.y.materialized());
    for (std::size_t i = 0; i < n; i += 997) {  // xsimd's sin and glibc's differ in the last bit
      CHECK(fused[i] == Approx(std::sin(x[i]) * c + std::sin(x[i]) * c * y[i]).epsilon(1e-14).margin(1e-15));
    }
  }
  // The backward of a full sum broadcasts a 1: the fused gradients still agree with op by op.
  auto grads = [&](bool fuse) {
    fusion_inputs in(fuse, 1, DType::F64, n);
    ((in.x * in.y).exp() + in.x.sin() * in.y).reduce_sum().backward();
    return std::pair{as_doubles(*in.x.grad()), as_doubles(*in.y.grad())};
  };
  const auto [gx, gy] = grads(true);
  const auto [gx_off, gy_off] = grads(false);
  require_close(gx, gx_off, 1e-14, "gx");
  require_close(gy, gy_off, 1e-14, "gy");
}

TEST_CASE("deferred fusion: parameters of one element broadcast from registers, their gradients summed") {
  // The normal log-density op by op, mu and sigma rank-0 leaves against 100003 data points.
  const std::size_t n = 100003;
  std::mt19937 rng(11);
  const std::vector<double> data = random_values(n, {-2, 3}, rng);
  struct result {
    std::vector<double> value, dmu, dsigma;
    std::uint64_t forward_passes;
  };
  auto run = [&](bool fuse, std::size_t threads) {
    auto rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(threads).with_fusion(fuse));
    const auto x = EagerTensor::from_tensor_in(make({n}, data, DType::F64), rt);
    const auto mu = EagerTensor::requires_grad_in(Tensor::full({}, 0.3), rt);
    const auto sigma = EagerTensor::requires_grad_in(Tensor::full({}, 1.7), rt);
    const EagerTensor centred = x - mu;
    CHECK(centred.state()->deferred() == fuse);
    const auto before = detail::ad::deferred_passes().load();
    const EagerTensor loss = (-0.5 * (centred / sigma).square() - sigma.log()).reduce_sum();
    result r{as_doubles(loss.materialized()), {}, {}, detail::ad::deferred_passes().load() - before};
    loss.backward();
    r.dmu = as_doubles(*mu.grad());
    r.dsigma = as_doubles(*sigma.grad());
    CHECK(mu.grad()->shape() == Shape{});
    return r;
  };
  const result on = run(true, 1), on2 = run(true, 2), off = run(false, 1);
  CHECK(on.forward_passes == 1);  // the chain and its sum: one pass, nothing written
  CHECK(off.forward_passes == 0);
  CHECK(on2.value == on.value);  // bit for bit on 1 and 2 threads
  CHECK(on2.dmu == on.dmu);
  CHECK(on2.dsigma == on.dsigma);
  const tenferro::test::normal_logpdf want(data, 0.3, 1.7);
  for (const result* r : {&on, &off}) {
    require_close(r->value, {want.value}, 1e-12, "value");
    require_close(r->dmu, {want.dmu}, 1e-11, "d/dmu");
    require_close(r->dsigma, {want.dsigma}, 1e-11, "d/dsigma");
  }
  require_close(on.dsigma, off.dsigma, 1e-13, "d/dsigma fused vs op by op");

  // Not deferred, still right: a parameter of another dtype, or of a higher rank than the data.
  auto rt = EagerRuntime::with_cpu_backend(CpuBackend::with_threads(1));
  const auto x = EagerTensor::from_tensor_in(make({n}, data, DType::F64), rt);
  const auto half = EagerTensor::from_tensor_in(Tensor::full({}, 0.5, DType::F32), rt);
  const EagerTensor scaled = x * half;
  CHECK_FALSE(scaled.state()->deferred());
  CHECK(as_doubles(scaled.materialized())[n - 1] == data[n - 1] * 0.5);
  const auto wide = EagerTensor::requires_grad_in(Tensor::full({1, 1}, 2.0), rt);
  const EagerTensor shifted = x + wide;
  CHECK(shifted.shape() == Shape{1, n});
  shifted.reduce_sum().backward();
  CHECK(wide.grad()->shape() == Shape{1, 1});
  CHECK(as_doubles(*wide.grad()) == std::vector<double>{double(n)});
}
