#!/usr/bin/env bash
# The scale-out recipe of docs/SCALE_OUT.md on loopback: two `dscale serve` processes behind
# nginx (round-robin), the OpenAI SDK test through nginx, then both servers must have served
# generation requests and must shut down cleanly. Exits 77 (CTest: skipped) without nginx.
# Usage: nginx_test.sh DSCALE E2E_DIR NGINX_CONF_TEMPLATE
set -euo pipefail
DSCALE=$1
dir=$(cd "$2" && pwd)
template=$3
nginx=$(command -v nginx || true)
[ -z "$nginx" ] && [ -x /usr/sbin/nginx ] && nginx=/usr/sbin/nginx
if [ -z "$nginx" ]; then
  echo "SKIPPED: nginx is not installed (scripts/install_deps.sh installs it)"
  exit 77
fi
source "$(dirname "$0")/server_lib.sh"

prefix=$dir/nginx
rm -rf "$prefix"
mkdir -p "$prefix/tmp" "$prefix/logs"
pids=()
nginx_pid=
cleanup() {
  # nginx's master stops its workers on TERM; KILL would leave a worker holding the test's
  # output open, and CTest waiting for it until the test's timeout.
  if [ -n "$nginx_pid" ]; then
    kill -TERM "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
  fi
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# shellcheck disable=SC2046
start_server "$prefix/logs/a" $(model_args "$dir")
pid_a=$SERVER_PID port_a=$SERVER_PORT
pids+=("$pid_a")
# shellcheck disable=SC2046
start_server "$prefix/logs/b" $(model_args "$dir")
pid_b=$SERVER_PID port_b=$SERVER_PORT
pids+=("$pid_b")

# The port free_port found may be taken by another process before nginx binds it (tests run side
# by side): then nginx exits, and the next try picks another port.
for _ in 1 2 3 4 5; do
  port=$(free_port)
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@PORT@|$port|g" -e "s|@BACKEND_A@|$port_a|g" \
    -e "s|@BACKEND_B@|$port_b|g" "$template" >"$prefix/nginx.conf"
  "$nginx" -t -p "$prefix" -e "$prefix/logs/error.log" -c "$prefix/nginx.conf" -q
  "$nginx" -p "$prefix" -e "$prefix/logs/error.log" -c "$prefix/nginx.conf" -g 'daemon off;' &
  nginx_pid=$!
  pids+=("$nginx_pid")
  # Healthy and still running a moment later: the answer came from this nginx, not from a
  # process that took the port while nginx failed to bind it.
  if wait_healthy "http://127.0.0.1:$port" "$nginx_pid" && sleep 0.5 &&
    kill -0 "$nginx_pid" 2>/dev/null; then
    break
  fi
  kill -TERM "$nginx_pid" 2>/dev/null || true
  wait "$nginx_pid" 2>/dev/null || true
  nginx_pid=
done
if [ -z "$nginx_pid" ]; then
  echo "nginx did not start:" >&2
  cat "$prefix/logs/error.log" >&2 || true
  exit 1
fi

DSCALE_URL="http://127.0.0.1:$port/v1" node "$dir/node/sdk_test.mjs" 4

served_a=$(generation_requests "http://127.0.0.1:$port_a")
served_b=$(generation_requests "http://127.0.0.1:$port_b")
echo "generation requests served: $served_a by :$port_a, $served_b by :$port_b"
if [ "$served_a" -eq 0 ] || [ "$served_b" -eq 0 ]; then
  echo "nginx did not spread the requests over both servers" >&2
  exit 1
fi

stop_server "$pid_a"
stop_server "$pid_b"
kill -QUIT "$nginx_pid"
wait "$nginx_pid" || true
trap - EXIT
echo "nginx round-robin over two servers: passed"
