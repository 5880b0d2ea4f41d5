#!/usr/bin/env bash
# Installs vitreg into a temporary prefix and checks what a user gets there:
#   - examples/cpp built against it, the way another project uses the library (find_package with
#     the components core, batch, analysis and render), and run on a sample image; a component
#     that does not exist is refused;
#   - the bash completion (share/bash-completion/completions/vitreg) completes every subcommand
#     `vitreg --help` lists, and the man page (share/man/man1/vitreg.1) has a section for each;
#   - the Python module (when it was built) imports from where Debian's python3 looks.
set -euo pipefail
build=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
prefix=$tmp/prefix
model=$prefix/share/vitreg/weights/vitreg-untrained-s14-d192-reg4.safetensors
image=$root/assets/images/chelsea.png

cmake -S "$root/examples/cpp" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/build" -j2 >/dev/null
out=$("$tmp/build/cls_of" "$model" "$image")
echo "$out"
[[ "$out" == "dim 192 cls "* ]]
out=$("$tmp/build/norm_map_of" "$model" "$image" "$tmp/norms.png")
echo "$out"
[[ "$out" == "norm map "* && -s "$tmp/norms.png" ]]
out=$("$tmp/build/artifacts_of" "$model" "$tmp/features" "$image")
echo "$out"
[[ "$out" == "extracted 1 of 1"*"artifacts "*" of layer 5 in $image" && -s "$tmp/features/cls.npy" ]]
mkdir "$tmp/nonsense"
echo 'cmake_minimum_required(VERSION 3.16)
project(nonsense CXX)
find_package(vitreg REQUIRED COMPONENTS core nonsense)' >"$tmp/nonsense/CMakeLists.txt"
if cmake -S "$tmp/nonsense" -B "$tmp/nonsense/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
  echo "find_package(vitreg COMPONENTS nonsense) was not refused"; exit 1
fi

# The subcommands the installed command lists, and what its completion offers after `vitreg `.
commands=$("$prefix/bin/vitreg" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && /^  [^ ]/ {print $1}')
[[ -n "$commands" ]]
completion=$prefix/share/bash-completion/completions/vitreg
[[ -s "$completion" ]] || { echo "no bash completion at $completion"; exit 1; }
offered=$(bash -c 'source "$1"; COMP_WORDS=(vitreg ""); COMP_CWORD=1; _vitreg; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion")
offered_precision=$(bash -c 'source "$1"; COMP_WORDS=(vitreg extract --precision ""); COMP_CWORD=3; _vitreg
                              printf "%s\n" "${COMPREPLY[@]}"' _ "$completion")
[[ "$(echo $offered_precision)" == "fp32 bf16 int8 int4" ]] || { echo "extract --precision completes to: $offered_precision"; exit 1; }
man_page=$prefix/share/man/man1/vitreg.1
[[ -s "$man_page" ]] || { echo "no man page at $man_page"; exit 1; }
grep -q '^\.TH VITREG "1"' "$man_page"
for c in $commands; do
  grep -qx -- "$c" <<<"$offered" || { echo "the completion does not offer $c"; exit 1; }
  grep -qx -- ".SS $c" "$man_page" || { echo "the man page has no section for $c"; exit 1; }
done
echo "completion and man page: $(wc -w <<<"$commands") subcommands"

if [[ -d "$build/python" ]]; then
  module=$(find "$prefix/lib" -name '_vitreg*.so' -path '*dist-packages/vitreg/*')
  [[ -n "$module" ]] || { echo "the Python package was not installed under lib/python3*/dist-packages/vitreg"; exit 1; }
  PYTHONPATH=$(dirname "$(dirname "$module")") /usr/bin/python3 -c \
    'import vitreg; m = vitreg.Model("vitreg-untrained-s14-d192-reg4"); print("python:", m)'
fi
