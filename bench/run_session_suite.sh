#!/usr/bin/env bash
# GPU validation and measurement of KV-cache sessions (issue 32) from a
# relocatable bundle (deploy/bundle.sh), for a GPU host without gRPC:
#   1. the gpu-labelled session end-to-end tests (server_session_e2e_gpu_test,
#      and server_e2e_gpu_test for the stateless paths the CUDA executor
#      shares, copied into <bundle>/bin), against the bundle's attn_server;
#   2. attn_cli session --check: 8 sessions of a 32/8-head, d=128 model,
#      prefilled across page boundaries and decoded, every output checked
#      against float64 on the host;
#   3. decode traces with attn_cli session (8 and 64 sessions, and 64 in two
#      batches in flight; 4 layers, prompt 2048 in chunks of 128, 32
#      generated), then the 8-session
#      decode step through plain Attend (B=8, Sq=1, Skv=2048: the whole
#      cache shipped every call) for the stateless comparison (64 sessions'
#      cache, 1 GiB per call, is past the default request limits).
#
#   4. (step bar, not by default) issue 32's trace: 64 sessions, GQA 32/8,
#      d=128, prompt 8192 in chunks of 128, 64 generated, $BAR_LAYERS layers
#      (default 8), the pool --kv_cache_memory_fraction=0.9 of free device
#      memory; once as one batch of 64 and once as $BAR_BATCHES (default 2)
#      batches in flight; the server's request log summarized per call
#      (session_log_summary.py: server time against kernel time);
#      BAR_SERVER_FLAGS adds attn_server flags (e.g. --nospin_wait).
#
#   5. (step peer, not by default) the stateful Python peer
#      (peers/torch_session_server.py: grpcio + PyTorch SDPA over a static
#      GPU cache): attn_cli session --check against it, then the bar's trace
#      through it, one batch and $BAR_BATCHES batches (BAR_LAYERS as above).
#
#   6. (step wait, not by default) bench/event_wait_latency.cu, built with
#      the host's nvcc: how late a blocking-sync wait and a polling wait
#      return after the GPU finished (attn_server --spin_wait).
#
#   run_session_suite.sh <bundle dir> <output dir> [steps: e2e,check,trace,bar,peer,wait]
set -uo pipefail
bundle="$(cd "$1" && pwd)"
out="$2"
steps="${3:-e2e,check,trace}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0

if [[ ",$steps," == *",e2e,"* ]]; then
  for test in server_session_e2e_gpu_test server_e2e_gpu_test; do
    echo "== $test, CUDA backend"
    ATTN_SERVER_BINARY="$bundle/bin/attn_server" "$bundle/bin/$test" >"$out/$test.log" 2>&1 ||
      status=1
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]' "$out/$test.log" | tail -12
  done
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Starts a CUDA-backend server (a 4 GiB page pool unless other flags follow
# the log's name); sets $address.
start_server() {
  local name="$1"
  shift
  rm -f "$out/port"
  "$bundle/bin/attn_server" --backend=cuda --devices=0 --listen=127.0.0.1:0 \
    --port_file="$out/port" --kv_cache_bytes=$((4 << 30)) --log_level=info "$@" \
    >"$out/$name.server.log" 2>&1 &
  server=$!
  for _ in $(seq 1 300); do [ -s "$out/port" ] && break; sleep 0.2; done
  address="127.0.0.1:$(cat "$out/port")"
}
stop_server() {
  kill -TERM "$server"
  wait "$server" || { echo "attn_server exited non-zero"; status=1; }
}

if [[ ",$steps," == *",check,"* ]]; then
  echo "== attn_cli session --check, 8 sessions, L=2, 32/8 heads, d=128, prompt 300"
  start_server check
  "$bundle/bin/attn_cli" session --address="$address" --session_shape=2,32,8,128 --sessions=8 \
    --prompt=300 --chunk=128 --generate=8 --check --tolerance=0.02 2>&1 | tee "$out/check.txt" ||
    status=1
  stop_server
fi

if [[ ",$steps," == *",trace,"* ]]; then
  start_server trace
  for run in 8,1 64,1 64,2; do
    n="${run%,*}" batches="${run#*,}"
    echo "== decode trace: $n sessions in $batches batch(es) x (L=4, 32/8 heads, d=128)," \
      "prompt 2048, 32 generated"
    "$bundle/bin/attn_cli" session --address="$address" --session_shape=4,32,8,128 \
      --sessions="$n" --batches="$batches" --prompt=2048 --chunk=128 --generate=32 2>&1 |
      tee "$out/trace_sessions_${n}_$batches.txt" || status=1
  done
  echo "== the 8-session decode step stateless: Attend B=8, Sq=1, Skv=2048 (K and V shipped)"
  "$bundle/bin/attn_cli" attend --address="$address" --shape=8,1,32,128 \
    --kv_shape=8,2048,8,128 --causal --repeat=20 2>&1 | tee "$out/trace_stateless.txt" ||
    status=1
  "$bundle/bin/attn_cli" stats --address="$address" >"$out/trace_stats.txt" 2>&1
  stop_server
fi
if [[ ",$steps," == *",bar,"* ]]; then
  layers="${BAR_LAYERS:-8}"
  echo "== issue 32's trace: 64 sessions x (L=$layers, 32/8 heads, d=128), prompt 8192, 64 generated"
  # shellcheck disable=SC2086 # BAR_SERVER_FLAGS: more attn_server flags, split on spaces
  start_server bar --kv_cache_memory_fraction=0.9 ${BAR_SERVER_FLAGS:-}
  grep -E "KV-cache sessions:|ready:" "$out/bar.server.log"
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
  for batches in 1 "${BAR_BATCHES:-2}"; do
    echo "-- $batches batch(es) in flight"
    "$bundle/bin/attn_cli" session --address="$address" --session_shape="$layers,32,8,128" \
      --sessions=64 --batches="$batches" --prompt=8192 --chunk=128 --generate=64 2>&1 |
      tee "$out/bar_sessions_$batches.txt" || status=1
  done
  stop_server
  python3 "$here/session_log_summary.py" "$out/bar.server.log" --skip 2 | tee "$out/bar_summary.md"
fi
if [[ ",$steps," == *",peer,"* ]]; then
  layers="${BAR_LAYERS:-8}"
  # Starts the peer with `$1` layers' worth of geometry checked at the first
  # open; sets $address.
  start_peer() {
    local name="$1"
    shift
    rm -f "$out/port"
    PYTHONPATH="$bundle/python" python3 "$here/peers/torch_session_server.py" \
      --port_file="$out/port" "$@" >"$out/$name.peer.log" 2>&1 &
    server=$!
    for _ in $(seq 1 600); do [ -s "$out/port" ] && break; sleep 0.2; done
    address="127.0.0.1:$(cat "$out/port")"
  }
  echo "== the Python peer: attn_cli session --check, 8 sessions, L=2, 32/8 heads, d=128"
  start_peer peer_check --slots=8 --max_tokens=308
  "$bundle/bin/attn_cli" session --address="$address" --session_shape=2,32,8,128 --sessions=8 \
    --prompt=300 --chunk=128 --generate=8 --check --tolerance=0.02 2>&1 |
    tee "$out/peer_check.txt" || status=1
  kill -TERM "$server"; wait "$server"
  echo "== the Python peer: issue 32's trace, 64 sessions x (L=$layers, 32/8 heads, d=128)"
  start_peer peer_bar --slots=64 --max_tokens=$((8192 + 64))
  for batches in 1 "${BAR_BATCHES:-2}"; do
    echo "-- $batches batch(es) in flight"
    "$bundle/bin/attn_cli" session --address="$address" --session_shape="$layers,32,8,128" \
      --sessions=64 --batches="$batches" --prompt=8192 --chunk=128 --generate=64 2>&1 |
      tee "$out/peer_sessions_$batches.txt" || status=1
  done
  kill -TERM "$server"; wait "$server"
fi
if [[ ",$steps," == *",wait,"* ]]; then
  echo "== event wait lateness (bench/event_wait_latency.cu)"
  arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)"
  nvcc -O2 -arch="sm_$arch" -o "$out/event_wait_latency" "$here/event_wait_latency.cu" &&
    "$out/event_wait_latency" 600 524288 290 | tee "$out/event_wait.md" || status=1
fi
exit $status
