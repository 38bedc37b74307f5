#!/usr/bin/env bash
# Times the compilation of bench/compile_time/grad20.cpp (value_and_grad of a 20-node expression
# of three inputs) with the flags tenferro's own programs use, against a translation unit that
# only includes the same headers. Usage: bench/compile_time.sh [compiler] (default: g++).
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${1:-g++}
flags=(-std=c++20 -O3 -DNDEBUG -march=native -DXTENSOR_USE_XSIMD -Iinclude)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <tenferro/expr.hpp>\nint main() {}\n' > "$tmp/headers.cpp"
time_of() {  # seconds with two decimals
  local start end ms
  start=$(date +%s%N)
  "$cxx" "${flags[@]}" -c "$1" -o "$tmp/out.o"
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  printf '%d.%02d' $((ms / 1000)) $((ms % 1000 / 10))
}
for run in 1 2 3; do
  echo "run $run: headers only $(time_of "$tmp/headers.cpp") s, grad of 20 nodes $(time_of bench/compile_time/grad20.cpp) s"
done
