// Complex dtypes through the eager ops: values against std::complex, and gradients in PyTorch's
// convention (dL/dRe z + i dL/dIm z for a real loss L) against central differences taken on the
// real and imaginary parts separately, in both rule forms (kernels; recorded, create_graph), plus
// jvp along complex directions, mixed real and complex operands, and the refusals.
#include "../errors.hpp"

#include <tenferro/eager.hpp>

#include <catch2/catch.hpp>

#include <complex>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace tenferro;
using namespace tenferro::test;

namespace {

using C = std::complex<double>;
using Fn = std::function<EagerTensor(const EagerTensor&)>;

std::vector<C> random_complex(std::size_t n, unsigned seed, double lo = 0.3, double hi = 1.4) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::bernoulli_distribution coin(0.5);
  std::vector<C> v(n);
  for (auto& z : v) z = C((coin(rng) ? -1 : 1) * u(rng), (coin(rng) ? -1 : 1) * u(rng));
  return v;
}

EagerTensor complex_in(const std::shared_ptr<EagerRuntime>& ctx, const std::vector<C>& v, DType dtype,
                       bool leaf) {
  const Tensor t = cpu::cast(Tensor::from_vec_col_major<C>({v.size()}, v), dtype);
  return leaf ? EagerTensor::requires_grad_in(t, ctx) : EagerTensor::from_tensor_in(t, ctx);
}

std::vector<C> complex_values(const EagerTensor& t) {
  const Tensor c = cpu::cast(t.materialized(), DType::C64);
  const auto s = c.as_slice<C>();
  return {s.begin(), s.end()};
}

double real_scalar(const EagerTensor& t) {
  return cpu::cast(t.materialized(), DType::F64).as_slice<double>()[0];
}

// A real loss of a complex-valued f: sum(real(f) * w1 + imag(f) * w2), weights fixed.
EagerTensor loss_of(const EagerTensor& f) {
  if (!is_complex(f.dtype())) return (f * 0.75).reduce_sum();
  return (f.real() * 0.75 + f.imag() * -1.25).reduce_sum();
}

// backward() (and grad while recording) against central differences on Re and Im of every element.
void check_gradient(const std::string& name, const Fn& f, DType dtype, const std::vector<C>& z0) {
  INFO(name << " in " << dtype_name(dtype));
  auto ctx = EagerRuntime::create();
  const double h = dtype == DType::C64 ? 1e-6 : 1e-3;
  const double tol = dtype == DType::C64 ? 1e-6 : 2e-2;
  const auto z = complex_in(ctx, z0, dtype, true);
  const EagerTensor loss = loss_of(f(z));
  REQUIRE(!is_complex(loss.dtype()));
  loss.backward();
  const auto g = complex_values(EagerTensor::from_tensor_in(*z.grad(), ctx));
  const auto traced = complex_values(ctx->grad(loss, z));  // recorded rules
  REQUIRE(g.size() == z0.size());
  auto at = [&](std::vector<C> v) {
    const NoGradGuard no_grad;
    return real_scalar(loss_of(f(complex_in(ctx, v, dtype, false))));
  };
  for (std::size_t k = 0; k < z0.size(); ++k) {
    std::vector<C> p = z0, m = z0;
    p[k] += C(h, 0);
    m[k] -= C(h, 0);
    const double d_re = (at(p) - at(m)) / (2 * h);
    p = z0, m = z0;
    p[k] += C(0, h);
    m[k] -= C(0, h);
    const double d_im = (at(p) - at(m)) / (2 * h);
    INFO("element " << k << ": got " << g[k] << ", finite differences (" << d_re << ", " << d_im << ")");
    REQUIRE(std::abs(g[k] - C(d_re, d_im)) <= tol * (1 + std::abs(C(d_re, d_im))));
    REQUIRE(std::abs(traced[k] - g[k]) <= 1e-12 * (1 + std::abs(g[k])) + (dtype == DType::C32 ? 1e-5 : 0.0));
  }
  // jvp along a complex direction t: the directional derivative of the loss.
  const auto t0 = random_complex(z0.size(), 77, -1.0, 1.0);
  const auto tangent = complex_in(ctx, t0, dtype, false);
  const double jvp = real_scalar(ctx->jvp(loss, z, tangent));
  std::vector<C> p = z0, m = z0;
  for (std::size_t k = 0; k < z0.size(); ++k) {
    p[k] += h * t0[k];
    m[k] -= h * t0[k];
  }
  const double fd = (at(p) - at(m)) / (2 * h);
  CHECK(std::abs(jvp - fd) <= tol * (1 + std::abs(fd)));
}

}  // namespace

TEST_CASE("complex values of the elementwise ops and the complex parts match std::complex", "[complex]") {
  auto ctx = EagerRuntime::create();
  for (const DType dtype : {DType::C32, DType::C64}) {
    INFO(dtype_name(dtype));
    const double tol = dtype == DType::C64 ? 1e-13 : 3e-6;
    const auto a0 = random_complex(37, 1), b0 = random_complex(37, 2);
    const auto a = complex_in(ctx, a0, dtype, false), b = complex_in(ctx, b0, dtype, false);
    const auto r = complex_values(a.exp() * b + a.log() / a - b.sqrt() + a.tanh() + a.sin() * b.cos() +
                                  a.square() - a * 2.0 + (-a) / b + a.pow(b));
    const auto parts = complex_values(a.conj() + a.abs().to(dtype) + a.real().to(dtype) * b.imag().to(dtype));
    for (std::size_t i = 0; i < 37; ++i) {
      const C z = complex_values(a)[i], w = complex_values(b)[i];
      const C want = std::exp(z) * w + std::log(z) / z - std::sqrt(w) + std::tanh(z) +
                     std::sin(z) * std::cos(w) + z * z - z * 2.0 - z / w + std::pow(z, w);
      REQUIRE(std::abs(r[i] - want) <= tol * 20 * (1 + std::abs(want)));
      const C pw = std::conj(z) + std::abs(z) + z.real() * w.imag();
      REQUIRE(std::abs(parts[i] - pw) <= tol * 4 * (1 + std::abs(pw)));
    }
    CHECK(a.dtype() == dtype);
    CHECK(a.abs().dtype() == cpu::real_dtype(dtype));
    CHECK(a.imag().dtype() == cpu::real_dtype(dtype));
    C total = 0;
    for (const C z : complex_values(a)) total += z;
    CHECK(std::abs(complex_values(a.reduce_sum())[0] - total) <= tol * 40);
    CHECK(std::abs(complex_values(a.reduce_mean())[0] - total / 37.0) <= tol * 40);
  }
}

TEST_CASE("complex gradients follow PyTorch's convention: unary ops and parts", "[complex]") {
  const auto z0 = random_complex(6, 3);
  const std::vector<std::pair<std::string, Fn>> ops{
      {"exp", [](const EagerTensor& z) { return z.exp(); }},
      {"log", [](const EagerTensor& z) { return z.log(); }},
      {"sqrt", [](const EagerTensor& z) { return z.sqrt(); }},
      {"sin", [](const EagerTensor& z) { return z.sin(); }},
      {"cos", [](const EagerTensor& z) { return z.cos(); }},
      {"tanh", [](const EagerTensor& z) { return z.tanh(); }},
      {"square", [](const EagerTensor& z) { return z.square(); }},
      {"neg", [](const EagerTensor& z) { return -z; }},
      {"scale and shift", [](const EagerTensor& z) { return z * 2.5 + 1.0; }},
      {"conj", [](const EagerTensor& z) { return z.conj() * z.exp(); }},  // not holomorphic
      {"real", [](const EagerTensor& z) { return z.real(); }},
      {"imag", [](const EagerTensor& z) { return z.imag().square(); }},
      {"abs", [](const EagerTensor& z) { return z.abs(); }},
      {"sum", [](const EagerTensor& z) { return (z * z.conj()).reduce_sum().to(DType::C64) * z; }},
  };
  for (const auto& [name, f] : ops) {
    check_gradient(name, f, DType::C64, z0);
    check_gradient(name, f, DType::C32, z0);
  }
}

TEST_CASE("complex gradients of binary ops and of real operands of complex computations", "[complex]") {
  const auto z0 = random_complex(5, 4);
  auto ctx = EagerRuntime::create();
  const auto w = complex_in(ctx, random_complex(5, 5), DType::C64, false);
  const auto x = EagerTensor::from_vec_col_major_in<double>({5}, {0.5, -1.5, 2.0, 0.25, -0.75}, ctx);
  check_gradient(
      "mul", [&](const EagerTensor& z) { return z * w.detach_into(z.context()); }, DType::C64, z0);
  check_gradient(
      "div", [&](const EagerTensor& z) { return w.detach_into(z.context()) / z; }, DType::C64, z0);
  check_gradient(
      "sub", [&](const EagerTensor& z) { return w.detach_into(z.context()) - z * z; }, DType::C64, z0);
  check_gradient(
      "with a real operand", [&](const EagerTensor& z) { return (z * x.detach_into(z.context())).exp(); },
      DType::C64, z0);
  // A real leaf in a complex computation gets a real gradient: d/dx sum(real(x z)) = real(z).
  const auto xl =
      EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({5}, {1, 2, 3, 4, 5}), ctx);
  const auto zc = complex_in(ctx, z0, DType::C64, false);
  (xl * zc).real().reduce_sum().backward();
  REQUIRE(xl.grad()->dtype() == DType::F64);
  for (std::size_t k = 0; k < 5; ++k) CHECK(xl.grad()->as_slice<double>()[k] == Approx(z0[k].real()));
  // A real leaf made complex with to(): the gradient comes back as the real part.
  const auto xr = EagerTensor::requires_grad_in(Tensor::from_vec_col_major<double>({2}, {3, -4}), ctx);
  const auto i = EagerTensor::from_tensor_in(Tensor::from_vec_col_major<C>({}, {C(0, 1)}), ctx);
  (xr.to(DType::C64) * i).imag().reduce_sum().backward();  // imag(i x) = x
  CHECK(xr.grad()->as_slice<double>()[0] == 1.0);
  CHECK(xr.grad()->as_slice<double>()[1] == 1.0);
}

TEST_CASE("complex refusals: a complex loss, ops without complex kernels, imag of a real tensor",
          "[complex]") {
  auto ctx = EagerRuntime::create();
  const auto z = complex_in(ctx, random_complex(3, 6), DType::C64, true);
  const std::string msg = message_of([&] { z.reduce_sum().backward(); });
  CHECK(msg.rfind("DtypeMismatch in backward", 0) == 0);
  CHECK(msg.find("real loss") != std::string::npos);
  CHECK(message_of([&] { (void)z.maximum(z); }).rfind("Unsupported in maximum", 0) == 0);
  CHECK(message_of([&] { (void)z.reduce_max(); }).find("c64") != std::string::npos);
  CHECK(kind_of([&] { (void)z.sigmoid(); }) == ErrorKind::Unsupported);
  // pow of complex values computes but has no complex derivative rule yet.
  const auto p = z.pow(z);
  CHECK(kind_of([&] { p.real().reduce_sum().backward(); }) == ErrorKind::Unsupported);
  const auto x = EagerTensor::from_vec_col_major_in<double>({2}, {1, 2}, ctx);
  CHECK(kind_of([&] { (void)x.imag(); }) == ErrorKind::Unsupported);
  CHECK(x.real().materialized().shares_storage_with(x.materialized()));
  // The runtime stays usable.
  (z * z).abs().reduce_sum().backward();
  CHECK(z.grad()->dtype() == DType::C64);
}
