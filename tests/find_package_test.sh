#!/usr/bin/env bash
# Installs vitreg into a temporary prefix and builds examples/find_package against it, the
# way another project would use the library (vitreg::core, and vitreg::render with OpenCV); then
# runs the examples on a sample image, and
# imports the installed Python module (when it was built) from where Debian's python3 looks.
set -euo pipefail
build=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$root/examples/find_package" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/build" -j2 >/dev/null
out=$("$tmp/build/cls_of" "$tmp/prefix/share/vitreg/weights/vitreg-untrained-s14-d192-reg4.safetensors" \
      "$root/assets/images/chelsea.png")
echo "$out"
[[ "$out" == "dim 192 cls "* ]]
out=$("$tmp/build/norm_map_of" "$tmp/prefix/share/vitreg/weights/vitreg-untrained-s14-d192-reg4.safetensors" \
      "$root/assets/images/chelsea.png" "$tmp/norms.png")
echo "$out"
[[ "$out" == "norm map "* && -s "$tmp/norms.png" ]]
if [[ -d "$build/python" ]]; then
  module=$(find "$tmp/prefix/lib" -name '_vitreg*.so' -path '*dist-packages/vitreg/*')
  [[ -n "$module" ]] || { echo "the Python package was not installed under lib/python3*/dist-packages/vitreg"; exit 1; }
  PYTHONPATH=$(dirname "$(dirname "$module")") /usr/bin/python3 -c \
    'import vitreg; m = vitreg.Model("vitreg-untrained-s14-d192-reg4"); print("python:", m)'
fi
