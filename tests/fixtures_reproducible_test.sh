#!/usr/bin/env bash
# The checked-in fixtures hold what the PyTorch reference generates today: the same numbers,
# compared with a tolerance that float64 summation order (which differs by instruction set)
# cannot break, and bytes where bytes are deterministic (tests/fixtures_match.py).
set -euo pipefail
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$root/tests/fixtures/make_fixtures.py" --out "$tmp" >/dev/null
# torch/: the PyTorch checkpoint files, from the model just regenerated.
/usr/bin/python3 "$root/tests/fixtures/make_torch_files.py" --models "$tmp/models" --out "$tmp/torch" >/dev/null
# photos/ and webp_unit/: real files written by Debian's PIL, and what PIL and torchvision make of them.
/usr/bin/python3 "$root/tests/fixtures/make_photo_fixtures.py" --out "$tmp/photos" >/dev/null
# defects/: the reference's defect directions and the planted-direction model.
/usr/bin/python3 "$root/tests/fixtures/make_defects.py" --out "$tmp/defects" >/dev/null
# repairs/: the reference's @denoise split on the planted model.
/usr/bin/python3 "$root/tests/fixtures/make_repair_fixtures.py" --out "$tmp/repairs" >/dev/null
# upstream/torchvision: Debian's torchvision is the upstream itself. open_clip's, DINO's, DINOv2's, DINOv3's, timm's and
# transformers' fixtures and the transformers key lists need those upstreams' sources, which CI does not have (tests/upstream/README.md).
/usr/bin/python3 "$root/tests/upstream/torchvision_fixtures.py" "$tmp/upstream/torchvision" >/dev/null
mkdir -p "$tmp/webp_unit"
/usr/bin/python3 "$root/tests/fixtures/webp_unit/make.py" "$tmp/webp_unit" >/dev/null
# heldout/ comes from the training recipe (weights/recipe), not from this generator.
/usr/bin/python3 "$root/tests/fixtures_match.py" "$tmp" "$root/tests/fixtures" --exclude make_fixtures.py \
  --exclude make_torch_files.py --exclude make_dense_set.py --exclude make_photo_fixtures.py --exclude make_defects.py --exclude make_repair_fixtures.py --exclude make.py --exclude __pycache__ --exclude heldout \
  --exclude open_clip --exclude dino --exclude dinov2 --exclude dinov3 --exclude timm --exclude transformers --exclude transformers_keys.json
echo "fixtures match the reference generator"
