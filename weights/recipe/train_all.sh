#!/bin/sh
# Train the five shipped configurations on a 2-core CPU: three at once, then two,
# one thread each (OpenBLAS/OpenMP pinned to 1 thread: Debian's torch uses OpenBLAS,
# which ignores torch.set_num_threads). Logs go to $LOGDIR/<config>.log.
#
#   STEPS=2200 LOGDIR=/tmp/train sh weights/recipe/train_all.sh
set -eu
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-2200}
LOGDIR=${LOGDIR:-/tmp/train}
PY=${PY:-/usr/bin/python3}
mkdir -p "$LOGDIR"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
run() {
  "$PY" weights/recipe/train.py --config "$1" --steps "$STEPS" --threads 1 > "$LOGDIR/$1.log" 2>&1
  echo "$(date -u +%FT%TZ) $1 exit $?" >> "$LOGDIR/status.txt"
}
echo "$(date -u +%FT%TZ) start steps=$STEPS" >> "$LOGDIR/status.txt"
run softmax & run softmax1 & run softmax-reg4 & wait
run sink & run softmax1-reg4 & wait
echo "$(date -u +%FT%TZ) all done" >> "$LOGDIR/status.txt"
