#!/usr/bin/env bash
# CTest fixture: installs the OpenAI and Anthropic Node SDKs (tests/server/e2e/sdk/package-lock.json) into the
# build folder. Needs node and npm (scripts/install_deps.sh) and the npm registry once; later
# runs reuse the installed copy.
# Usage: npm_install.sh NODE_DIR
set -euo pipefail
cd "$1"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "server e2e: node and npm are needed for the OpenAI SDK tests; run scripts/install_deps.sh" >&2
  exit 1
fi
if [ -f node_modules/openai/package.json ] && [ -f node_modules/@anthropic-ai/sdk/package.json ] &&
   [ node_modules/.package-lock.json -nt package-lock.json ]; then
  echo "openai $(node -p "require('./node_modules/openai/package.json').version") already installed"
  exit 0
fi
if ! npm ci --no-audit --no-fund --loglevel=error; then
  echo "server e2e: 'npm ci' could not install the openai package into $PWD." >&2
  echo "It needs the npm registry (https://registry.npmjs.org) the first time; check the network" >&2
  echo "or proxy settings, then run the tests again." >&2
  exit 1
fi
echo "installed openai $(node -p "require('./node_modules/openai/package.json').version")"
