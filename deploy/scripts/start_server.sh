# shellcheck shell=bash
# Sourced, not run (demo.sh, deploy/checks, tests/package):
#
#   trap 'stop_server KILL' EXIT
#   start_server BINARY DIR [FLAGS...] || fail
#
# starts attn_server BINARY on a free loopback port (--listen=127.0.0.1:0,
# --port_file=DIR/port, its log in DIR/server.log) and returns once the port
# file exists, which the server writes when its health says SERVING. Sets
# server_pid and server_address (127.0.0.1:PORT). Waits on that condition or
# the server's exit, up to 60 s; on failure prints the log and returns 1 (the
# caller stops server_pid).
start_server() {
  local binary="$1" dir="$2" _
  shift 2
  "$binary" --listen=127.0.0.1:0 --port_file="$dir/port" "$@" >"$dir/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    [ -s "$dir/port" ] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "attn_server exited during start-up; its log:" >&2
      cat "$dir/server.log" >&2
      return 1
    fi
    sleep 0.1
  done
  if [ ! -s "$dir/port" ]; then
    echo "attn_server wrote no port file (SERVING) within 60 s; its log:" >&2
    cat "$dir/server.log" >&2
    return 1
  fi
  # shellcheck disable=SC2034 # read by the caller
  server_address="127.0.0.1:$(head -n1 "$dir/port")"
}

# stop_server [SIGNAL]: sends SIGNAL (default TERM) to server_pid if it still
# runs and reaps it, without failing (for EXIT traps); clears server_pid.
stop_server() {
  if [ -n "${server_pid:-}" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "-${1:-TERM}" "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
