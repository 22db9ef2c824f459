#!/usr/bin/env bash
# The service throughput table of issue 11, in one run on a GPU host, from a
# relocatable bundle (deploy/bundle.sh):
#   1. the GPU pipeline ceiling per shape, in-process (pipeline_ceiling.py:
#      pinned H2D + production kernel + D2H on 1..8 streams; kernel alone);
#   2. the transport ceiling: attn_server --backend=transport_only (a
#      measurement mode: nothing computed, NaN outputs) under attn_loadgen;
#   3. the service: attn_server --backend=cuda under the same attn_loadgen,
#      and, with PYTHON_CLIENT=1, the Python client's bench (native
#      transport) against the same server;
#   4. mode "peer": bench/peers/torch_grpc_server.py (Python grpcio +
#      PyTorch SDPA) under the same attn_loadgen.
# Every loadgen run uses the client's default settings unless CLIENT_FLAGS
# says otherwise.
#
#   run_throughput_suite.sh <bundle dir> <output dir>
#   env: SHAPES ("1,4096,16,128 1,512,16,128"), LEVELS (1,8,32,64),
#        MODES ("transport_only cuda"; also "peer"), DURATION (5s), WARMUP (2s),
#        SERVER_FLAGS (attn_server only), SERVER_ENV (VAR=value ... for
#        attn_server only),
#        CLIENT_FLAGS, TAG (names the output files), PIPELINE (1: run step
#        1), PYTHON_CLIENT (0), ROUNDS (1: each shape's modes run ROUNDS
#        times, in reverse order every other round, files tagged
#        <TAG>_r<round>; the same machine's rounds show the spread)
# At the end, throughput_table.py prints the issue's table and bars from
# the output folder.
set -uo pipefail
bundle="$(cd "$1" && pwd)"
out="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
# Port files apart from the results, so $out holds only what is read.
ports="$(mktemp -d)"
trap 'rm -rf "$ports"' EXIT
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
shapes="${SHAPES:-1,4096,16,128 1,512,16,128}"
levels="${LEVELS:-1,8,32,64}"
modes="${MODES:-transport_only cuda}"
tag="${TAG:-default}"
rounds="${ROUNDS:-1}"
status=0

# One server mode under attn_loadgen (and the Python client after the cuda
# one): run_mode <shape> <tag of the round> <mode>.
run_mode() {
  local shape="$1" round_tag="$2" mode="$3"
  local name port_file server
  name="${round_tag}_${mode}_${shape//,/x}"
  echo "== attn_loadgen against --backend=$mode, shape $shape bf16 [$round_tag]" \
       "server: ${SERVER_ENV:+$SERVER_ENV }${SERVER_FLAGS:-defaults}; client: ${CLIENT_FLAGS:-defaults}"
  port_file="$ports/$name.port"
  rm -f "$port_file"
  if [ "$mode" = peer ]; then
    PYTHONPATH="$bundle/python" python3 "$here/peers/torch_grpc_server.py" \
      --port_file="$port_file" >"$out/$name.server.log" 2>&1 &
  else
    # shellcheck disable=SC2086  # flag lists split on purpose
    env ${SERVER_ENV:-} "$bundle/bin/attn_server" --backend="$mode" --listen=127.0.0.1:0 \
      --port_file="$port_file" --queue_capacity=256 --log_level=warning \
      --request_log_level=debug ${SERVER_FLAGS:-} >"$out/$name.server.log" 2>&1 &
  fi
  server=$!
  for _ in $(seq 1 300); do [ -s "$port_file" ] && break; sleep 0.2; done
  # shellcheck disable=SC2086
  "$bundle/bin/attn_loadgen" --address="127.0.0.1:$(cat "$port_file")" --shape="$shape" \
    --dtype=bf16 --concurrency="$levels" --warmup="${WARMUP:-2s}" --duration="${DURATION:-5s}" \
    --csv="$out/$name.csv" --label="$mode $shape [$round_tag]" --progress=never ${CLIENT_FLAGS:-} \
    >"$out/$name.txt" 2>&1 || status=1
  cat "$out/$name.txt"
  if [ "$mode" = cuda ] && [ "${PYTHON_CLIENT:-0}" = 1 ]; then
    echo "== Python client (native transport) against --backend=cuda, shape $shape bf16 [$round_tag]"
    seconds() { local d="$1"; echo "${d%s}"; }
    PYTHONPATH="$bundle/python" \
      python3 -m attnserve_client bench --transport=native \
      --address="127.0.0.1:$(cat "$port_file")" --shape="$shape" --dtype=bf16 \
      --concurrency="$levels" --warmup="$(seconds "${WARMUP:-2s}")" \
      --duration="$(seconds "${DURATION:-5s}")" >"$out/${name}_python.txt" 2>&1 || status=1
    cat "$out/${name}_python.txt"
  fi
  kill -TERM "$server"
  wait "$server" || [ "$mode" = peer ] ||
    { echo "attn_server ($mode) exited non-zero"; tail -5 "$out/$name.server.log"; status=1; }
}

for shape in $shapes; do
  if [ "${PIPELINE:-1}" = 1 ]; then
    echo "== GPU pipeline ceiling, shape $shape bf16"
    python3 "$here/pipeline_ceiling.py" --lib "$bundle/lib/libattn_c.so" --shape "$shape" ||
      status=1
  fi
  for round in $(seq 1 "$rounds"); do
    order="$modes"
    if [ $((round % 2)) = 0 ]; then order="$(echo "$modes" | tr ' ' '\n' | tac | tr '\n' ' ')"; fi
    round_tag="$tag"
    if [ "$rounds" -gt 1 ]; then round_tag="${tag}_r$round"; fi
    for mode in $order; do
      run_mode "$shape" "$round_tag" "$mode"
    done
  done
done
/usr/bin/env python3 "$here/throughput_table.py" "$out" || status=1
exit $status
