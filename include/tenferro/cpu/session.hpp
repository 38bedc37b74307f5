// BackendSession: provider-neutral tensor operations on plain Tensors (no tape), handed to the
// callback of EagerRuntime::with_execution_session. CpuSession runs them with the CPU kernels
// inside the backend's arena.
#pragma once

#include <tenferro/cpu/backend.hpp>
#include <tenferro/cpu/fused.hpp>
#include <tenferro/cpu/layout.hpp>
#include <tenferro/cpu/reduce.hpp>

#include <optional>
#include <string_view>

namespace tenferro {

class BackendSession {
 public:
  virtual ~BackendSession() = default;
  virtual std::string_view backend_name() const noexcept = 0;

  // Elementwise, NumPy broadcasting, f32/f64 (mixed: f64).
  virtual Tensor add(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor sub(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor mul(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor div(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor neg(const Tensor& a) = 0;
  virtual Tensor exp(const Tensor& a) = 0;
  virtual Tensor log(const Tensor& a) = 0;
  // Reductions (nullopt: every axis), layout, linear algebra.
  virtual Tensor reduce_sum(const Tensor& a, const std::optional<cpu::Axes>& axes = std::nullopt) = 0;
  virtual Tensor reshape(const Tensor& a, const Shape& shape) = 0;
  virtual Tensor transpose(const Tensor& a, const cpu::Axes& perm) = 0;
  virtual Tensor matmul(const Tensor& a, const Tensor& b) = 0;

 protected:
  BackendSession() = default;
  BackendSession(const BackendSession&) = default;
  BackendSession& operator=(const BackendSession&) = default;
};

namespace cpu {

class CpuSession final : public BackendSession {
 public:
  std::string_view backend_name() const noexcept override { return "cpu"; }

  Tensor add(const Tensor& a, const Tensor& b) override { return elementwise<expr::ops::add>(a, b, "add"); }
  Tensor sub(const Tensor& a, const Tensor& b) override { return elementwise<expr::ops::sub>(a, b, "sub"); }
  Tensor mul(const Tensor& a, const Tensor& b) override { return elementwise<expr::ops::mul>(a, b, "mul"); }
  Tensor div(const Tensor& a, const Tensor& b) override { return elementwise<expr::ops::div>(a, b, "div"); }
  Tensor neg(const Tensor& a) override { return elementwise<expr::ops::neg>(a, "neg"); }
  Tensor exp(const Tensor& a) override { return elementwise<expr::ops::exp>(a, "exp"); }
  Tensor log(const Tensor& a) override { return elementwise<expr::ops::log>(a, "log"); }
  Tensor reduce_sum(const Tensor& a, const std::optional<Axes>& axes) override {
    return cpu::reduce(Reduce::sum, a, reduce_mask("reduce_sum", a.shape(), axes), "reduce_sum");
  }
  Tensor reshape(const Tensor& a, const Shape& shape) override { return cpu::reshape(a, shape, "reshape"); }
  Tensor transpose(const Tensor& a, const Axes& perm) override {
    return cpu::transpose(a, perm, "transpose");
  }
  Tensor matmul(const Tensor& a, const Tensor& b) override { return cpu::matmul(a, b, "matmul"); }
};

}  // namespace cpu
}  // namespace tenferro
