#!/usr/bin/env bash
# Installs dependencies, builds and runs the whole test suite (all CTest labels).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh -DDSCALE_WERROR=ON
ctest --test-dir build --output-on-failure --parallel "$(nproc)" "$@"
