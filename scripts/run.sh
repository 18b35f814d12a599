#!/usr/bin/env bash
# The main job: installs dependencies, builds, and generates with the default model.
# Until trained models are bundled, the default model is a random tiny Qwen3 checkpoint that
# `dscale make-tiny` writes to build/models/tiny-random.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
model=build/models/tiny-random
if [ ! -f "$model/model.safetensors" ]; then
  build/dscale make-tiny --out "$model" --seed 1
fi
build/dscale generate --target "$model" --spec none --ids 1,2,3,4,5 --max-tokens 32 "$@"
