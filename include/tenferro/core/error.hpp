// Error and ErrorKind: every failure in tenferro is a tenferro::Error whose message names the
// operation, the argument and the shapes involved. An underlying cause is attached with
// std::throw_with_nested (see Error::throw_with_cause) and read back with Error::cause().
// The library throws through throw_error (below), which builds the message out of line.
#pragma once

#include <tenferro/core/detail/config.hpp>

#include <concepts>
#include <cstddef>
#include <exception>
#include <initializer_list>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

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
  ResourceExhausted,  // memory for a result could not be allocated
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
    case ErrorKind::ResourceExhausted:
      return "ResourceExhausted";
  }
  return "Unknown";
}

inline std::ostream& operator<<(std::ostream& os, ErrorKind k) { return os << error_kind_name(k); }

class Error : public std::runtime_error {
 public:
  // what() reads "<Kind> in <op>: <detail>", e.g.
  // "ShapeMismatch in Tensor::from_vec_col_major: argument 'data' has 5 elements, shape [2, 3] needs 6".
  Error(ErrorKind kind, std::string op, std::string detail)
      : std::runtime_error(message(kind, op, detail)),
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
  static std::string message(ErrorKind kind, std::string_view op, std::string_view detail) {
    const std::string_view name = error_kind_name(kind);
    std::string m;
    m.reserve(name.size() + op.size() + detail.size() + 6);
    m.append(name).append(" in ").append(op).append(": ").append(detail);
    return m;
  }

  ErrorKind kind_;
  std::string op_;
  std::string detail_;
};

namespace detail {

inline void append_number(std::string& out, std::size_t v) {
  char digits[20];  // 2^64 - 1 has 20
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n != 0) out += digits[--n];
}

// Appends "[2, 3]" (a rank-0 shape: "[]").
inline void append_shape(std::string& out, std::span<const std::size_t> shape) {
  out += '[';
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) out += ", ";
    append_number(out, shape[i]);
  }
  out += ']';
}

// A count or an index in a message: not a bool, a char or a signed value.
template <class U>
concept count = std::unsigned_integral<U> && !std::is_same_v<U, bool> && !std::is_same_v<U, char>;

// One piece of an error message: text, a count or index, or a shape (printed "[2, 3]"). Holds
// views: a braced list of parts is read within the full expression of its throw_error call.
class message_part {
 public:
  message_part(const char* text) noexcept : text_(text) {}         // NOLINT(google-explicit-constructor)
  message_part(std::string_view text) noexcept : text_(text) {}    // NOLINT(google-explicit-constructor)
  message_part(const std::string& text) noexcept : text_(text) {}  // NOLINT(google-explicit-constructor)
  template <count U>
  message_part(U number) noexcept
      : kind_(kind::number), number_(number) {}              // NOLINT(google-explicit-constructor)
  message_part(std::span<const std::size_t> shape) noexcept  // NOLINT(google-explicit-constructor)
      : kind_(kind::shape), shape_(shape) {}
  message_part(const std::vector<std::size_t>& shape) noexcept  // NOLINT(google-explicit-constructor)
      : kind_(kind::shape), shape_(shape) {}
  message_part(const message_part&) = delete;
  message_part& operator=(const message_part&) = delete;

  void append_to(std::string& out) const {
    if (kind_ == kind::text) {
      out.append(text_);
    } else if (kind_ == kind::shape) {
      append_shape(out, shape_);
    } else {
      append_number(out, number_);
    }
  }

 private:
  enum class kind : unsigned char { text, number, shape };
  kind kind_ = kind::text;
  std::string_view text_;
  std::span<const std::size_t> shape_;
  std::size_t number_ = 0;
};

}  // namespace detail

// Throws Error(kind, op, the parts concatenated), e.g.
//   throw_error(ErrorKind::ShapeMismatch, op, {"input ", k, " has shape ", shape});
// The message is built here, out of line and cold: a throw site compiles to an array of parts and
// a call. Built with std::string operators at each site, the error paths took a large share of
// the compile time of every translation unit that uses tenferro.
[[noreturn, gnu::cold]] TENFERRO_NOINLINE inline void throw_error(
    ErrorKind kind, std::string_view op, std::initializer_list<detail::message_part> parts) {
  std::string detail;
  for (const detail::message_part& part : parts) part.append_to(detail);
  throw Error(kind, std::string(op), std::move(detail));
}

}  // namespace tenferro
