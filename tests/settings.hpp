// Process-wide settings changed for the lifetime of a guard: an environment variable, and the
// store rule's threshold (core/streaming.hpp).
#pragma once

#include <tenferro/core/streaming.hpp>

#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>

namespace tenferro::test {

// Sets environment variable `name` to `value` (nullptr: unsets it), and restores it.
class environment {
 public:
  environment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~environment() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

// Sets the streaming-store threshold, and goes back to the default (read again) afterwards.
class store_threshold {
 public:
  explicit store_threshold(std::optional<std::size_t> bytes) { set_streaming_store_threshold(bytes); }
  ~store_threshold() { set_streaming_store_threshold(std::nullopt); }
  store_threshold(const store_threshold&) = delete;
  store_threshold& operator=(const store_threshold&) = delete;
};

}  // namespace tenferro::test
