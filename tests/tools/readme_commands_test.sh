#!/usr/bin/env bash
# The README's command blocks run as written, so what they show stays true:
# every ```sh block after a `<!-- readme_commands_test: KIND -->` line (in
# README.md, and the certificates block in server/README.md) runs with
# `bash -euo pipefail` on a fresh copy of the repository (the files a clone
# has) whose build/ is this build tree. KIND says against what:
#   run                            a CPU attn_server at localhost:50051
#   run with npx                   the same; npx finds @bufbuild/buf in the
#                                  packages deploy/checks pins, offline
#   run with npx, TLS and tokens   an attn_server with TLS and tokens at
#                                  gpu-node:50051, with the files the
#                                  certificates block made
#   certificates                   (server/README.md) makes those files
# The servers listen on free loopback ports: the addresses are the one
# thing changed in the blocks. Also: the README pins the @bufbuild/buf
# version deploy/checks/js/package.json does, and every marked block ran.
#
# Environment: BUILD_DIR (the build tree, as for deploy/checks).
# Waits on conditions with generous bounds, never on time.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../deploy/checks/lib.sh"
# shellcheck source=deploy/scripts/start_server.sh
. "$root/deploy/scripts/start_server.sh"
# shellcheck source=tests/tools/fresh_copy.sh
. "$root/tests/tools/fresh_copy.sh"

server="$build_dir/server/attn_server"
[ -x "$server" ] || fail "$server not built"
work="$(mktemp -d "$work_dir/readme.XXXXXX")"
tls_pid=""
trap 'stop_server KILL; [ -z "$tls_pid" ] || kill -KILL "$tls_pid" 2>/dev/null; rm -rf "$work"' EXIT

# The fresh copy, with this build tree as its build/.
clone="$work/clone"
fresh_copy "$clone"
ln -s "$build_dir" "$clone/build"

# npx resolves the package from a node_modules beside it, and stays offline.
npm_dir="$work/npm"
mkdir -p "$npm_dir"
ln -s "$(js_dir)/node_modules" "$npm_dir/node_modules"
export npm_config_offline=true npm_config_update_notifier=false BUF_CACHE_DIR="$work/buf-cache"

pinned="$(sed -n 's/.*"@bufbuild\/buf": *"\([^"]*\)".*/\1/p' "$root/deploy/checks/js/package.json")"
while IFS= read -r used; do
  [ "$used" = "@bufbuild/buf@$pinned" ] ||
    fail "README.md uses $used; deploy/checks/js/package.json pins $pinned"
done < <(grep -o '@bufbuild/buf@[0-9.]*' "$root/README.md" | sort -u)

# blocks FILE KIND OUT: writes the marked blocks of FILE with that KIND to
# OUT.1, OUT.2, ...; prints how many.
blocks() {
  awk -v kind="$2" -v out="$3" '
    $0 == "<!-- readme_commands_test: " kind " -->" { want = 1; next }
    want && /^```sh$/ { inside = 1; want = 0; n++; next }
    inside && /^```$/ { inside = 0; close(out "." n); next }
    inside { print > (out "." n); next }
    { want = want && /^$/ }
    END { print n + 0 }' "$1"
}

ran=0
# run_blocks FILE KIND DIR SED: runs each block in DIR with SED applied.
run_blocks() {
  local file="$1" kind="$2" dir="$3" edit="$4" name="${1#"$root"/}" count i
  count="$(blocks "$file" "$kind" "$work/block")"
  [ "$count" -gt 0 ] || fail "$name has no \"$kind\" block"
  for i in $(seq 1 "$count"); do
    sed "$edit" "$work/block.$i" >"$work/block.sh"
    echo "== $name: \"$kind\" block $i"
    if ! (cd "$dir" && timeout 300 bash -euo pipefail "$work/block.sh") >"$work/block.log" 2>&1; then
      cat "$work/block.sh" "$work/block.log" >&2
      fail "$name: \"$kind\" block $i failed (above: the block as run, and its output)"
    fi
    tail -n 3 "$work/block.log"
    ran=$((ran + 1))
  done
}

mkdir -p "$work/plain"
start_server "$server" "$work/plain" --backend=cpu || fail "attn_server did not start"
plain="s#localhost:50051#$server_address#g"
run_blocks "$root/README.md" "run" "$clone" "$plain"
run_blocks "$root/README.md" "run with npx" "$npm_dir" "$plain"

run_blocks "$root/server/README.md" "certificates" "$npm_dir" ""
mkdir -p "$work/tls"
"$server" --backend=cpu --listen=127.0.0.1:0 --port_file="$work/tls/port" \
  --tls_cert="$npm_dir/server.crt" --tls_key="$npm_dir/server.key" \
  --token_file="$npm_dir/tokens" >"$work/tls/server.log" 2>&1 &
tls_pid=$!
for _ in $(seq 1 600); do
  [ -s "$work/tls/port" ] || ! kill -0 "$tls_pid" 2>/dev/null && break
  sleep 0.1
done
[ -s "$work/tls/port" ] || { cat "$work/tls/server.log" >&2; fail "the TLS attn_server did not start"; }
run_blocks "$root/README.md" "run with npx, TLS and tokens" "$npm_dir" \
  "s#gpu-node:50051#localhost:$(head -n1 "$work/tls/port")#g"

kill -TERM "$tls_pid"
wait "$tls_pid" || fail "the TLS attn_server did not exit 0 on SIGTERM"
tls_pid=""

marked="$(grep -c '^<!-- readme_commands_test: ' "$root/README.md" "$root/server/README.md" |
          awk -F: '{ n += $2 } END { print n }')"
[ "$ran" -eq "$marked" ] || fail "$marked blocks are marked but $ran ran (an unknown KIND?)"
echo "readme_commands_test: all $ran marked blocks ran as written"
