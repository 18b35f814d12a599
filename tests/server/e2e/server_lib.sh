# Shell helpers for the server's end-to-end scripts (sourced, not run).

# start_server LOG_PREFIX ARGS...: runs `dscale serve ARGS... --port 0` in the background and
# waits for it to listen. Sets SERVER_PID and SERVER_PORT; the server's stdout and stderr go to
# LOG_PREFIX.out and LOG_PREFIX.err.
start_server() {
  local prefix=$1
  shift
  # The logs exist before the server starts: the background shell that opens them may not have
  # run yet when the loop below first reads them.
  : >"$prefix.out"
  : >"$prefix.err"
  "$DSCALE" serve "$@" --host 127.0.0.1 --port 0 >"$prefix.out" 2>"$prefix.err" &
  SERVER_PID=$!
  SERVER_PORT=
  for _ in $(seq 600); do
    SERVER_PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$prefix.out")
    [ -n "$SERVER_PORT" ] && return 0
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "dscale serve did not start:" >&2
  cat "$prefix.err" >&2
  return 1
}

# stop_server PID: SIGTERM, then expects a clean exit (status 0) within 60 s.
stop_server() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 1
  for _ in $(seq 600); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      return $?
    fi
    sleep 0.1
  done
  echo "dscale serve (pid $pid) did not exit after SIGTERM" >&2
  kill -KILL "$pid"
  return 1
}

# free_port: a TCP port nothing listens on right now.
free_port() {
  node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => {
             console.log(s.address().port); s.close(); });"
}

# model_args DIR: the flags that serve the fixture's tiny model.
model_args() {
  echo "--target $1/tiny --drafter $1/tiny-drafter --spec dflash --max-running 16"
}

# wait_healthy URL [PID]: waits up to 30 s for GET URL/health to answer 200; with PID, gives up
# as soon as that process has exited (it will never answer).
wait_healthy() {
  node -e "
    const url = process.argv[1] + '/health';
    const pid = Number(process.argv[2] || 0);
    const deadline = Date.now() + 30000;
    const alive = () => {
      if (!pid) return true;
      try { process.kill(pid, 0); return true; } catch { return false; }
    };
    (async () => {
      while (Date.now() < deadline && alive()) {
        try { if ((await fetch(url)).status === 200) return; } catch {}
        await new Promise((r) => setTimeout(r, 100));
      }
      console.error('no healthy answer from ' + url);
      process.exit(1);
    })();" "$1" "${2:-}"
}

# generation_requests URL: the number of 200 answers to /v1/completions and
# /v1/chat/completions in URL/metrics.
generation_requests() {
  node -e "
    fetch(process.argv[1] + '/metrics').then((r) => r.text()).then((text) => {
      let n = 0;
      for (const m of text.matchAll(
               /^dscale_http_requests_total\{path=\"\/v1\/(chat\/)?completions\",code=\"200\"\} (\d+)$/gm)) {
        n += Number(m[2]);
      }
      console.log(n);
    });" "$1"
}
