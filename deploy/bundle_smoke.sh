#!/usr/bin/env bash
# Smoke test of a relocatable bundle, run from the bundle itself (bundle.sh
# installs this script as <bundle>/smoke.sh): starts the bundle's attn_server
# on a free loopback port, waits until the bundle's attn_cli sees it SERVING,
# prints the server's info and kernels, sends one `attend --check` request
# per shape (result compared with a float64 reference), one through the
# bundled Python package's native transport when python3 has NumPy, prints
# the server's stats, then stops the server with SIGTERM, which must drain
# and exit 0.
#
#   smoke.sh [--backend=auto|cuda|cpu] [--shape=B,S,H,D]... [--kernel=NAME]...
#            [-- extra attn_server flags]
#
# Defaults: --backend=auto, --shape=1,128,2,64 on cpu, else 2,4096,16,128.
# Exit status 0 when every step passed. Logs under $SMOKE_LOG_DIR (default:
# a temporary folder, printed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
backend=auto
shapes=()
kernels=()
server_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --backend=*) backend="${1#*=}" ;;
    --shape=*) shapes+=("${1#*=}") ;;
    --kernel=*) kernels+=("${1#*=}") ;;
    --) shift; server_args=("$@"); break ;;
    *) echo "smoke.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
if [ ${#shapes[@]} -eq 0 ]; then
  if [ "$backend" = cpu ]; then shapes=("1,128,2,64"); else shapes=("2,4096,16,128"); fi
fi
[ ${#kernels[@]} -gt 0 ] || kernels=("")

logs="${SMOKE_LOG_DIR:-$(mktemp -d /tmp/attnserve-smoke.XXXXXX)}"
mkdir -p "$logs"
cli=("$here/bin/attn_cli")
server_pid=""
cleanup() { if [ -n "$server_pid" ]; then kill -KILL "$server_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

step() { echo "smoke: $*"; }
failed=0
fail_step() { echo "smoke: FAIL: $*" >&2; failed=$((failed + 1)); }

step "bundle $here ($(sed -n 2p "$here/MANIFEST" 2>/dev/null || echo 'no MANIFEST'))"
"$here/bin/attn_server" --listen=127.0.0.1:0 --port_file="$logs/port" --backend="$backend" \
  "${server_args[@]}" >"$logs/server.log" 2>&1 &
server_pid=$!
address=""
for _ in $(seq 1 600); do
  if [ -s "$logs/port" ]; then
    address="127.0.0.1:$(cat "$logs/port")"
    if "${cli[@]}" health --address="$address" >/dev/null 2>&1; then break; fi
  fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    server_pid=""
    echo "smoke: FAIL: attn_server exited during start-up:" >&2
    sed 's/^/    /' "$logs/server.log" >&2
    exit 1
  fi
  sleep 0.2
done
if ! "${cli[@]}" health --address="$address"; then
  fail_step "attn_server not SERVING after 120 s"
else
  step "attn_server SERVING at $address (backend $backend)"
  "${cli[@]}" info --address="$address" || fail_step "attn_cli info"
  "${cli[@]}" kernels --address="$address" || fail_step "attn_cli kernels"
  for shape in "${shapes[@]}"; do
    for kernel in "${kernels[@]}"; do
      step "attend --shape=$shape${kernel:+ --kernel=$kernel} --check"
      if ! "${cli[@]}" attend --address="$address" --shape="$shape" ${kernel:+--kernel="$kernel"} \
           --check --repeat=3 2>&1 | tee "$logs/attend.log"; then
        fail_step "attend --shape=$shape${kernel:+ --kernel=$kernel}"
      fi
    done
  done
  # The Python package through its native transport (the bundle's
  # lib/libattn_client_c.so; no grpcio needed), when python3 has NumPy.
  if [ -d "$here/python" ] && command -v python3 >/dev/null 2>&1 &&
     python3 -c "import numpy" 2>/dev/null; then
    step "python3 -m attnserve_client attend --transport=native --check"
    PYTHONPATH="$here/python" python3 -m attnserve_client attend --address="$address" \
      --transport=native --shape=1,256,4,64 --check || fail_step "python native attend"
  fi
  "${cli[@]}" stats --address="$address" || fail_step "attn_cli stats"
fi

kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
if [ "$rc" -eq 0 ]; then step "attn_server drained and exited 0 on SIGTERM"; else fail_step "attn_server exited $rc on SIGTERM"; fi
step "server log: $logs/server.log"
if [ "$failed" -eq 0 ]; then step "PASS"; else echo "smoke: $failed step(s) failed" >&2; fi
[ "$failed" -eq 0 ]
