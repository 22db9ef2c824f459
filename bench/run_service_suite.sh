#!/usr/bin/env bash
# GPU validation of the service from a relocatable bundle (deploy/bundle.sh),
# for a GPU host without gRPC packages:
#   1. the gpu-labelled end-to-end server tests (binary server_e2e_gpu_test
#      copied into <bundle>/bin), against the bundle's attn_server;
#   2. the bundle's smoke test on the CUDA backend with a B=4, S=4096, H=16,
#      D=128 bf16 request (checked against float64, timing breakdown printed);
#   3. an attn_loadgen closed-loop sweep, concurrency 1..64, B=1, S=4096,
#      H=16, D=128 bf16, against a CUDA-backend server: CSV, JSON and SVG.
#
#   run_service_suite.sh <bundle dir> <output dir> [steps: e2e,smoke,loadgen]
set -uo pipefail
bundle="$(cd "$1" && pwd)"
out="$2"
steps="${3:-e2e,smoke,loadgen}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0

if [[ ",$steps," == *",e2e,"* ]]; then
  echo "== server end-to-end tests, CUDA backend"
  ATTN_SERVER_BINARY="$bundle/bin/attn_server" "$bundle/bin/server_e2e_gpu_test" \
    >"$out/server_e2e_gpu_test.log" 2>&1 || status=1
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]' "$out/server_e2e_gpu_test.log" | tail -12
fi

if [[ ",$steps," == *",smoke,"* ]]; then
  echo "== bundle smoke test, CUDA backend, B=4 S=4096 H=16 D=128 bf16"
  SMOKE_LOG_DIR="$out/smoke" bash "$bundle/smoke.sh" --backend=cuda --shape=4,4096,16,128 \
    >"$out/smoke.txt" 2>&1 || status=1
  cat "$out/smoke.txt"
fi

if [[ ",$steps," == *",loadgen,"* ]]; then
  echo "== attn_loadgen sweep, concurrency 1..64"
  "$bundle/bin/attn_server" --backend=cuda --listen=127.0.0.1:0 --port_file="$out/port" \
    --queue_capacity=128 --log_level=warning >"$out/loadgen_server.log" 2>&1 &
  server=$!
  for _ in $(seq 1 300); do [ -s "$out/port" ] && break; sleep 0.2; done
  "$bundle/bin/attn_loadgen" --address="127.0.0.1:$(cat "$out/port")" --shape=1,4096,16,128 \
    --dtype=bf16 --concurrency=1:64:x2 --warmup=2s --duration=8s \
    --out_dir="$out/loadgen" --label="H200, CUDA backend, loopback" --progress=never \
    >"$out/loadgen.txt" 2>&1 || status=1
  cat "$out/loadgen.txt"
  kill -TERM "$server"
  wait "$server" || { echo "attn_server exited non-zero after the sweep"; status=1; }
fi
exit $status
