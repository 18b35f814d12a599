#!/usr/bin/env bash
# The main job: installs dependencies, builds, and generates with the default model pair:
# models/tiny-target (a small trained Qwen3 target) drafted by models/tiny-dflash (its DFlash
# drafter), greedy, thinking disabled, on a GSM8K test question in the benchmarks' format (the
# pair was trained on GSM8K train in that format). Extra arguments go to `dscale generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
build/dscale generate --target models/tiny-target --drafter models/tiny-dflash --spec dflash \
  --prompt "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?
Please reason step by step, and put your final answer within \\boxed{}." \
  --max-tokens 256 "$@"
