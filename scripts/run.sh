#!/usr/bin/env bash
# The main job: installs dependencies, builds, and generates with the default model pair in
# DFlash mode. The default pair is the bundled one in models/ when present, else a random tiny
# Qwen3 target and DFlash drafter that `dscale make-tiny` writes to build/models/.
# Extra arguments go to `dscale generate` (e.g. --spec none, --json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
if [ -f models/tiny-target/model.safetensors ] && [ -f models/tiny-dflash/model.safetensors ]; then
  exec build/dscale generate --target models/tiny-target --drafter models/tiny-dflash \
    --spec dflash --prompt "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her friends every day with four. She sells the remainder at the farmers' market daily for \$2 per fresh duck egg. How much in dollars does she make every day at the farmers' market?" \
    --max-tokens 128 "$@"
fi
target=build/models/tiny-random
drafter=build/models/tiny-random-dflash
if [ ! -f "$drafter/model.safetensors" ]; then
  build/dscale make-tiny --out "$target" --drafter-out "$drafter" --seed 1
fi
exec build/dscale generate --target "$target" --drafter "$drafter" --spec dflash \
  --ids 1,2,3,4,5 --max-tokens 32 "$@"
