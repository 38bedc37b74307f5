#!/usr/bin/env bash
# Set-up, build and run the quickstart demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh quickstart
"${TENFERRO_BUILD_DIR:-build}/examples/quickstart"
