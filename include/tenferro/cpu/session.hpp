// BackendSession: provider-neutral tensor operations on plain Tensors (no tape), handed to the
// callback of EagerRuntime::with_execution_session. CpuSession runs them with the CPU kernels
// inside the backend's arena.
#pragma once

#include <tenferro/core/detail/config.hpp>
#include <tenferro/core/shape.hpp>
#include <tenferro/cpu/backend.hpp>
#include <tenferro/tensor/tensor.hpp>
#if TENFERRO_HEADER_ONLY  // else compiled once by <tenferro/separate_compilation.hpp>
#include <tenferro/cpu/contract.hpp>
#include <tenferro/cpu/fused.hpp>
#include <tenferro/cpu/layout.hpp>
#include <tenferro/cpu/reduce.hpp>
#endif

#include <optional>
#include <string_view>
#include <utility>

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
  // Reductions (nullopt: every axis), layout, NumPy's matmul.
  virtual Tensor reduce_sum(const Tensor& a, const std::optional<Axes>& axes = std::nullopt) = 0;
  virtual Tensor reshape(const Tensor& a, const Shape& shape) = 0;
  virtual Tensor transpose(const Tensor& a, const Axes& perm) = 0;
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
  Tensor add(const Tensor& a, const Tensor& b) override;
  Tensor sub(const Tensor& a, const Tensor& b) override;
  Tensor mul(const Tensor& a, const Tensor& b) override;
  Tensor div(const Tensor& a, const Tensor& b) override;
  Tensor neg(const Tensor& a) override;
  Tensor exp(const Tensor& a) override;
  Tensor log(const Tensor& a) override;
  Tensor reduce_sum(const Tensor& a, const std::optional<Axes>& axes) override;
  Tensor reshape(const Tensor& a, const Shape& shape) override;
  Tensor transpose(const Tensor& a, const Axes& perm) override;
  Tensor matmul(const Tensor& a, const Tensor& b) override;
};

// Runs f(BackendSession&) with a CpuSession inside `backend`'s arena and returns f's result.
template <class F>
decltype(auto) run_session(const CpuBackend& backend, F&& f) {
  return backend.execute([&]() -> decltype(auto) {
    CpuSession session;
    return std::forward<F>(f)(static_cast<BackendSession&>(session));
  });
}

#if TENFERRO_HEADER_ONLY
TENFERRO_INLINE Tensor CpuSession::add(const Tensor& a, const Tensor& b) {
  return elementwise<expr::ops::add>(a, b, "add");
}
TENFERRO_INLINE Tensor CpuSession::sub(const Tensor& a, const Tensor& b) {
  return elementwise<expr::ops::sub>(a, b, "sub");
}
TENFERRO_INLINE Tensor CpuSession::mul(const Tensor& a, const Tensor& b) {
  return elementwise<expr::ops::mul>(a, b, "mul");
}
TENFERRO_INLINE Tensor CpuSession::div(const Tensor& a, const Tensor& b) {
  return elementwise<expr::ops::div>(a, b, "div");
}
TENFERRO_INLINE Tensor CpuSession::neg(const Tensor& a) { return elementwise<expr::ops::neg>(a, "neg"); }
TENFERRO_INLINE Tensor CpuSession::exp(const Tensor& a) { return elementwise<expr::ops::exp>(a, "exp"); }
TENFERRO_INLINE Tensor CpuSession::log(const Tensor& a) { return elementwise<expr::ops::log>(a, "log"); }
TENFERRO_INLINE Tensor CpuSession::reduce_sum(const Tensor& a, const std::optional<Axes>& axes) {
  return cpu::reduce(Reduce::sum, a, reduce_mask("reduce_sum", a.shape(), axes), "reduce_sum");
}
TENFERRO_INLINE Tensor CpuSession::reshape(const Tensor& a, const Shape& shape) {
  return cpu::reshape(a, shape, "reshape");
}
TENFERRO_INLINE Tensor CpuSession::transpose(const Tensor& a, const Axes& perm) {
  return cpu::transpose(a, perm, "transpose");
}
TENFERRO_INLINE Tensor CpuSession::matmul(const Tensor& a, const Tensor& b) {
  return cpu::matmul(a, b, "matmul");
}
#endif  // TENFERRO_HEADER_ONLY

}  // namespace cpu
}  // namespace tenferro
