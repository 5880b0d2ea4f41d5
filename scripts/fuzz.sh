#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into build-fuzz/ and runs each one.
#   scripts/fuzz.sh [SECONDS_PER_TARGET=15] [TARGET...]      targets: fuzz/targets.txt (all by default)
# VITREG_FUZZ_BUILD=DIR runs the fuzzers of a build configured with -DVITREG_FUZZ=ON already (the
# test suite's sanitized build, whose tests share them) instead of configuring build-fuzz/.
# Corpora grow in BUILD/corpus/<target>/ (seeded from fuzz/seeds and fuzz/regressions);
# an input that crashes lands in BUILD/findings/<target>/ and the script exits 1. Copy it
# to fuzz/regressions/<target>/ when fixed: the test suite replays that folder.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-15}"
shift || true
targets=("$@")
((${#targets[@]})) || mapfile -t targets < fuzz/targets.txt

build="${VITREG_FUZZ_BUILD:-build-fuzz}"
if [[ -z "${VITREG_FUZZ_BUILD:-}" ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DVITREG_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVITREG_BUILD_APPS=OFF -DVITREG_BUILD_TESTS=OFF -DVITREG_BUILD_PYTHON=OFF >/dev/null
fi
cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}" >/dev/null
# Absolute: a target may run its input in another working folder (modelname), and libFuzzer
# writes a crashing input from inside that run.
build=$(realpath "$build")

status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" findings="$build/findings/$t"
  mkdir -p "$corpus" "$findings"
  log="$build/fuzz-$t.log"
  # libFuzzer sizes its inputs after the largest file it is given; the regressions hold long ones
  # (a 194 KB decompression bomb, a 60 KB .npy header) that must not make every mutated input that
  # long: the limit follows the seeds alone, 4096 bytes at least (libFuzzer's own default).
  largest=$(find "fuzz/seeds/$t" -type f -printf '%s\n' | sort -n | tail -1)
  max_len=$((largest > 4096 ? largest : 4096))
  # -rss_limit_mb: a hostile input must be refused long before it costs this much.
  if "$build"/fuzz/fuzz_"$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 -max_len="$max_len" \
       -artifact_prefix="$findings/" "$corpus" "fuzz/seeds/$t" $(test -d "fuzz/regressions/$t" && echo "fuzz/regressions/$t") \
       >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz $t: ${runs:-?} executions in ${seconds} s, no finding"
    # An input over 10 s fails nothing but is worth a look (libFuzzer's -report_slow_units).
    slow=$(find "$findings" -name 'slow-unit-*' | wc -l)
    ((slow == 0)) || echo "fuzz $t: $slow slow input(s) in $findings/"
  else
    status=1
    echo "fuzz $t: FINDING (see $log and $findings/):"
    grep -E "ERROR|SUMMARY|runtime error" "$log" | head -5
  fi
done
exit $status
