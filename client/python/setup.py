"""setuptools glue: metadata is in pyproject.toml; this adds the generated parts.

build_py also writes the protoc stubs (attnserve/v1/) and _version.py into
the build directory (build_package.py), so `pip install ./client/python`
needs protoc and grpc_python_plugin, and no network:

    pip install --no-build-isolation ./client/python

and copies libattn_client_c.so into the package when it finds one
($ATTN_CLIENT_LIB, else build/client/c_api/ of the repository), so the
installed package runs its calls through the C++ client.
"""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_package  # noqa: E402


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        if not self.dry_run:
            build_package.generate(self.build_lib)
            build_package.bundle_client_library(self.build_lib)


setup(version=build_package.read_version(), cmdclass={"build_py": BuildPyWithStubs})
