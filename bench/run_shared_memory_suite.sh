#!/usr/bin/env bash
# Issue 12's table in one run on a GPU host, from a relocatable bundle
# (deploy/bundle.sh): the GPU pipeline ceiling and the kernel alone
# (pipeline_ceiling.py, in-process), then one attn_server --backend=cuda
# --allow_shared_memory under attn_loadgen three ways: plain gRPC (tensors in
# the messages), --shared_memory=system (POSIX shm, DMA straight to and from
# it) and --shared_memory=cuda (the client's GPU memory by CUDA IPC; no
# tensor byte moves). attn_loadgen checks the first region request's output
# bit for bit against the inline path's; the inline path is checked against
# float64 by the gpu test suites.
#
#   run_shared_memory_suite.sh <bundle dir> <output dir>
#   env: SHAPE (1,4096,16,128), LEVELS (1,8,32), DURATION (5s), WARMUP (2s),
#        SERVER_FLAGS, PIPELINE (1: run the in-process ceilings)
set -uo pipefail
bundle="$(cd "$1" && pwd)"
out="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
shape="${SHAPE:-1,4096,16,128}"
levels="${LEVELS:-1,8,32}"
status=0

if [ "${PIPELINE:-1}" = 1 ]; then
  echo "== GPU pipeline ceiling and kernel alone, shape $shape bf16"
  python3 "$here/pipeline_ceiling.py" --lib "$bundle/lib/libattn_c.so" --shape "$shape" || status=1
fi

rm -f "$out/server.port"
# shellcheck disable=SC2086  # flag lists split on purpose
"$bundle/bin/attn_server" --backend=cuda --allow_shared_memory --listen=127.0.0.1:0 \
  --port_file="$out/server.port" --queue_capacity=256 --max_admitted_bytes=8589934592 \
  --log_level=warning --request_log_level=debug ${SERVER_FLAGS:-} >"$out/server.log" 2>&1 &
server=$!
for _ in $(seq 1 300); do [ -s "$out/server.port" ] && break; sleep 0.2; done
for memory in none system cuda; do
  echo "== attn_loadgen --shared_memory=$memory, shape $shape bf16; server: ${SERVER_FLAGS:-defaults}"
  "$bundle/bin/attn_loadgen" --address="127.0.0.1:$(cat "$out/server.port")" --shape="$shape" \
    --dtype=bf16 --concurrency="$levels" --warmup="${WARMUP:-2s}" --duration="${DURATION:-5s}" \
    --shared_memory="$memory" --csv="$out/shm_$memory.csv" --label="shared_memory=$memory" \
    --progress=never >"$out/shm_$memory.txt" 2>&1 || status=1
  cat "$out/shm_$memory.txt"
done
kill -TERM "$server"
wait "$server" || { echo "attn_server exited non-zero"; tail -5 "$out/server.log"; status=1; }
exit $status
