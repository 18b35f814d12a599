#!/usr/bin/env bash
# The main job: installs dependencies, builds, and generates with the default model pair:
# models/tiny-target (a small trained Qwen3 target) drafted by models/tiny-dflash (its DFlash
# drafter), greedy, thinking disabled. Extra arguments go to `dscale generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
build/dscale generate --target models/tiny-target --drafter models/tiny-dflash --spec dflash \
  --prompt "A baker makes 12 loaves of bread every hour. He works 6 hours a day. How many loaves does he make in 5 days?" \
  --max-tokens 128 "$@"
