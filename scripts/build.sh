#!/usr/bin/env bash
# Installs the Debian packages (scripts/setup-debian.sh), configures and builds tenferro.
# Environment: TENFERRO_BUILD_DIR (default: build), TENFERRO_CMAKE_ARGS (extra configure
# arguments, e.g. "-DTENFERRO_SANITIZE=address,undefined"). Arguments: build targets (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
build_dir=${TENFERRO_BUILD_DIR:-build}
read -r -a extra <<<"${TENFERRO_CMAKE_ARGS:-}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${extra[@]}"
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" "${targets[@]}"
