#!/usr/bin/env bash
# Runs every deployment check against a build tree and reports each one.
# CI runs the same checks as separate ctest tests (tests/deploy, label cpu);
# this script is for running them by hand:
#
#   BUILD_DIR=build bash deploy/checks/run_all.sh [CHECK...]
#
# Checks: the names of this folder's scripts (default: all of them, so a new
# check needs no list here).
# Needs the tools of deploy/scripts/install_deps.sh --with-checks and a build.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
checks=("$@")
if [ ${#checks[@]} -eq 0 ]; then
  for script in "$here"/*.sh; do
    case "$(basename "$script" .sh)" in lib | run_all) ;; *) checks+=("$(basename "$script" .sh)") ;; esac
  done
fi

failed=()
for check in "${checks[@]}"; do
  echo "=== deploy check: $check"
  if bash "$here/$check.sh"; then
    echo "=== $check: passed"
  else
    echo "=== $check: FAILED" >&2
    failed+=("$check")
  fi
done
echo "deploy checks: $((${#checks[@]} - ${#failed[@]})) passed, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
