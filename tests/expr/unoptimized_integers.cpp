// Built without optimization (-O0), as in a debug build: integer kernels must compile there too
// (core/detail/xtensor.hpp works around GCC's AVX-512BW blend macros), and give the right values.
#include <tenferro/expr.hpp>

#include <cstdint>
#include <cstdio>

int main() {
  using namespace tenferro::expr;
  const auto [x, y] = placeholders<2>();
  auto a = tenferro::column_major_array<std::int64_t>::from_shape({19});
  auto b = tenferro::column_major_array<std::int32_t>::from_shape({19});
  for (int i = 0; i < 19; ++i) {
    a(i) = i - 9;
    b(i) = 2 * i - 20;
  }
  const auto m = eval(maximum(x, y) * sign(x) + abs(y) / 3, a, b);
  const std::int64_t top = eval(max(minimum(x, y)), a, b);
  bool ok = top == 9 && m(0) == 15;  // max(-9, -20) * sign(-9) + |-20| / 3
  for (int i = 0; i < 19; ++i) {
    const std::int64_t p = a(i), q = b(i);
    const std::int64_t want = (p > q ? p : q) * (p > 0 ? 1 : p < 0 ? -1 : 0) + (q < 0 ? -q : q) / 3;
    ok = ok && m(i) == want;
  }
  std::printf("%s\n", ok ? "ok" : "wrong");
  return ok ? 0 : 1;
}
