#!/usr/bin/env bash
# Configures and builds vitreg into build/ (Release; runs on any x86-64-v2 CPU and picks its kernels
# at run time; VITREG_NATIVE=ON compiles for this machine's CPU only).
#   scripts/build.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVITREG_NATIVE="${VITREG_NATIVE:-OFF}" >/dev/null
if (($#)); then
  cmake --build build -j2 --target "$@"
else
  cmake --build build -j2
fi
