// Error and ErrorKind: every failure in tenferro is a tenferro::Error whose message names the
// operation, the argument and the shapes involved. An underlying cause is attached with
// std::throw_with_nested (see Error::throw_with_cause) and read back with Error::cause().
#pragma once

#include <exception>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace tenferro {

enum class ErrorKind {
  InvalidArgument,    // an argument is out of its domain (e.g. zero threads)
  Unsupported,        // a valid request this build or backend cannot serve
  DtypeMismatch,      // element types differ where they must agree
  ShapeMismatch,      // shapes differ or do not broadcast
  Validation,         // a structural check failed (axis out of range, bad permutation, ...)
  RuntimeState,       // the runtime is in a state that forbids the call
  ContextMismatch,    // tensors from different eager AD contexts meet
  NonScalarGrad,      // a gradient of a non-scalar output was requested
  UnsupportedAdRule,  // an op has no derivative rule for the requested mode
  Inactive,           // the output does not depend on the requested input
  NotUnique,          // a name or key that must be unique is taken
  Extension,          // an extension module failed
};

constexpr std::string_view error_kind_name(ErrorKind k) noexcept {
  switch (k) {
    case ErrorKind::InvalidArgument:
      return "InvalidArgument";
    case ErrorKind::Unsupported:
      return "Unsupported";
    case ErrorKind::DtypeMismatch:
      return "DtypeMismatch";
    case ErrorKind::ShapeMismatch:
      return "ShapeMismatch";
    case ErrorKind::Validation:
      return "Validation";
    case ErrorKind::RuntimeState:
      return "RuntimeState";
    case ErrorKind::ContextMismatch:
      return "ContextMismatch";
    case ErrorKind::NonScalarGrad:
      return "NonScalarGrad";
    case ErrorKind::UnsupportedAdRule:
      return "UnsupportedAdRule";
    case ErrorKind::Inactive:
      return "Inactive";
    case ErrorKind::NotUnique:
      return "NotUnique";
    case ErrorKind::Extension:
      return "Extension";
  }
  return "Unknown";
}

inline std::ostream& operator<<(std::ostream& os, ErrorKind k) { return os << error_kind_name(k); }

class Error : public std::runtime_error {
 public:
  // what() reads "<Kind> in <op>: <detail>", e.g.
  // "ShapeMismatch in Tensor::from_vec_col_major: argument 'data' has 5 elements, shape [2, 3] needs 6".
  Error(ErrorKind kind, std::string op, std::string detail)
      : std::runtime_error(std::string(error_kind_name(kind)) + " in " + op + ": " + detail),
        kind_(kind),
        op_(std::move(op)),
        detail_(std::move(detail)) {}

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& op() const noexcept { return op_; }
  const std::string& detail() const noexcept { return detail_; }

  // The nested cause, or nullptr. Set when the error was thrown with throw_with_cause.
  std::exception_ptr cause() const noexcept {
    if (const auto* nested = dynamic_cast<const std::nested_exception*>(this)) {
      return nested->nested_ptr();
    }
    return nullptr;
  }

  // Throws `error` with the exception currently being handled nested inside it. Call from a
  // catch block.
  [[noreturn]] static void throw_with_cause(Error error) { std::throw_with_nested(std::move(error)); }

 private:
  ErrorKind kind_;
  std::string op_;
  std::string detail_;
};

}  // namespace tenferro
