#!/usr/bin/env bash
# Sanitizer and fuzzing checks of the CPU parts (test.sh, and so CI, runs
# both). Two instrumented CUDA-off builds with clang-14, each in its own
# build tree, building only what the tests need:
#
#   asan  ATTN_SANITIZE=address,undefined, ATTN_FUZZ=ON: the tests below
#         (LeakSanitizer included), then a bounded run of every libFuzzer
#         target in fuzz/ (ctest label "fuzz", fuzz/run_fuzzer.sh)
#   tsan  ATTN_SANITIZE=thread: the tests whose threads are all ours
#         (tsan_tests); with ATTN_TSAN_SUITES=all, every test below
#
# Every process writes its sanitizer reports to files (log_path), attn_server
# processes the tests start included, and any report fails the run, also one
# in a server whose exit code no test looks at. Suppressions, each with its
# reason: tests/sanitizers/.
#
#   sanitizer_checks.sh
# Environment: SANITIZER_BUILD_ROOT (default $root/build-sanitizers; the
# trees are <root>/asan and <root>/tsan), ATTN_SANITIZERS (default
# "asan tsan"), ATTN_TSAN_SUITES (ci, the default, or all), BUILD_JOBS (default nproc), ATTN_FUZZ_CI_RUNS (inputs per
# fuzz target; default in fuzz/CMakeLists.txt), CXX_LAUNCHER (e.g. ccache).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_root="${SANITIZER_BUILD_ROOT:-$root/build-sanitizers}"
read -r -a sanitizers <<<"${ATTN_SANITIZERS:-asan tsan}"
supp="$root/tests/sanitizers"
started=$SECONDS

# The tests each build runs: the CPU-backend server suites (unit and end to
# end, with attn_server itself instrumented), the kernels' CPU code, and the
# client pieces that run threads or parse files.
tests=(cpu_reference_test validate_test tuning_test
       server_scheduler_test server_admission_test server_codec_test server_zero_copy_test
       server_e2e_cpu_test server_reliability_test server_lifecycle_test server_security_test
       server_scheduler_batching_test server_batching_e2e_cpu_test server_batching_regions_cpu_test
       server_session_registry_test server_session_e2e_test
       attention_client_test client_split_test client_npy_test absl_sync_annotations_test)

# Under TSan, CI runs the tests whose threads are all ours: the scheduler
# (workers, completion threads, batching), admission, the zero-copy reader
# and the parallel copier, the codec, the kernels' CPU code, the session registry, the Abseil
# annotations themselves (absl_sync_annotations_test). The others make
# gRPC calls, and gRPC (from Debian, uninstrumented) orders a call's
# operations through atomics inside its own libraries, where TSan cannot see
# it: a batch started on one thread and finished on another, OnDone after a
# reaction. Those suites then report races that are not there, now and then
# (tests/sanitizers/README.md, "TSan and gRPC calls"); they run under TSan
# with ATTN_TSAN_SUITES=all, and under ASan in CI.
tsan_tests=(cpu_reference_test validate_test tuning_test client_npy_test absl_sync_annotations_test
            server_scheduler_test server_scheduler_batching_test server_admission_test
            server_codec_test server_zero_copy_test server_session_registry_test)
tsan_suites="${ATTN_TSAN_SUITES:-ci}"
if [ "$tsan_suites" = all ]; then tsan_tests=("${tests[@]}"); fi

for tool in clang++-14 clang-14; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "sanitizer_checks.sh: $tool not found (install_deps.sh --with-checks installs clang-14)" >&2
    exit 1
  fi
done
launcher=()
if [ -n "${CXX_LAUNCHER:-}" ]; then launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=$CXX_LAUNCHER"); fi

# build <kind> <cmake -D options...>: configures and builds the kind's
# tests, attn_server when they start it, and, for asan, the fuzz targets, in
# $build_root/<kind>.
build() {
  local kind="$1"; shift
  local targets=("${tests[@]}" attn_server)
  if [ "$kind" = asan ]; then
    targets+=(attend_request_fuzzer attend_stream_fuzzer npy_fuzzer tuning_table_fuzzer
              session_registry_fuzzer)
  elif [ "$tsan_suites" != all ]; then
    targets=("${tsan_tests[@]}")  # none of them starts attn_server
  fi
  local fuzz_runs=()
  if [ -n "${ATTN_FUZZ_CI_RUNS:-}" ]; then fuzz_runs=("-DATTN_FUZZ_CI_RUNS=$ATTN_FUZZ_CI_RUNS"); fi
  BUILD_DIR="$build_root/$kind" ATTN_ENABLE_CUDA=OFF BUILD_TARGETS="${targets[*]}" \
    bash "$root/deploy/scripts/build.sh" -DCMAKE_CXX_COMPILER=clang++-14 \
    -DATTN_BUILD_SERVICE=ON -DATTN_BUILD_TESTS=ON "${launcher[@]}" "${fuzz_runs[@]}" "$@"
}

# check_reports <log dir>: fails, printing them, if any process wrote a
# sanitizer report.
check_reports() {
  local logs="$1"
  if [ -n "$(find "$logs" -type f -size +0 2>/dev/null)" ]; then
    echo "sanitizer_checks.sh: sanitizer reports:" >&2
    find "$logs" -type f -size +0 -exec sh -c 'echo "== $1"; cat "$1"' _ {} \; >&2
    return 1
  fi
}

# run_tests <kind> [command prefix...]: the kind's tests in the <kind> tree,
# run through the prefix (e.g. setarch) when one is given.
run_tests() {
  local kind="$1"; shift
  local dir="$build_root/$kind"
  local list=("${tests[@]}")
  if [ "$kind" = tsan ]; then list=("${tsan_tests[@]}"); fi
  local regex
  regex="^($(IFS='|'; echo "${list[*]}"))\$"
  echo "sanitizer_checks.sh: [$((SECONDS - started)) s] $kind: running ${#list[@]} ctests"
  "$@" ctest --test-dir "$dir" -R "$regex" --output-on-failure --no-tests=error
}

status=0
for kind in "${sanitizers[@]}"; do
  logs="$build_root/$kind/sanitizer-reports"
  rm -rf "$logs"
  mkdir -p "$logs"
  case "$kind" in
    asan)
      echo "sanitizer_checks.sh: [$((SECONDS - started)) s] asan: building (ASan+UBSan, libFuzzer targets)"
      build asan -DATTN_SANITIZE=address,undefined -DATTN_FUZZ=ON
      # UBSan aborts on its first finding (-fno-sanitize-recover=all).
      export ASAN_OPTIONS="log_path=$logs/report:detect_leaks=1:strict_init_order=1:detect_stack_use_after_return=1"
      export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
      export UBSAN_OPTIONS="log_path=$logs/report:print_stacktrace=1:halt_on_error=1"
      run_tests asan || status=1
      echo "sanitizer_checks.sh: [$((SECONDS - started)) s] asan: bounded fuzz runs"
      # The fuzzers' own reports go to their logs (run_fuzzer.sh prints them).
      ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        ctest --test-dir "$build_root/asan" -L fuzz --output-on-failure --no-tests=error || status=1
      unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
      ;;
    tsan)
      echo "sanitizer_checks.sh: [$((SECONDS - started)) s] tsan: building"
      build tsan -DATTN_SANITIZE=thread
      # ignore_noninstrumented_modules: memory accesses of uninstrumented
      # libraries (gRPC, protobuf, libstdc++) are not checked; see
      # tests/sanitizers/README.md. QueueTest: its "slow" request is sized
      # for the uninstrumented CPU kernel and runs for minutes under TSan;
      # server_scheduler_test covers the same rules with a fake executor.
      export TSAN_OPTIONS="log_path=$logs/report:ignore_noninstrumented_modules=1:halt_on_error=0:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
      # Address-space randomisation off where permitted: clang-14's TSan
      # cannot map its shadow memory on kernels with 32 random mmap bits.
      fixed_addresses=(setarch "$(uname -m)" -R)
      "${fixed_addresses[@]}" true 2>/dev/null || fixed_addresses=()
      GTEST_FILTER='-QueueTest.*' run_tests tsan "${fixed_addresses[@]}" || status=1
      unset TSAN_OPTIONS
      ;;
    *)
      echo "sanitizer_checks.sh: unknown sanitizer build '$kind' (ATTN_SANITIZERS: asan, tsan)" >&2
      exit 2
      ;;
  esac
  check_reports "$logs" || status=1
done

echo "sanitizer_checks.sh: [$((SECONDS - started)) s] done (${sanitizers[*]}): $([ "$status" -eq 0 ] && echo passed || echo FAILED)"
exit "$status"
