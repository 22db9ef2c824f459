#!/usr/bin/env bash
# Builds an importable attnserve_client package outside CMake and pip: copies
# the sources to OUT_DIR and generates the protobuf/gRPC stubs
# (OUT_DIR/attnserve/v1/) and _version.py with build_package.py, which uses
# protoc and grpc_python_plugin (Debian: protobuf-compiler,
# protobuf-compiler-grpc). Generated code is never committed.
#
#   generate_stubs.sh OUT_DIR        then: PYTHONPATH=OUT_DIR /usr/bin/python3 ...
#
# To install the package instead: pip install --no-build-isolation ./client/python
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python3="${PYTHON:-/usr/bin/python3}"
[ -x "$python3" ] || python3="$(command -v python3)"
"$python3" "$here/build_package.py" --sources "$1"
echo "generate_stubs.sh: attnserve_client ready in $1"
