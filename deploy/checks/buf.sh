#!/usr/bin/env bash
# The wire API as the protobuf ecosystem reads it, with buf (npm
# @bufbuild/buf, pinned in js/package.json): `buf lint` with proto/buf.yaml
# (STANDARD rules; v1's grandfathered names are listed there with the
# reason) and `buf breaking` (FILE rules: wire, JSON and generated code)
# against the last released proto, proto_released/<newest>/.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

js="$(js_dir)"
buf="$js/node_modules/.bin/buf"
[ -x "$buf" ] || fail "buf not installed under $js"
released="$(find "$root/deploy/checks/proto_released" -mindepth 1 -maxdepth 1 -type d |
            sort -V | tail -1)"
[ -n "$released" ] || fail "no released proto under deploy/checks/proto_released"

cd "$root/proto"
export BUF_CACHE_DIR="$work_dir/buf-cache"
"$buf" lint || fail "buf lint (proto/buf.yaml)"
"$buf" breaking --against "$released" ||
  fail "buf breaking: attnserve.v1 changed incompatibly since $(basename "$released")"
echo "buf: lint clean; no breaking change since $(basename "$released") ($("$buf" --version))"
