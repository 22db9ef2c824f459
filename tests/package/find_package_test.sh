#!/usr/bin/env bash
# cmake --install of this build tree into a fresh prefix, then a project
# outside the tree (consumer/) built with find_package(attnserve) against it
# and run against the installed attn_server on the CPU backend.
#
#   find_package_test.sh BUILD_DIR
#
# Also checks what the package must not carry: the kernel library, cudart.
# Waits on conditions (port file, exit) with generous bounds, never on time.
set -euo pipefail
cmake="${CMAKE:-cmake}"
build_dir="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
# shellcheck source=deploy/scripts/start_server.sh
. "$here/../../deploy/scripts/start_server.sh"
trap 'stop_server KILL; rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

prefix="$work/prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; fail "cmake --install"; }
for f in bin/attn_server bin/attn_cli bin/attn_loadgen include/attn/client/attention_client.h \
         include/attn/problem.h include/attn/version.h include/attnserve/v1/attention.proto \
         include/attnserve/v1/attention.pb.h; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
config="$(find "$prefix" -name attnserveConfig.cmake)"
[ -n "$config" ] || fail "no attnserveConfig.cmake installed"
if find "$prefix" -name 'libattn_kernels*' | grep -q .; then
  fail "the kernel library was installed"
fi
if grep -rqiE 'attn_kernels|cudart|CUDA::' "$(dirname "$config")"; then
  fail "the exported targets reach the kernel library or CUDA:"
fi
echo "installed into $prefix: $(find "$prefix" -type f | wc -l) files"

"$cmake" -S "$here/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" ||
  { cat "$work/configure.log" >&2; fail "configure the consumer"; }
"$cmake" --build "$work/consumer" >"$work/build.log" ||
  { cat "$work/build.log" >&2; fail "build the consumer"; }
if grep -q cudart "$work/consumer/build.ninja"; then fail "the consumer links cudart"; fi

# The installed server, on a free port.
start_server "$prefix/bin/attn_server" "$work" --backend=cpu --cpu_threads=1 ||
  fail "the installed attn_server did not start"

# The consumer waits up to its connect timeout (5 s) for the server itself.
"$work/consumer/consumer" "$server_address" || fail "the consumer failed"
"$prefix/bin/attn_cli" --version | grep -qx "attn_cli $(head -1 "$here/../../VERSION")" ||
  fail "installed attn_cli --version"

kill -TERM "$server_pid"
wait "$server_pid" || fail "attn_server did not exit 0 on SIGTERM"
server_pid=""
echo "find_package_test: OK"
