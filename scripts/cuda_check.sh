#!/usr/bin/env bash
# Everything that needs a GPU, in one go: builds with the CUDA backend required, runs the CUDA
# parity and graph tests, then the decode-step benchmark. Logs and the benchmark's output go to
# OUT_DIR (default cuda-check/); pass --json among the benchmark flags for JSON. Exits non-zero if the build or any test fails; the benchmark
# runs even after a test failure, so one session on a GPU machine yields both.
#   scripts/cuda_check.sh [OUT_DIR] [extra cuda_step_bench flags...]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-cuda-check}
shift || true
mkdir -p "$out"

nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed (see $out/nvidia-smi.txt)"
if ! scripts/build.sh -DDSCALE_CUDA=ON -DDSCALE_WERROR=ON >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "build failed: $out/build.log"
  exit 1
fi

ctest --test-dir build -L cuda --output-on-failure --parallel "$(nproc)" >"$out/ctest-cuda.log" 2>&1
tests_rc=$?
grep -E "tests passed|tests failed|\(Failed\)|\(Subprocess aborted\)|\(Timeout\)" "$out/ctest-cuda.log" |
  head -40
grep -q "Skipped" "$out/ctest-cuda.log" && echo "some CUDA tests were skipped: see $out/ctest-cuda.log"

build/cuda_step_bench "$@" 2>&1 | tee "$out/cuda_step_bench.txt"
bench_rc=${PIPESTATUS[0]}

echo "tests exit $tests_rc, benchmark exit $bench_rc; logs in $out/"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
