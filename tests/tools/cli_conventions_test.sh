#!/usr/bin/env bash
# Every binary follows attn/command_line.h: --help and --helpfull exit 0
# and name no build machine path, --version prints "<name> <VERSION>", an
# unknown flag, a malformed value or a stray argument exits 2.
#
#   cli_conventions_test.sh VERSION_FILE FORBIDDEN_PATH... -- NAME=BINARY|NAME=BINARY:BADFLAG ...
#
# NAME=  (empty binary) marks a binary this build does not have (attn_bench
# and attn_tune need CUDA): it is skipped and said so.
set -uo pipefail

version="$(head -1 "$1")"
shift
forbidden=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  forbidden+=("$1")
  shift
done
shift

failures=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# expect_exit WANT NAME ARGS...: runs the binary with ARGS (stdin closed),
# output in $tmp/out; fails unless it exits WANT.
expect_exit() {
  local want="$1" name="$2"
  shift 2
  local rc=0
  "$@" </dev/null >"$tmp/out" 2>&1 || rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$name ${*:2}: exit $rc, want $want; output:"
    sed 's/^/    /' "$tmp/out" | head -20 >&2
    return 1
  fi
  return 0
}

for spec in "$@"; do
  name="${spec%%=*}"
  rest="${spec#*=}"
  bin="${rest%%:*}"
  bad_value=""
  [ "$rest" != "$bin" ] && bad_value="${rest#*:}"
  if [ -z "$bin" ]; then
    echo "skip: $name (not part of this build)"
    continue
  fi
  [ -x "$bin" ] || { fail "$name: $bin is not an executable"; continue; }

  for help in --help --helpfull --helpshort; do
    if expect_exit 0 "$name" "$bin" "$help"; then
      grep -q "usage: $name" "$tmp/out" || fail "$name $help: no 'usage: $name' line"
      for path in "${forbidden[@]}"; do
        if grep -qF "$path" "$tmp/out"; then
          fail "$name $help names the build machine's path $path:"
          grep -F "$path" "$tmp/out" | head -3 | sed 's/^/    /' >&2
        fi
      done
    fi
  done
  # --help lists the binary's own flags with their files, relative paths.
  expect_exit 0 "$name" "$bin" --help &&
    { grep -qE "Flags from [a-z]+/[a-z_/]+\.cc:" "$tmp/out" ||
      fail "$name --help: no 'Flags from <relative path>.cc:' section"; }

  if expect_exit 0 "$name" "$bin" --version; then
    [ "$(cat "$tmp/out")" = "$name $version" ] ||
      fail "$name --version printed '$(head -c 200 "$tmp/out")', want '$name $version'"
  fi

  expect_exit 2 "$name" "$bin" --no_such_flag_xyz &&
    { grep -qi "no_such_flag_xyz" "$tmp/out" || fail "$name: unknown flag not named"; }
  expect_exit 2 "$name" "$bin" --help --no_such_flag_xyz
  expect_exit 2 "$name" "$bin" --flagfile=/nonexistent/attn_flags
  if [ -n "$bad_value" ]; then
    expect_exit 2 "$name" "$bin" "$bad_value"
  fi
  if [ "$name" != attn_cli ]; then
    expect_exit 2 "$name" "$bin" stray_argument
  fi
  echo "ok: $name"
done

if [ "$failures" -gt 0 ]; then
  echo "cli_conventions_test: $failures failure(s)" >&2
  exit 1
fi
echo "cli_conventions_test: all binaries follow the conventions"
