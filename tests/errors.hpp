// What the tests read from a tenferro::Error: the kind and the message of the error a call throws
// (the test fails when it throws none).
#pragma once

#include <tenferro/core/error.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace tenferro::test {

template <class F>
ErrorKind kind_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  FAIL("no tenferro::Error was thrown");
  return ErrorKind::Extension;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("no tenferro::Error was thrown");
  return {};
}

// The message of the error f throws, checking its kind.
template <class F>
std::string message_of(F&& f, ErrorKind expected) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == expected);
    return e.what();
  }
  FAIL("no tenferro::Error was thrown");
  return {};
}

}  // namespace tenferro::test
