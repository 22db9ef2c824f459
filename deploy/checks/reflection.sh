#!/usr/bin/env bash
# The server as a generic gRPC client sees it through reflection alone: buf
# curl (npm @bufbuild/buf, pinned in js/package.json) against the built
# attn_server on the CPU backend, with no .proto files given.
#   * --list-services lists the Attention, health and reflection services;
#   * --list-methods resolves every listed service's descriptor (it fails
#     when one cannot be described, as grpc.health.v1.Health could not while
#     its descriptor was not linked into the server), and each service has a
#     method;
#   * calls encoded and decoded from the reflected schemas alone answer:
#     Health/Check says SERVING, Attention/GetServerInfo the VERSION file's.
# Waits on conditions (port file, exit) with generous bounds, never on time.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

server="$build_dir/server/attn_server"
[ -x "$server" ] || fail "$server not built"
buf="$(js_dir)/node_modules/.bin/buf"
[ -x "$buf" ] || fail "buf not installed"

# shellcheck source=deploy/scripts/start_server.sh
. "$root/deploy/scripts/start_server.sh"
work="$(mktemp -d "$work_dir/reflection.XXXXXX")"
trap 'stop_server KILL; rm -rf "$work"' EXIT
start_server "$server" "$work" --backend=cpu --cpu_threads=1 || fail "attn_server did not start"
base="http://$server_address"

export BUF_CACHE_DIR="$work_dir/buf-cache"
curl_args=(--protocol grpc --http2-prior-knowledge --connect-timeout 30 --timeout 60s)
# buf curl OPTIONS...: its stdout, or the check fails with its stderr.
reflect() {
  "$buf" curl "${curl_args[@]}" "$@" 2>"$work/buf.err" ||
    { cat "$work/buf.err" >&2; fail "buf curl $*"; }
}

services="$(reflect --list-services "$base")"
for want in attnserve.v1.Attention grpc.health.v1.Health; do
  grep -qx "$want" <<<"$services" || fail "reflection does not list $want; it lists: $services"
done
methods="$(reflect --list-methods "$base")"
count=0
while IFS= read -r service; do
  grep -q "^$service/" <<<"$methods" ||
    fail "reflection lists $service but describes no method of it; methods: $methods"
  count=$((count + 1))
done <<<"$services"

health="$(reflect "$base/grpc.health.v1.Health/Check")"
grep -q '"status": *"SERVING"' <<<"$health" || fail "Health/Check through reflection: $health"
version="$(head -n1 "$root/VERSION")"
info="$(reflect "$base/attnserve.v1.Attention/GetServerInfo")"
grep -q "\"version\": *\"$version\"" <<<"$info" ||
  fail "GetServerInfo through reflection has no version $version: $info"

kill -TERM "$server_pid"
wait "$server_pid" || fail "attn_server did not exit 0 on SIGTERM"
server_pid=""
echo "reflection: $count services listed and described ($(wc -l <<<"$methods") methods)," \
     "Health/Check SERVING and GetServerInfo $version through reflected schemas"
