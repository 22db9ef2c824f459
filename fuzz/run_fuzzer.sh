#!/usr/bin/env bash
# A bounded, repeatable libFuzzer run of one target, as CI runs it:
#
#   run_fuzzer.sh FUZZER SEED_CORPUS WORK_DIR RUNS [libFuzzer flags...]
#
# Runs RUNS inputs, starting from the checked-in SEED_CORPUS (read only),
# with a fixed seed and address-space randomisation off; WORK_DIR is emptied
# first and gets the inputs the run found new (its corpus) and any crashing
# input. So every run starts from the same corpus and explores the same
# inputs: same binary, same result. (libFuzzer's comparison tracing records
# pointer values too: with randomised addresses the same seed explores other
# inputs from run to run.) Prints the executions and crashes; exits non-zero
# on a crash (or a FUZZ_CHECK failure, a sanitizer report, a leak, a
# timeout).
#
# For a longer run by hand (e.g. RUNS=1000000), pass libFuzzer flags after
# RUNS, e.g. -seed=0 for a random seed.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: run_fuzzer.sh FUZZER SEED_CORPUS WORK_DIR RUNS [libFuzzer flags...]" >&2
  exit 2
fi
fuzzer="$1"; seeds="$2"; work="$3"; runs="$4"; shift 4
name="$(basename "$fuzzer")"

rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
log="$work/fuzz.log"
fixed_addresses=(setarch "$(uname -m)" -R)
if ! "${fixed_addresses[@]}" true 2>/dev/null; then
  echo "run_fuzzer.sh: setarch -R is not permitted here; this run is not repeatable" >&2
  fixed_addresses=()
fi
status=0
# -seed first, so a -seed among the caller's flags wins.
"${fixed_addresses[@]}" "$fuzzer" -seed=1 -runs="$runs" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds" >"$log" 2>&1 || status=$?

executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
crashes="$(find "$work/artifacts" -type f | wc -l)"
echo "run_fuzzer.sh: $name: ${executions:-?} executions, $crashes crashes (status $status)"
if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
  tail -n 60 "$log"
  echo "run_fuzzer.sh: $name failed; the input is in $work/artifacts/" >&2
  exit 1
fi
