#!/usr/bin/env bash
# Every stage in order, on CUDA when present (PyTorch), else on the CPU with both cores:
# data, target, the choice between its best-validation and final weights (eval_target.py), the
# target's own answers, drafter, export, the Domino head, then (with
# build/dscale) the export checks, both DVL predictors and the acceptance benchmark.
# Each training stage stops within its wall-clock budget (minutes, below; the step count is
# fixed from the first timed steps and saved, so `--resume` continues the same schedule) and
# checkpoints to work/<stage>/ckpt.pt. Stage logs go to work/logs/.
#   training/run_all.sh                     # all stages
#   TARGET_MIN=300 DRAFTER_MIN=120 training/run_all.sh   # longer budgets (a CPU run)
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-/usr/bin/python3}
TARGET_MIN=${TARGET_MIN:-5}
DRAFTER_MIN=${DRAFTER_MIN:-2}
DOMINO_MIN=${DOMINO_MIN:-0.6}
EXPORT=${EXPORT:-..}  # where models/tiny-target and models/tiny-dflash are written
mkdir -p work/logs
stage() { local name=$1; shift; echo "== $name: $*"; "$@" 2>&1 | tee "work/logs/$name.log"; }
[ -f work/data/mixture.pt ] || stage prepare_data $PY prepare_data.py
stage train_target $PY train_target.py --minutes "$TARGET_MIN" --steps 1000000 --eval-every 250
stage eval_target $PY eval_target.py --test "${TEST_PROMPTS:-100}"
stage export_target $PY export.py target --out "$EXPORT/models/tiny-target"
stage generate_responses $PY generate_responses.py --batch 1024 \
  --exported "$EXPORT/models/tiny-target"
stage train_drafter $PY train_drafter.py --minutes "$DRAFTER_MIN" --steps 1000000
stage export_drafter $PY export.py drafter --out "$EXPORT/models/tiny-dflash"
stage train_domino $PY train_domino.py --minutes "$DOMINO_MIN" --steps 1000000 \
  --target "$EXPORT/models/tiny-target" --drafter "$EXPORT/models/tiny-dflash"
stage export_domino $PY export.py domino --out "$EXPORT/models/tiny-dflash"
if [ -x ../build/dscale ]; then
  stage check_export $PY check_export.py
  stage make_predictor ./make_predictor.sh --install
  stage make_predictor_domino ./make_predictor.sh --head domino --install
  stage bench $PY bench_acceptance.py
  stage bench_domino $PY bench_acceptance.py --drafter-head domino --out work/bench-domino.json
fi
