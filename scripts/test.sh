#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what it needs, then
#   1. builds (Release) and runs every test;
#   2. builds once more with clang, AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer's
#      coverage, and runs the tests of vitreg's own code there (any report fails the run);
#   3. runs each libFuzzer target of that same build briefly (scripts/fuzz.sh; longer runs:
#      docs/reliability.md).
# Each stage's wall time is printed at its end (docs/testing.md keeps a table of them).
set -euo pipefail
cd "$(dirname "$0")/.."
stage_start=$SECONDS
stage() {  # the stage just finished, and how long it took
  echo "== $1: $((SECONDS - stage_start)) s =="
  stage_start=$SECONDS
}
scripts/setup.sh --tests
stage "setup"
scripts/build.sh
stage "build (Release)"
(cd build && ctest --output-on-failure -j2)
stage "tests (Release)"

echo "== sanitizers: ASan + UBSan =="
CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVITREG_FUZZ=ON >/dev/null
cmake --build build-asan -j2
stage "build (clang, ASan + UBSan + fuzzers)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# LSan reads its suppressions when a process exits, in the tests' unprivileged runs too
# (reliability_test.py's setpriv), which may not enter the checkout: a world-readable copy.
suppressions=$(mktemp /tmp/vitreg-lsan-XXXXXX)
trap 'rm -f "$suppressions"' EXIT
cp tests/lsan.supp "$suppressions"
chmod 644 "$suppressions"
export LSAN_OPTIONS="suppressions=$suppressions"
# Not re-run there: the Python reference and fixture checks, the install test and the docs build
# (no vitreg code runs, or only the module's import for its docstrings), the Slurm test (the
# scheduler's part; sharding and merge run sanitized in `reliability`),
# the qemu-user test (ASan's shadow memory does not fit qemu's guest address space; the same
# kernels run sanitized natively, each forced by VITREG_ISA in test_vector_loops and test_gemm),
# and the whole Catch2 suite on the portable kernels (those tests run each portable kernel
# sanitized; the suite itself runs on them in the Release pass; under ASan the scalar loops took
# 700 s, a third of CI's budget).
(cd build-asan && ctest --output-on-failure -j2 \
   -E '^(reference_selfcheck|fixtures_reproducible|find_package|docs|slurm|qemu_cpus|catch2_as_portable)$')
stage "tests (sanitized)"

echo "== fuzz smoke =="
# 9 s per target: the 13 targets of fuzz/targets.txt keep the stage inside its ~150 s.
VITREG_FUZZ_BUILD=build-asan scripts/fuzz.sh "${VITREG_FUZZ_SECONDS:-9}"
stage "fuzz smoke"
