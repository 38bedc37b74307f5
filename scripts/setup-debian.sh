#!/usr/bin/env bash
# Installs the Debian packages tenferro's build, tests, examples and benchmarks need.
# Idempotent: installs only what is missing, and refreshes the package lists only when an
# install is needed and the lists are missing or older than a day. Run as root (or via sudo).
# Arguments: further packages (CI's clang build passes clang-14).
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache pkg-config
  libxtensor-dev xtl-dev libxsimd-dev
  libboost-dev libtbb-dev libhwloc-dev libtbbbind-2-5 libopenblas-serial-dev
  catch2 libbenchmark-dev
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

echo "setup-debian: installing ${missing[*]}"
lists=/var/lib/apt/lists
if [ -z "$(find "$lists" -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -n 1)" ]; then
  "${sudo_cmd[@]}" apt-get update -qq
fi
if ! DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  # A stale list can point at a superseded package version: refresh once and retry.
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
