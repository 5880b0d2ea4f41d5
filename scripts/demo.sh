#!/usr/bin/env bash
# The main job on the embedded default: features of the sample images in assets/images with
# the checkpoint shipped in weights/, written to out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh vitreg
model=vitreg-untrained-s14-d192-reg4
build/apps/vitreg info "$model"
echo
build/apps/vitreg extract "$model" assets/images -o out/demo --patch-tokens
echo
echo "out/demo/ now holds:"
(cd out/demo && ls -1 | sed 's/^/  /' && echo "  patch/: $(ls patch | wc -l) files")
echo "manifest.jsonl:"
sed 's/^/  /' out/demo/manifest.jsonl
