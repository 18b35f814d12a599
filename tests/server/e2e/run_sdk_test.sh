#!/usr/bin/env bash
# The OpenAI and Anthropic Node SDKs against one `dscale serve` on loopback, then a clean SIGTERM
# shutdown.
# Usage: run_sdk_test.sh DSCALE E2E_DIR
set -euo pipefail
DSCALE=$1
dir=$(cd "$2" && pwd)
source "$(dirname "$0")/server_lib.sh"
mkdir -p "$dir/logs"
# shellcheck disable=SC2046
start_server "$dir/logs/sdk" $(model_args "$dir")
trap 'kill -KILL $SERVER_PID 2>/dev/null || true' EXIT
DSCALE_URL="http://127.0.0.1:$SERVER_PORT/v1" node "$dir/node/sdk_test.mjs" 3
DSCALE_URL="http://127.0.0.1:$SERVER_PORT/v1" node "$dir/node/messages_sdk_test.mjs"
stop_server "$SERVER_PID"
trap - EXIT
grep -q "stopped" "$dir/logs/sdk.err"
