#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what it needs, builds, runs CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
scripts/build.sh
cd build
ctest --output-on-failure -j2
