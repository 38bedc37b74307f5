// Settings read from environment variables: one parser, one error message for every variable
// (TENFERRO_NUM_THREADS in cpu/placement.hpp, TENFERRO_STREAM_THRESHOLD in core/streaming.hpp).
#pragma once

#include <tenferro/core/error.hpp>

#include <charconv>
#include <cstddef>
#include <optional>
#include <string_view>
#include <system_error>

namespace tenferro::detail {

// The whole number `value` (the variable `name`'s text; nullptr when unset gives nullopt), in
// [lo, hi], digits only. Anything else throws InvalidArgument from `op`, naming the variable, its
// text and what was expected ("a whole number of <unit> from <lo> to <hi>").
inline std::optional<std::size_t> whole_number_from_environment(std::string_view name, const char* value,
                                                                std::string_view op, std::size_t lo,
                                                                std::size_t hi, std::string_view unit) {
  if (value == nullptr) return std::nullopt;
  const std::string_view text(value);
  std::size_t n = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || r.ec != std::errc{} || r.ptr != text.data() + text.size() || n < lo || n > hi) {
    throw_error(ErrorKind::InvalidArgument, op,
                {"environment variable ", name, " is '", text, "'; expected a whole number of ", unit, " from ", lo,
                 " to ", hi});
  }
  return n;
}

}  // namespace tenferro::detail
