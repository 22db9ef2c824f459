#!/usr/bin/env bash
# The service throughput table of issue 11, in one run on a GPU host, from a
# relocatable bundle (deploy/bundle.sh):
#   1. the GPU pipeline ceiling per shape, in-process (pipeline_ceiling.py:
#      pinned H2D + production kernel + D2H on 1..8 streams; kernel alone);
#   2. the transport ceiling: attn_server --backend=transport_only (a
#      measurement mode: nothing computed, NaN outputs) under attn_loadgen;
#   3. the service: attn_server --backend=cuda under the same attn_loadgen,
#      and, with PYTHON_CLIENT=1, the Python client's bench (native
#      transport) against the same server, in the same windows;
#   4. mode "peer": bench/peers/torch_grpc_server.py (Python grpcio +
#      PyTorch SDPA) under the same attn_loadgen;
#   5. mode "cuda_batched": attn_server --backend=cuda
#      --batch_delay_us=BATCH_DELAY_US (200), interleaved with the others at
#      the levels of BATCH_LEVELS (32, the issue's point) (any
#      <backend>_batched works the same way).
# Every loadgen run uses the client's default settings unless CLIENT_FLAGS
# says otherwise.
#
# The attn_server modes of a shape run side by side, and each concurrency
# level is measured against one after the other, REPEATS times, in reverse
# order every other time: a point's windows and its ceiling's lie seconds
# apart, where runs on one machine minutes apart differ by 10-15 %. The
# Python client takes its turn in the same rotation, one level per bench
# run (a single run after the windows read 77 % of attn_loadgen's median at
# S=512, c=8, where call S had read 102-120 %: 2026-12-02 seventh run). The
# table reports each point's median over its windows. The peer runs alone
# afterwards, once per level, each level its own loadgen run with a warm-up
# of a third of a second per request in flight at B*S=4096, in proportion
# to B*S (at least WARMUP), and a window of at least 5 s: loadgen measures
# the requests sent in the window, a closed loop sends one when another
# completes, and the peer, receiving every request at once through Python,
# completes none of its first 64 at S=4096 within 13 s (a 10 s warm-up and
# a 3 s window measured nothing on the H200, 2026-12-02 sixth run); at
# S=512 it serves 150-170 requests/s, 64 in flight in under half a second,
# so a 21 s warm-up there only spent the run's time.
#
#   run_throughput_suite.sh <bundle dir> <output dir>
#   env: SHAPES ("1,4096,16,128 1,512,16,128"), LEVELS (1,8,32,64),
#        MODES ("transport_only cuda"; also "peer", "cuda_batched"),
#        DURATION (5s), WARMUP (2s), BATCH_DELAY_US (200), BATCH_LEVELS (32),
#        REPEATS (1: windows per point), SERVER_FLAGS (attn_server only),
#        SERVER_ENV (VAR=value ... for attn_server only), CLIENT_FLAGS,
#        TAG (names the output files), PIPELINE (1: run step 1),
#        PYTHON_CLIENT (0: 1 runs the Python client's bench against the
#        cuda server in every window of every level)
# Files: <TAG>_w<window>c<level>_<mode>_<shape>.csv per window,
# <TAG>_w1c<level>_peer_<shape>.csv for the peer,
# <TAG>_w<window>c<level>_python_<shape>.txt for the Python client; at
# the end, throughput_table.py prints the issue's table and bars from them.
set -uo pipefail
bundle="$(cd "$1" && pwd)"
out="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
# Port files apart from the results, so $out holds only what is read.
ports="$(mktemp -d)"
# Running servers: mode -> pid, and mode -> name (of its files).
declare -A pid_of name_of
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  local pid
  for pid in "${pid_of[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  rm -rf "$ports"
}
trap cleanup EXIT
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
shapes="${SHAPES:-1,4096,16,128 1,512,16,128}"
levels="${LEVELS:-1,8,32,64}"
modes="${MODES:-transport_only cuda}"
tag="${TAG:-default}"
repeats="${REPEATS:-1}"
status=0

# A duration of attn_loadgen's ("5s", "1.5s") in the seconds the Python
# client's bench takes: seconds <duration>
seconds() { echo "${1%s}"; }

# Starts one server in the background; its port lands in $ports/<name>.port,
# its log in <name>.server.log. start_server <mode> <name>
start_server() {
  local mode="$1" name="$2" port_file="$ports/$2.port"
  rm -f "$port_file"
  if [ "$mode" = peer ]; then
    PYTHONPATH="$bundle/python" python3 "$here/peers/torch_grpc_server.py" \
      --port_file="$port_file" >"$out/$name.server.log" 2>&1 &
  else
    local backend="$mode" batching=""
    if [[ "$mode" == *_batched ]]; then
      backend="${mode%_batched}"
      batching="--batch_delay_us=${BATCH_DELAY_US:-200}"
    fi
    # shellcheck disable=SC2086  # flag lists split on purpose
    env ${SERVER_ENV:-} "$bundle/bin/attn_server" --backend="$backend" --listen=127.0.0.1:0 \
      --port_file="$port_file" --queue_capacity=256 --log_level=warning \
      --request_log_level=debug ${SERVER_FLAGS:-} $batching >"$out/$name.server.log" 2>&1 &
  fi
  pid_of[$mode]=$!
  name_of[$mode]="$name"
}

# The port of a server started by start_server, once it listens: port_of <mode>
port_of() {
  local port_file="$ports/${name_of[$1]}.port"
  for _ in $(seq 1 300); do [ -s "$port_file" ] && break; sleep 0.2; done
  cat "$port_file"
}

# One attn_loadgen run, its report in <csv without .csv>.txt:
# loadgen <mode> <shape> <levels> <csv> <label> [<warm-up> <duration>]
loadgen() {
  local port
  port="$(port_of "$1")"
  # shellcheck disable=SC2086  # flag lists split on purpose
  "$bundle/bin/attn_loadgen" --address="127.0.0.1:$port" --shape="$2" \
    --dtype=bf16 --concurrency="$3" --warmup="${6:-${WARMUP:-2s}}" \
    --duration="${7:-${DURATION:-5s}}" \
    --csv="$4" --label="$5" --progress=never ${CLIENT_FLAGS:-} >"${4%.csv}.txt" 2>&1 || status=1
}

# One run of the Python client's bench (native transport) against the cuda
# server at one level, its report in <txt>: python_bench <shape> <level> <txt>
python_bench() {
  PYTHONPATH="$bundle/python" \
    python3 -m attnserve_client bench --transport=native \
    --address="127.0.0.1:$(port_of cuda)" --shape="$1" --dtype=bf16 \
    --concurrency="$2" --warmup="$(seconds "${WARMUP:-2s}")" \
    --duration="$(seconds "${DURATION:-5s}")" >"$3" 2>&1 || status=1
}

# Stops a server started by start_server: stop_server <mode>
stop_server() {
  kill -TERM "${pid_of[$1]}"
  wait "${pid_of[$1]}" || [ "$1" = peer ] ||
    { echo "attn_server ($1) exited non-zero"; tail -5 "$out/${name_of[$1]}.server.log"; status=1; }
  unset "pid_of[$1]"
}

for shape in $shapes; do
  dims="${shape//,/x}"
  if [ "${PIPELINE:-1}" = 1 ]; then
    echo "== GPU pipeline ceiling, shape $shape bf16"
    python3 "$here/pipeline_ceiling.py" --lib "$bundle/lib/libattn_c.so" --shape "$shape" ||
      status=1
  fi
  served=""
  for mode in $modes; do
    [ "$mode" = peer ] && continue
    served="$served $mode"
    start_server "$mode" "${tag}_${mode}_$dims"
  done
  # Who takes a turn in each window: the servers under attn_loadgen, and
  # the Python client against the cuda server.
  rotation="$served" python_note=""
  if [[ " $served " == *" cuda "* ]] && [ "${PYTHON_CLIENT:-0}" = 1 ]; then
    rotation="$rotation python" python_note=" and the Python client (native) against cuda"
  fi
  echo "== attn_loadgen against --backend={${served# }}$python_note, shape $shape bf16, $repeats window(s) per point;" \
       "server: ${SERVER_ENV:+$SERVER_ENV }${SERVER_FLAGS:-defaults}; client: ${CLIENT_FLAGS:-defaults}"
  turn=0
  for window in $(seq 1 "$repeats"); do
    for level in ${levels//,/ }; do
      order="$rotation"
      if [ $((turn % 2)) = 1 ]; then order="$(echo "$rotation" | tr ' ' '\n' | tac | tr '\n' ' ')"; fi
      turn=$((turn + 1))
      for mode in $order; do
        if [ "$mode" = python ]; then
          txt="$out/${tag}_w${window}c${level}_python_$dims.txt"
          python_bench "$shape" "$level" "$txt"
          # The report's row for its level (all of it if the run failed).
          grep -E "^ +$level +[0-9]" "$txt" | sed "s/^ */python w$window c=/" | grep . || cat "$txt"
          continue
        fi
        if [[ "$mode" == *_batched ]] && [[ ",${BATCH_LEVELS:-32}," != *",$level,"* ]]; then
          continue
        fi
        csv="$out/${tag}_w${window}c${level}_${mode}_$dims.csv"
        loadgen "$mode" "$shape" "$level" "$csv" "$mode $shape [$tag w$window]"
        # The report's line for its level (all of it if the run failed early).
        grep -E "^c=" "${csv%.csv}.txt" | sed "s/^/$mode w$window /" | grep . ||
          cat "${csv%.csv}.txt"
      done
    done
  done
  for mode in $served; do stop_server "$mode"; done
  if [[ " $modes " == *" peer "* ]]; then
    echo "== attn_loadgen against the peer, shape $shape bf16 [$tag]"
    # B*S: the peer's time per request grows with the bytes it moves.
    IFS=, read -r batch seq_len _ <<<"$shape"
    tokens=$((batch * seq_len))
    # Whole seconds, to compare.
    min_warmup="$(seconds "${WARMUP:-2s}")"; min_warmup="${min_warmup%.*}"
    duration="$(seconds "${DURATION:-5s}")"; duration="${duration%.*}"
    [ "$duration" -lt 5 ] && duration=5
    start_server peer "${tag}_peer_$dims"
    for level in ${levels//,/ }; do
      # A third of a second per request in flight at B*S=4096.
      warmup=$((level * tokens / (3 * 4096)))
      [ "$warmup" -lt "$min_warmup" ] && warmup="$min_warmup"
      csv="$out/${tag}_w1c${level}_peer_$dims.csv"
      loadgen peer "$shape" "$level" "$csv" "peer $shape [$tag]" "${warmup}s" "${duration}s"
      grep -E "^c=" "${csv%.csv}.txt" | sed "s/^/peer (warm-up ${warmup}s) /" | grep . ||
        cat "${csv%.csv}.txt"
    done
    stop_server peer
  fi
done
/usr/bin/env python3 "$here/throughput_table.py" "$out" || status=1
exit $status
