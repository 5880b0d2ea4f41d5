#!/usr/bin/env bash
# Configures and builds vitreg into build/ (Release, -march=native; VITREG_NATIVE=OFF for portable).
#   scripts/build.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVITREG_NATIVE="${VITREG_NATIVE:-ON}" >/dev/null
if (($#)); then
  cmake --build build -j2 --target "$@"
else
  cmake --build build -j2
fi
