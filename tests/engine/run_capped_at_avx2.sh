#!/usr/bin/env bash
# CTest (LosslessAtCpuIsaAvx2): runs TEST_BINARY's tests matching FILTER with the kernels capped
# at AVX2 (DSCALE_CPU_ISA, and OpenBLAS's AVX2 family), so that a CPU with AVX-512, AVX-VNNI or
# AMX also runs what an AVX2-only CPU runs. On a CPU with none of those the cap selects exactly
# the kernels the uncapped run of the same tests used, so the repeat is reported skipped (exit 77).
# Usage: run_capped_at_avx2.sh TEST_BINARY FILTER
set -euo pipefail
binary=$1 filter=$2
if [ -r /proc/cpuinfo ] && ! grep -qwE 'avx512f|avx_vnni|amx_tile' /proc/cpuinfo; then
  echo "SKIPPED: this CPU has nothing above AVX2 (no AVX-512, AVX-VNNI or AMX): the uncapped run" \
    "of these tests ran the kernels the AVX2 cap selects"
  exit 77
fi
DSCALE_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell exec "$binary" --gtest_filter="$filter"
