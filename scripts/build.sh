#!/usr/bin/env bash
# Configures and builds dscale into build/ (Release). Extra arguments go to cmake's configure.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DSCALE_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
