"""Generates what the attnserve_client distribution needs beyond its sources.

    build_package.py OUT_DIR [--sources] [--protoc=PATH] [--grpc-python-plugin=PATH]

writes into OUT_DIR:
  attnserve/v1/attention_pb2.py, attention_pb2_grpc.py   protoc stubs of
      proto/attnserve/v1/attention.proto, under the proto's own path, so the
      descriptor pool knows the file by its canonical name and the stubs
      load beside any other stubs of the same proto in one process
      (attnserve and attnserve.v1 are namespace packages: no __init__.py)
  attnserve_client/_version.py   __version__ from the repository's VERSION
  attnserve_client/*.py          (--sources) the package's sources

and pip's build (setup.py) adds attnserve_client/libattn_client_c.so, the
C++ client the native transport loads, when it finds one
(bundle_client_library).

One script for the three ways the package is built: pip (setup.py's
build_py), CMake (client/python/CMakeLists.txt) and by hand
(generate_stubs.sh). protoc and grpc_python_plugin come from the PATH
unless named (Debian: protobuf-compiler, protobuf-compiler-grpc).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PROTO_ROOT = os.path.join(REPO, "proto")
PROTO = "attnserve/v1/attention.proto"
VERSION_FILE = os.path.join(REPO, "VERSION")


def read_version(path=VERSION_FILE):
    with open(path, encoding="utf-8") as f:
        return f.readline().strip()


def _find(tool, explicit, env):
    path = explicit or os.environ.get(env) or shutil.which(tool)
    if not path:
        sys.exit(f"build_package.py: {tool} not found (Debian: apt-get install protobuf-compiler "
                 f"protobuf-compiler-grpc), or name it with ${env}")
    return path


def generate(out_dir, protoc=None, grpc_python_plugin=None, sources=False):
    """Writes the stubs and _version.py (and with `sources` the .py files) into out_dir."""
    if not os.path.exists(os.path.join(PROTO_ROOT, PROTO)):
        sys.exit(f"build_package.py: {PROTO} not found under {PROTO_ROOT}: the package is "
                 "built from the attnserve repository (pip install ./client/python)")
    package_dir = os.path.join(out_dir, "attnserve_client")
    os.makedirs(package_dir, exist_ok=True)
    if sources:
        source_dir = os.path.join(HERE, "attnserve_client")
        for name in sorted(os.listdir(source_dir)):
            if name.endswith(".py"):
                shutil.copyfile(os.path.join(source_dir, name), os.path.join(package_dir, name))
    version = read_version()
    text = f'"""Generated from the repository\'s VERSION file."""\n\n__version__ = "{version}"\n'
    version_py = os.path.join(package_dir, "_version.py")
    if not os.path.exists(version_py) or open(version_py, encoding="utf-8").read() != text:
        with open(version_py, "w", encoding="utf-8") as f:
            f.write(text)
    subprocess.run(
        [_find("protoc", protoc, "PROTOC"), f"--proto_path={PROTO_ROOT}",
         f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
         "--plugin=protoc-gen-grpc_python="
         + _find("grpc_python_plugin", grpc_python_plugin, "GRPC_PYTHON_PLUGIN"),
         os.path.join(PROTO_ROOT, PROTO)],
        check=True)




def _library_name():
    """native.py's LIBRARY_NAME, read from its source: the package cannot be
    imported before it is built."""
    with open(os.path.join(HERE, "attnserve_client", "native.py"), encoding="utf-8") as f:
        return re.search(r'^LIBRARY_NAME = "([^"]+)"$', f.read(), re.M).group(1)


CLIENT_LIBRARY = _library_name()
# Where `cmake --build build --target attn_client_c` puts it.
BUILD_TREE_LIBRARY = os.path.join(REPO, "build", "client", "c_api", CLIENT_LIBRARY)


def bundle_client_library(out_dir):
    """Copies libattn_client_c.so into out_dir/attnserve_client: the one
    $ATTN_CLIENT_LIB names (a build tree's, or an install prefix's lib/;
    an error when it is not a file), else the repository's build/ tree's
    when it was built. Returns the path copied, or None (the package then
    uses grpcio, unless the library is found at run time: native.py)."""
    source = os.environ.get("ATTN_CLIENT_LIB")
    if source and not os.path.isfile(source):
        sys.exit(f"build_package.py: $ATTN_CLIENT_LIB names {source}, which is not a file")
    if not source and os.path.isfile(BUILD_TREE_LIBRARY):
        source = BUILD_TREE_LIBRARY
    if not source:
        print(f"build_package.py: no {CLIENT_LIBRARY} ($ATTN_CLIENT_LIB unset, {BUILD_TREE_LIBRARY} "
              "not built: cmake --build build --target attn_client_c); the package will use grpcio",
              file=sys.stderr)
        return None
    shutil.copyfile(source, os.path.join(out_dir, "attnserve_client", CLIENT_LIBRARY))
    print(f"build_package.py: bundled {source}", file=sys.stderr)
    return source


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--sources", action="store_true", help="also copy the .py sources")
    parser.add_argument("--protoc")
    parser.add_argument("--grpc-python-plugin")
    args = parser.parse_args()
    generate(args.out_dir, args.protoc, args.grpc_python_plugin, args.sources)


if __name__ == "__main__":
    main()
