#!/usr/bin/env bash
# The documentation as HTML: docs/*.md through Sphinx, MyST and furo (Debian's python3-sphinx,
# python3-myst-parser and furo), and the Python API from the docstrings of the module built in
# BUILD/python (scripts/build.sh vitreg_python first). Any warning fails the build.
#   scripts/docs.sh [BUILD]      writes BUILD/docs/index.html (BUILD: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$root/build}")
[[ -d "$build/python" ]] || { echo "docs: no Python module in $build/python (scripts/build.sh vitreg_python)" >&2; exit 1; }
# Fresh each time (-E): a page that changed nothing still has its warnings reported.
PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 -m sphinx -W --keep-going -E -q -b html \
  -d "$build/docs-doctrees" "$root/docs" "$build/docs"
echo "docs: $build/docs/index.html"
