#!/usr/bin/env bash
# Reruns every stage: tokenizer, target, the target's own responses, drafter, export, checks.
# CPU only (Debian python3-torch); one thread per stage. Needs build/dscale for the checks.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-/usr/bin/python3}
mkdir -p work/logs
$PY train_tokenizer.py --vocab 4096                      | tee work/logs/train_tokenizer.log
$PY train_target.py --steps 300 --seed 1234              | tee work/logs/train_target.log
$PY generate_responses.py --num 1600 --seed 4321         | tee work/logs/generate_responses.log
$PY train_drafter.py --steps 300 --seed 99               | tee work/logs/train_drafter.log
$PY export.py target
$PY export.py drafter
if [ -x ../build/dscale ]; then
  $PY check_export.py
  $PY bench_acceptance.py | tee work/logs/bench.log
fi
