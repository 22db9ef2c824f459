#!/usr/bin/env bash
# One pass of GPU validation and measurement, for a GPU host (the H200
# device runs it with binaries built elsewhere):
#   1. the gpu-labelled kernel tests,
#   2. attn_tune (step 7) writing a tuning table for this GPU,
#   3. the ladder table against PyTorch's FA2 and cuDNN (needs torch),
#   4. the breadth table of the production kernel (needs torch),
#   5. the decode table: decode, split-KV, paged K/V and append (needs torch),
#   6. static SASS counts per ladder step (needs cuobjdump and c++filt).
#
#   run_gpu_suite.sh <bin dir> <lib dir> <output dir>
#                    [steps: test,tune,ladder,breadth,decode,sass]
# Logs and results land in <output dir>; the tuning table it writes is used
# by step 3 through ATTN_TUNING_TABLE.
set -uo pipefail
bin="$1"
lib="$2"
out="$3"
steps="${4:-test,tune,ladder,breadth,decode,sass}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv 2>&1

if [[ ",$steps," == *",test,"* ]]; then
  echo "== gpu tests"
  "$bin/gpu_kernels_test" >"$out/gpu_test.log" 2>&1 || status=1
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED|Failure' "$out/gpu_test.log" | tail -20
fi

if [[ ",$steps," == *",tune,"* ]]; then
  echo "== attn_tune"
  "$bin/attn_tune" --write="$out/tuned_configs.tsv" >"$out/tune.log" 2>&1 || status=1
  sed -n '/^candidate/,$p' "$out/tune.log"
fi

if [[ ",$steps," == *",ladder,"* ]]; then
  echo "== ladder table"
  if [ -f "$out/tuned_configs.tsv" ]; then export ATTN_TUNING_TABLE="$out/tuned_configs.tsv"; fi
  PYTHONUNBUFFERED=1 python3 "$here/ladder_table.py" --lib "$lib/libattn_c.so" --out "$out" \
    >"$out/ladder.log" 2>&1 || status=1
  sed -n '/^GPU /,$p' "$out/ladder.log"
  tail -3 "$out/ladder.log"
fi
if [[ ",$steps," == *",breadth,"* ]]; then
  echo "== breadth table"
  PYTHONUNBUFFERED=1 python3 "$here/breadth_table.py" --lib "$lib/libattn_c.so" --out "$out" \
    >"$out/breadth.log" 2>&1 || status=1
  cat "$out/breadth.md" 2>/dev/null || tail -5 "$out/breadth.log"
fi
if [[ ",$steps," == *",decode,"* ]]; then
  echo "== decode table"
  PYTHONUNBUFFERED=1 python3 "$here/decode_table.py" --lib "$lib/libattn_c.so" --out "$out" \
    >"$out/decode.log" 2>&1 || status=1
  cat "$out/decode.md" 2>/dev/null || tail -5 "$out/decode.log"
fi

if [[ ",$steps," == *",sass,"* ]]; then
  echo "== SASS counts"
  python3 "$here/sass_counts.py" --lib "$lib/libattn_c.so" --out "$out" >/dev/null \
    2>"$out/sass.err" || { status=1; tail -3 "$out/sass.err"; }
fi
exit $status
