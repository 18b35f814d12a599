#!/usr/bin/env bash
# Installs dependencies, builds and runs the whole test suite (all CTest labels; extra
# arguments go to ctest), then prints how many tests ran, passed and were skipped, with each
# skip's reason. Fails when a test fails or skips for a reason that does not hold here: CTest
# counts a skip as a pass, so only the CUDA tests on a machine without an NVIDIA GPU may skip,
# the AVX2-capped repeat of the losslessness tests on a CPU with nothing above AVX2 (where it
# would repeat the uncapped run; tests/engine/run_capped_at_avx2.sh checks the CPU's flags), and
# the op table's cells of kernel variants the CPU lacks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh -DDSCALE_WERROR=ON
build_dir=${DSCALE_BUILD_DIR:-build}
report="$PWD/$build_dir/ctest-report.xml"
rm -f "$report"
ctest_rc=0
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" --output-junit "$report" \
  "$@" || ctest_rc=$?
# The op table's cells of kernel variants this CPU (or DSCALE_CPU_ISA's cap) cannot run, e.g. the
# AMX cells on a CPU without AMX; every cell of a variant the CPU has runs.
expected_skips=(--expect-skip '^this CPU has nothing above AVX2'
                --expect-skip '^this CPU under DSCALE_CPU_ISA=[a-z0-9]+ cannot run ')
if ! scripts/gpu_present.sh; then
  expected_skips+=(--expect-skip '^no CUDA device:')
fi
report_rc=0
python3 scripts/test_report.py "$report" "${expected_skips[@]}" || report_rc=$?
[ "$ctest_rc" -eq 0 ] && [ "$report_rc" -eq 0 ]
