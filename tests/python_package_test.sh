#!/usr/bin/env bash
# The Python package as a user installs it: pip builds the wheel offline (no build isolation; the
# extension from the CMake build folder given, so nothing is compiled twice), a fresh venv
# installs it, and the Python suite runs there against the installed package, from outside the
# source tree.
#   tests/python_package_test.sh SOURCE_DIR CMAKE_BUILD_DIR VITREG_BINARY
set -euo pipefail
root=$1 build=$2 binary=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s%N)
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
VITREG_CMAKE_BUILD_DIR=$build "$tmp/venv/bin/pip" wheel -q --no-build-isolation --no-deps --no-index -w "$tmp/wheels" "$root"
"$tmp/venv/bin/pip" install -q --no-index --no-deps "$tmp"/wheels/vitreg-*.whl
echo "venv, wheel and install: $((($(date +%s%N) - start) / 1000000)) ms"
/usr/bin/python3 -m zipfile -l "$tmp"/wheels/vitreg-*.whl
cd "$tmp"
VITREG_INSTALLED=1 VITREG_BINARY=$binary VITREG_ROOT=$root PYTHONPATH= \
  "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python"
