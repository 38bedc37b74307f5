#!/usr/bin/env bash
# Set-up, build everything and run the whole test suite through ctest.
# Extra arguments go to ctest (e.g. -R tensor). Same environment as scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir "${TENFERRO_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
