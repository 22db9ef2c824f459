#!/usr/bin/env bash
# Builds an importable attnserve_client package outside CMake: copies the
# sources to OUT_DIR and generates the protobuf/gRPC stubs from the
# repository's proto with protoc and grpc_python_plugin (Debian:
# protobuf-compiler, protobuf-compiler-grpc). Generated code is never
# committed.
#
#   generate_stubs.sh OUT_DIR        then: PYTHONPATH=OUT_DIR /usr/bin/python3 ...
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$1"
plugin="${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || true)}"
if [ -z "$plugin" ]; then
  echo "generate_stubs.sh: grpc_python_plugin not found (apt-get install protobuf-compiler-grpc)" >&2
  exit 1
fi

mkdir -p "$out/attnserve_client/_gen"
cp "$here"/attnserve_client/*.py "$out/attnserve_client/"
# The proto is compiled from a copy at attnserve_client/_gen/ so the
# generated modules import each other as attnserve_client._gen.* (protoc
# names Python modules after the .proto's path, not its package; the wire
# names stay attnserve.v1.*).
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/attnserve_client/_gen"
cp "$root/proto/attnserve/v1/attention.proto" "$staging/attnserve_client/_gen/attention.proto"
protoc --proto_path="$staging" --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python="$plugin" "$staging/attnserve_client/_gen/attention.proto"
: > "$out/attnserve_client/_gen/__init__.py"
echo "generate_stubs.sh: attnserve_client ready in $out"
