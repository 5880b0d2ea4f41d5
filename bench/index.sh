#!/usr/bin/env bash
# `vitreg index` at scale: N random D-d vectors (default 10^6 × 384, Gaussian, seed 0) written as an
# extract output folder (manifest.jsonl + cls.npy), indexed with the factory the --memory rule picks
# (or FACTORY), then searched: build time and peak memory of the whole `vitreg index` process
# (bench/peak_rss.py), and query latency at k = 10, one query at a time and in a batch of 1000, from
# Python (vitreg.Index(path).search). Not a test: run it by hand, once, on a quiet machine.
#   bench/index.sh [WORKDIR]       (default /tmp/vitreg-index-bench)
# Environment: VITREG (the binary; default build/apps/vitreg), N (1000000), D (384), MEMORY (4G),
# FACTORY (none: the rule's), THREADS (0: all cores), QUERIES (1000), CAP_MB (the memory cap, 32768).
# Needs the Python module built (build/python) and Debian's python3-numpy.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/vitreg-index-bench}
n=${N:-1000000}; d=${D:-384}; memory=${MEMORY:-4G}; threads=${THREADS:-0}; queries=${QUERIES:-1000}
vitreg=${VITREG:-$root/build/apps/vitreg}
py=/usr/bin/python3
mkdir -p "$work"
echo "index bench: $n x $d random vectors in $work, $(nproc) cores"

"$py" - "$work/features" "$n" "$d" <<'PY'
import json, os, sys, time
import numpy as np
out, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(out, exist_ok=True)
t = time.time()
rng = np.random.default_rng(0)
cls = np.lib.format.open_memmap(os.path.join(out, "cls.npy"), mode="w+", dtype=np.float32, shape=(n, d))
for start in range(0, n, 65536):
    cls[start:start + 65536] = rng.standard_normal((min(65536, n - start), d), dtype=np.float32)
cls.flush()
with open(os.path.join(out, "manifest.jsonl"), "w") as f:
    for i in range(n):
        f.write(json.dumps({"path": f"img{i:08d}.jpg", "status": "ok", "row": i}) + "\n")
print(f"  data written in {time.time() - t:.1f} s")
PY

factory_args=(); [[ -n "${FACTORY:-}" ]] && factory_args=(--factory "$FACTORY")
start=$(date +%s.%N)
"$py" "$root/bench/peak_rss.py" "${CAP_MB:-32768}" env OMP_WAIT_POLICY=passive "$vitreg" index "$work/features" \
  -o "$work/index" --memory "$memory" --threads "$threads" "${factory_args[@]}" 2>&1 | sed 's/^/  /'
echo "  wall $(echo "$(date +%s.%N) - $start" | bc) s for vitreg index (whole process)"

PYTHONPATH="$root/build/python" OMP_WAIT_POLICY=passive "$py" - "$work" "$d" "$queries" <<'PY'
import os, sys, time
import numpy as np
import vitreg
work, d, nq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
index = vitreg.Index(os.path.join(work, "index"))
info = index.info
print(f"  {info['factory']} ({info['search_parameters'] or 'exact'}): {len(index)} vectors, index.faiss "
      f"{info['faiss_bytes'] / 2**20:.0f} MiB, trained on {info['train_sample']}, "
      f"recall@10 {info['recall_at_10']:.3f} on {info['recall_queries']} held-out rows")
q = np.random.default_rng(1).standard_normal((nq, d), dtype=np.float32)
index.search(q[:10], 10)  # warm
t = time.perf_counter(); lat = []
for row in q[:200]:
    s = time.perf_counter(); index.search(row, 10); lat.append(time.perf_counter() - s)
lat = np.array(lat) * 1e3
print(f"  one query at k=10: median {np.median(lat):.2f} ms, p95 {np.percentile(lat, 95):.2f} ms (200 queries)")
t = time.perf_counter(); index.search(q, 10); batch = time.perf_counter() - t
print(f"  {nq} queries in one call at k=10: {batch * 1e3:.0f} ms ({batch / nq * 1e3:.3f} ms per query)")
PY
