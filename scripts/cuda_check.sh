#!/usr/bin/env bash
# Everything that needs a GPU, in one go: builds with the CUDA backend required, runs the CUDA
# parity and graph tests and the CLI's GPU-vs-CPU comparison, then the decode-step benchmark.
# Logs and the benchmark's output go to OUT_DIR (default cuda-check/); pass --json among the
# benchmark flags for JSON. Exits non-zero if there is no usable GPU, if the build fails, or if
# any test fails or skips (a skipped GPU test is a GPU or driver that does not work); the
# benchmark runs even after a test failure, so one session on a GPU machine yields both.
#   scripts/cuda_check.sh [OUT_DIR] [extra cuda_step_bench flags...]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-cuda-check}
shift || true
mkdir -p "$out"

if ! nvidia-smi >"$out/nvidia-smi.txt" 2>&1; then
  echo "nvidia-smi failed (see $out/nvidia-smi.txt): no usable NVIDIA GPU or driver here"
  exit 1
fi
if ! scripts/build.sh -DDSCALE_CUDA=ON -DDSCALE_WERROR=ON >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "build failed: $out/build.log"
  exit 1
fi

report="$PWD/$out/ctest-cuda.xml"
ctest --test-dir build -L cuda --output-on-failure --parallel "$(nproc)" \
  --output-junit "$report" >"$out/ctest-cuda.log" 2>&1
ctest_rc=$?
# No skip is expected on a GPU machine: every reason fails the check.
python3 scripts/test_report.py "$report" | tee "$out/test-report.txt"
report_rc=${PIPESTATUS[0]}
ctest --test-dir build -R 'DeviceCuda' --output-on-failure >"$out/ctest-cli.log" 2>&1
cli_rc=$?
grep -E "tests passed|tests failed|\(Failed\)" "$out/ctest-cli.log"

build/cuda_step_bench "$@" 2>&1 | tee "$out/cuda_step_bench.txt"
bench_rc=${PIPESTATUS[0]}

echo "tests exit $ctest_rc (report $report_rc, CLI $cli_rc), benchmark exit $bench_rc; logs in $out/"
[ "$ctest_rc" -eq 0 ] && [ "$report_rc" -eq 0 ] && [ "$cli_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
