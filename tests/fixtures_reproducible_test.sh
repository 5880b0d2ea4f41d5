#!/usr/bin/env bash
# The checked-in fixtures are exactly what the PyTorch reference generates today.
set -euo pipefail
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$root/tests/fixtures/make_fixtures.py" --out "$tmp" >/dev/null
# torch/: the PyTorch checkpoint files, from the model just regenerated.
/usr/bin/python3 "$root/tests/fixtures/make_torch_files.py" --models "$tmp/models" --out "$tmp/torch" >/dev/null
# heldout/ comes from the training recipe (weights/recipe), not from this generator.
diff -r --exclude=make_fixtures.py --exclude=make_torch_files.py --exclude=make_dense_set.py --exclude=__pycache__ --exclude=heldout "$tmp" "$root/tests/fixtures"
echo "fixtures match the reference generator"
