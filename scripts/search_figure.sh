#!/usr/bin/env bash
# The README's "Web-scale extraction and search" figure (assets/figures/search.png): the search
# page of `vitreg serve --index` over 300 augmented crops of the shipped photos in three webdataset
# shards (bench/shards_make.py), extracted with `--layout shards` by the shipped untrained model,
# after uploading one of them and clicking its second result (tests/browser/search_test.mjs drives
# Chromium and takes the screenshot). Needs build/apps/vitreg, Debian's chromium and python3-pil,
# and tests/browser's playwright-core (scripts/setup.sh --tests).
# Usage: scripts/search_figure.sh [MODEL]
set -euo pipefail
cd "$(dirname "$0")/.."
vitreg=${VITREG:-build/apps/vitreg}
model=${1:-vitreg-untrained-s14-d192-reg4}
out=$(mktemp -d)
trap 'kill "${server:-}" 2>/dev/null || true; rm -rf "$out"' EXIT
/usr/bin/python3 bench/shards_make.py "$out/set" --n 300 --shards 3 --seed 1 >/dev/null
"$vitreg" extract "$model" "$out/set/shards/"'{00000..00002}'.tar -o "$out/features" --layout shards -q
"$vitreg" index "$out/features" -o "$out/index" -q
"$vitreg" serve "$model" --index "$out/index" --port 0 --threads 2 >"$out/serve.txt" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q '^vitreg serve: http' "$out/serve.txt" && break; sleep 0.2; done
url=$(sed -n 's/^vitreg serve: \(http[^ ]*\).*/\1/p' "$out/serve.txt" | head -1)
query=000042
echo "{\"upload_key\": \"$query\", \"results\": 10, \"no_thumbnail\": 0}" >"$out/expected.json"
(cd tests/browser && node search_test.mjs "${url%/}/search" "$out/set/folder/$query.jpg" "$out/expected.json" \
  "$out/search.png")
/usr/bin/python3 - "$out/search.png" assets/figures/search.png <<'PY'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
im.save(sys.argv[2], optimize=True)
print(f"{sys.argv[2]}: {im.size[0]}x{im.size[1]}")
PY
