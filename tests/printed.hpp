// What a value prints as through operator<< (the tests compare printed forms).
#pragma once

#include <sstream>
#include <string>

namespace tenferro::test {

template <class T>
std::string printed(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

}  // namespace tenferro::test
