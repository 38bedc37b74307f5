#!/usr/bin/env bash
# Times the compilation of
# - bench/compile_time/grad20.cpp (value_and_grad of a 20-node expression of three inputs) with
#   the flags tenferro's own programs use (-O3), against a translation unit that only includes
#   the same headers;
# - tests/package/consumer/eager.cpp, a small eager program as a program linking
#   tenferro::eager compiles it (TENFERRO_SEPARATE_COMPILATION, -O2), with its peak memory.
#
# Usage: bench/compile_time.sh [compiler]                 wall time, three runs (default: g++)
#        bench/compile_time.sh --instructions [compiler]  instructions the compiler proper executes
#                                                        (valgrind's cachegrind; about a minute per TU)
# Wall time on a shared machine varies by ±20 % from hour to hour; the instruction count does not,
# so it is the measure for comparing two versions of the headers.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=wall
if [[ ${1:-} == --instructions ]]; then
  mode=instructions
  shift
fi
cxx=${1:-g++}
flags=(-std=c++20 -O3 -DNDEBUG -march=native -DXTENSOR_USE_XSIMD -Iinclude)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
eager_flags=(-std=c++20 -O2 -DNDEBUG -march=native -DXTENSOR_USE_XSIMD -DTENFERRO_SEPARATE_COMPILATION -Iinclude)
printf '#include <tenferro/expr.hpp>\nint main() {}\n' > "$tmp/headers.cpp"
time_of() {  # seconds with two decimals; `eager` as a second argument: the eager flags
  local start end ms
  local -a f=("${flags[@]}")
  [[ ${2:-} == eager ]] && f=("${eager_flags[@]}")
  start=$(date +%s%N)
  "$cxx" "${f[@]}" -c "$1" -o "$tmp/out.o"
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  printf '%d.%02d' $((ms / 1000)) $((ms % 1000 / 10))
}
peak_mb_of() {  # the compiler's peak resident memory in MB, eager flags
  /usr/bin/time -f '%M' "$cxx" "${eager_flags[@]}" -c "$1" -o "$tmp/out.o" 2>&1 >/dev/null |
    awk 'END { printf "%d", $1 / 1024 }'
}
instructions_of() {  # billions of instructions of the compiler proper (cc1plus), not the assembler
  local -a f=("${flags[@]}")
  [[ ${2:-} == eager ]] && f=("${eager_flags[@]}")
  "$cxx" "${f[@]}" -c "$1" -o "$tmp/out.o" -wrapper \
    valgrind,--tool=cachegrind,--cache-sim=no,--cachegrind-out-file="$tmp/cg.%p" 2>&1 |
    awk '/I +refs/ { gsub(",", "", $4); if ($4 + 0 > max) max = $4 + 0 } END { printf "%.2f", max / 1e9 }'
}
if [[ $mode == instructions ]]; then
  echo "headers only $(instructions_of "$tmp/headers.cpp") G instructions," \
    "grad of 20 nodes $(instructions_of bench/compile_time/grad20.cpp) G instructions," \
    "eager program $(instructions_of tests/package/consumer/eager.cpp eager) G instructions"
  exit 0
fi
for run in 1 2 3; do
  echo "run $run: headers only $(time_of "$tmp/headers.cpp") s," \
    "grad of 20 nodes $(time_of bench/compile_time/grad20.cpp) s," \
    "eager program $(time_of tests/package/consumer/eager.cpp eager) s"
done
echo "eager program: peak compiler memory $(peak_mb_of tests/package/consumer/eager.cpp) MB"
