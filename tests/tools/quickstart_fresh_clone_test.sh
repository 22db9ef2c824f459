#!/usr/bin/env bash
# The README's main command on a fresh copy of the repository (the files a
# clone has, nothing built), as a newcomer on a host without a GPU runs it:
#   * `bash deploy/scripts/demo.sh` builds attn_server and attn_cli, serves,
#     sends the default CPU request and checks it (PASS), says `done`;
#   * again with `--shape=...`: its phase line gives that shape, not the
#     default, and so does the request;
#   * `cmake --install build --prefix DIR` after that partial build installs
#     attn_server and attn_cli, says attn_loadgen was not built, and the
#     installed attn_cli runs.
# ATTN_SKIP_DEPS=1: the dependencies are installed already (CI's test.sh
# installed them; demo.sh would need root and the network). The build is
# demo.sh's own, from nothing: most of this test's time (a few minutes on 2
# cores). With ATTN_CCACHE_DIR (test.sh sets it) it compiles through ccache
# with that cache, which the main build filled: configure, build and run
# are demo.sh's own, the objects of files it compiled already are reused.
# On a host with a GPU, demo.sh would build the CUDA kernels instead: the
# test skips there (exit 77), CI has none.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../deploy/checks/lib.sh"
# shellcheck source=tests/tools/fresh_copy.sh
. "$root/tests/tools/fresh_copy.sh"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "quickstart_fresh_clone_test: skipped: a GPU is visible (demo.sh would build CUDA kernels)"
  exit 77
fi
work="$(mktemp -d "$work_dir/quickstart.XXXXXX")"
trap 'rm -rf "$work"' EXIT
clone="$work/clone"
fresh_copy "$clone"
unset BUILD_DIR  # demo.sh's default, the clone's build/
if [ -n "${ATTN_CCACHE_DIR:-}" ] && command -v ccache >/dev/null 2>&1; then
  CCACHE_DIR="$ATTN_CCACHE_DIR"
  # shellcheck source=deploy/scripts/ccache_env.sh
  . "$root/deploy/scripts/ccache_env.sh"
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$clone"
fi

demo() {
  (cd "$clone" && ATTN_SKIP_DEPS=1 "$@") >"$work/demo.log" 2>&1 ||
    { cat "$work/demo.log" >&2; fail "$* failed (its output above)"; }
  grep '^== \[' "$work/demo.log"
}
expect() {
  grep -qE -- "$1" "$work/demo.log" || { cat "$work/demo.log" >&2; fail "no line matching '$1'"; }
}
reject() {
  if grep -qE -- "$1" "$work/demo.log"; then cat "$work/demo.log" >&2; fail "a line matches '$1'"; fi
}

demo bash deploy/scripts/demo.sh
expect '^== \[ *[0-9]+ s\] attn_cli attend --shape=1,1024,8,128 --dtype=bf16 --check$'
expect '^attend: bf16 \[1, 1024, 8, 128\]'
expect 'check: .*: PASS$'
expect '^== \[ *[0-9]+ s\] done$'

ATTN_SKIP_BUILD=1 demo bash deploy/scripts/demo.sh --shape=1,256,4,64 --repeat=2
expect '^== \[ *[0-9]+ s\] attn_cli attend --dtype=bf16 --check --shape=1,256,4,64 --repeat=2$'
reject '1,1024,8,128'
expect '^attend: bf16 \[1, 256, 4, 64\]'
expect '\(2 calls\)'

prefix="$work/prefix"
(cd "$clone" && cmake --install build --prefix "$prefix") >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install after demo.sh's build"; }
grep -q "Not installed: attn_loadgen, which is not built" "$work/install.log" ||
  { cat "$work/install.log" >&2; fail "cmake --install did not say attn_loadgen was skipped"; }
for f in bin/attn_server bin/attn_cli include/attn/client/attention_client.h; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
[ ! -e "$prefix/bin/attn_loadgen" ] || fail "attn_loadgen installed, but it was not built"
"$prefix/bin/attn_cli" --version | grep -qx "attn_cli $(head -n1 "$root/VERSION")" ||
  fail "the installed attn_cli --version"
echo "quickstart_fresh_clone_test: demo.sh on a fresh copy, then cmake --install: OK"
