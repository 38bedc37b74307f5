#!/usr/bin/env bash
# Set-up, build everything and run the whole test suite through ctest.
# Extra arguments go to ctest (e.g. -R tensor). Same environment as scripts/build.sh, and
# TENFERRO_TEST_GROUPS: build and run only these test groups (space-separated; tests/CMakeLists.txt
# lists them), e.g. "layer ops".
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a groups <<<"${TENFERRO_TEST_GROUPS:-}"
if [ ${#groups[@]} -eq 0 ]; then
  bash scripts/build.sh
  ctest --test-dir "${TENFERRO_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
else
  targets=()
  for g in "${groups[@]}"; do targets+=("tests_$g"); done
  labels=$(IFS='|'; echo "${groups[*]}")
  bash scripts/build.sh "${targets[@]}"
  ctest --test-dir "${TENFERRO_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" -L "^($labels)\$" "$@"
fi
