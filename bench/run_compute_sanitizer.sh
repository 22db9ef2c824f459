#!/usr/bin/env bash
# compute-sanitizer over every registered GPU kernel, for a GPU host (the
# H200 device runs it with binaries built elsewhere): memcheck, racecheck,
# synccheck and initcheck, each over gpu_kernels_test's
# SanitizerSweep tests alone: EveryKernelVariantOnce, every ladder step and tuning
# candidate, and flash_fwd at every head_dim in each launch variant (lengths
# even or not x masked or not; LSE, GQA/MQA, windows, varlen and strides
# spread over them), fp16 and bf16, on the smallest problems that reach
# them (tests/kernels/gpu_kernels_test.cc), and KvCacheVariants: the
# decode tile on dense and paged K/V caches with append, split and not, and
# device tables with pages out of range and lengths past the capacity
# (tests/kernels/kv_cache_gpu_test.cc). Each tool runs under its own
# time limit. First the sweep runs once without a tool ("plain"), for its
# time and to check it passes. One line per tool, e.g.
#
#   racecheck  errors 0  kernels 34/34  runs 106  time <N> s  PASS
#
# (errors: the tool's ERROR SUMMARY; kernels: registered GPU kernels the
# sweep ran, of all; runs: kernel launches checked; cut short by the time
# limit, what it reached). compute-sanitizer needs a runtime that lets it
# attach to the device (it refuses the device under gVisor: said so).
#
#   run_compute_sanitizer.sh <bin dir> <lib dir> <output dir> [tools]
#
# <bin dir>: a folder holding gpu_kernels_test (as run_gpu_suite.sh takes),
# or a CUDA build tree (its tests/kernels/). <lib dir>: shared libraries the
# host lacks (Abseil), or "" for none. [tools]: comma-separated, default
# plain,memcheck,racecheck,synccheck,initcheck. Environment:
# SANITIZER_TIMEOUT_S: seconds per tool (default 600); COMPUTE_SANITIZER: the
# binary (default: on PATH, else /usr/local/cuda/bin/compute-sanitizer).
# Writes <output dir>/<tool>.log and <output dir>/summary.txt. Exits 0 only
# when every tool finished in time with 0 errors and the test passed. Where
# one command may run 10 minutes, run one tool per command with
# SANITIZER_TIMEOUT_S=540.
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: run_compute_sanitizer.sh <bin dir> <lib dir> <output dir> [tools]" >&2
  exit 2
fi
bin="$1"
lib="$2"
out="$3"
tools="${4:-plain,memcheck,racecheck,synccheck,initcheck}"
limit="${SANITIZER_TIMEOUT_S:-600}"
filter='SanitizerSweep.*'  # every kernel variant, then the K/V cache variants

die() { echo "run_compute_sanitizer.sh: $*" >&2; exit 2; }

test_bin="$bin/gpu_kernels_test"
[ -x "$test_bin" ] || test_bin="$bin/tests/kernels/gpu_kernels_test"
[ -x "$test_bin" ] || die "no gpu_kernels_test in $bin or $bin/tests/kernels (a CUDA build)"
if [ -n "$lib" ]; then export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
"$test_bin" --gtest_list_tests --gtest_filter="$filter" 2>/dev/null | grep -q EveryKernelVariantOnce ||
  die "$test_bin has no $filter (built before the sweep existed?)"

for tool in ${tools//,/ }; do
  case "$tool" in
    plain | memcheck | racecheck | synccheck | initcheck) ;;
    *) die "unknown tool '$tool' (plain, memcheck, racecheck, synccheck, initcheck)" ;;
  esac
done
sanitizer="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
if [[ ",$tools," != ",plain," ]]; then
  [ -x "$sanitizer" ] || die "compute-sanitizer not found (set COMPUTE_SANITIZER)"
  "$sanitizer" --version | tail -1
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1
fi
mkdir -p "$out"
: >"$out/summary.txt"
status=0

# The last number of the last match of extended regex $2 in file $1 ("?" if none).
last_number() {
  local found
  found="$(grep -oE "$2" "$1" | tail -1 | grep -oE '[0-9]+' | tail -1)"
  echo "${found:-?}"
}

for tool in ${tools//,/ }; do
  command=()
  # --error-exitcode: errors show in the exit status too, not only in the log.
  if [ "$tool" != plain ]; then command=("$sanitizer" --tool "$tool" --error-exitcode 86); fi
  log="$out/$tool.log"
  started=$SECONDS
  rc=0
  timeout --kill-after=30 "$limit" "${command[@]}" "$test_bin" --gtest_filter="$filter" \
    >"$log" 2>&1 || rc=$?
  seconds=$((SECONDS - started))

  # memcheck, synccheck, initcheck: "ERROR SUMMARY: N errors"; racecheck
  # also "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)".
  errors="-"
  warnings=""
  if [ "$tool" != plain ]; then
    errors="$(last_number "$log" 'ERROR SUMMARY: [0-9]+')"
    if [ "$errors" = "?" ]; then errors="$(last_number "$log" 'hazards displayed \([0-9]+')"; fi
  fi
  if [ "$tool" = racecheck ]; then
    warnings="$(last_number "$log" 'hazards displayed \([0-9]+ errors?, [0-9]+')"
    if [ "$warnings" = "?" ]; then warnings=""; else warnings=" ($warnings racecheck warnings)"; fi
  fi
  sweep="$(grep -oE 'sanitizer sweep: [0-9]+ of [0-9]+ registered GPU kernels covered, [0-9]+ runs' \
    "$log" | tail -1)"
  if [ -n "$sweep" ]; then
    read -r covered total runs < <(echo "$sweep" | grep -oE '[0-9]+' | paste -sd ' ')
    kernels="$covered/$total"
  else
    # Cut short: how far it got, from the line each checked run prints.
    runs="$(grep -c ' rel_err ' "$log")"
    kernels="$(grep ' rel_err ' "$log" | awk '{print $1}' | sort -u | wc -l)/?"
  fi

  kv_runs="$(grep -oE 'sanitizer sweep: K/V cache, [0-9]+ runs' "$log" | tail -1 | grep -oE '[0-9]+')"
  runs="$runs + ${kv_runs:-0} K/V cache"

  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    verdict="TIMEOUT (limit ${limit} s)"
  elif grep -q 'Device not supported' "$log"; then
    # Seen on the gVisor runtime (the device's KINDS.md); Firecracker works.
    verdict="DEVICE NOT SUPPORTED by compute-sanitizer (see $log)"
  elif [ "$rc" -eq 86 ] || { [ "$errors" != "-" ] && [ "$errors" != "?" ] && [ "$errors" -gt 0 ]; }; then
    verdict="ERRORS (see $log)"
  elif grep -q '^\[  SKIPPED \]' "$log"; then
    verdict="SKIPPED (no usable GPU)"
  elif [ "$rc" -ne 0 ] || [ -z "$sweep" ] || [ -z "$kv_runs" ]; then
    verdict="FAILED (exit $rc; see $log)"
  elif [ "$errors" = "?" ]; then
    verdict="NO SUMMARY (see $log)"
  else
    verdict="PASS"
  fi
  [ "$verdict" = PASS ] || status=1
  printf '%-10s errors %s  kernels %s  runs %s  time %d s  %s%s\n' \
    "$tool" "$errors" "$kernels" "$runs" "$seconds" "$verdict" "$warnings" |
    tee -a "$out/summary.txt"
done
exit $status
