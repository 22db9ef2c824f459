"""pip installs client/python into a fresh virtual environment and uses it.

Run by ctest with ATTN_SERVER_BINARY (and PROTOC, GRPC_PYTHON_PLUGIN) set.
The environment is `python3 -m venv --system-site-packages`, so the
distribution's grpcio, protobuf, numpy, setuptools and wheel satisfy every
requirement; pip runs with --no-index and --no-build-isolation, so nothing
is downloaded. The package is built from a copy of what it needs (client/python,
proto/, VERSION), keeping pip's build/ and egg-info out of the source tree.
Then, from the venv's python in an unrelated directory: __version__ is the
VERSION file's, the stubs load as attnserve.v1.attention_pb2 under their
canonical proto path, and a call against the CPU-backend server works, with
a server error caught as grpc.RpcError and a missed deadline as TimeoutError.
The build is given libattn_client_c.so (ATTN_CLIENT_LIB, from
ATTN_CLIENT_C_LIBRARY), so the installed package carries it and its calls
take the native transport, whose errors name the RPC and address once;
`python -m attnserve_client --version` prints the version.
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SYSTEM_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

INSIDE = r'''
import os, sys
import grpc
import numpy as np
import attnserve_client
from attnserve.v1 import attention_pb2, attention_pb2_grpc
from attnserve_client import AttnServeError, AttnServeTimeout, Client, attention_reference

venv, version = sys.argv[1], sys.argv[2]
assert attnserve_client.__file__.startswith(venv), attnserve_client.__file__
assert attnserve_client.__version__ == version, (attnserve_client.__version__, version)
assert attention_pb2.__file__.startswith(venv), attention_pb2.__file__
assert attention_pb2.DESCRIPTOR.name == "attnserve/v1/attention.proto", attention_pb2.DESCRIPTOR.name
assert hasattr(attention_pb2_grpc, "AttentionStub")

sys.path.insert(0, os.environ["ATTN_TEST_PYTHON_DIR"])
from attn_test_server import ServerProcess

rng = np.random.default_rng(1)
q, k, v = (rng.standard_normal((1, 32, 2, 16)).astype(np.float16) for _ in range(3))
with ServerProcess(["--backend=cpu", "--cpu_threads=1"]) as server:
    with Client(server.address, timeout=60) as client:
        # The library the build bundled, loaded from the installed package.
        assert client.transport == "native", (client.transport, client.transport_reason)
        assert client.transport_reason.startswith(os.path.dirname(attnserve_client.__file__)), \
            client.transport_reason
        assert client.health() == "SERVING"
        try:
            client.attend(q, k, v, kernel="no_such_kernel")
            raise AssertionError("an unknown kernel was accepted")
        except AttnServeError as error:
            text = str(error)
            assert text.count(server.address) == 1, text
            assert text.startswith(f"Attend to {server.address}: NOT_FOUND: kernel"), text
            assert error.details().startswith("kernel 'no_such_kernel'"), error.details()
        out, timing = client.attend(q, k, v)
        ref = attention_reference(q, k, v)
        err = np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref)
        assert out.shape == q.shape and out.dtype == np.float16 and err < 1e-2, err
        bad = np.zeros((1, 4, 1, 513), np.float16)
        try:
            client.attend(bad, bad, bad)
            raise AssertionError("head_dim 513 was accepted")
        except grpc.RpcError as error:
            assert isinstance(error, AttnServeError)
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.code()
        try:
            client.attend(q, k, v, timeout=-1.0)  # a deadline already past
            raise AssertionError("a past deadline did not fail")
        except TimeoutError as error:
            assert isinstance(error, AttnServeTimeout) and isinstance(error, grpc.RpcError)
            assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
print(f"attnserve_client {attnserve_client.__version__} from {attnserve_client.__file__}: "
      f"call ok (relative L2 error {err:.2e}), errors are grpc.RpcError, deadlines TimeoutError")
'''


def run(cmd, **kwargs):
    print("+", " ".join("<script>" if arg == INSIDE else arg for arg in cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def main():
    with open(os.path.join(REPO, "VERSION"), encoding="utf-8") as f:
        version = f.readline().strip()
    with tempfile.TemporaryDirectory(prefix="attn_pip_test_") as tmp:
        src = os.path.join(tmp, "src")
        shutil.copytree(os.path.join(REPO, "client", "python"), os.path.join(src, "client", "python"),
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        shutil.copytree(os.path.join(REPO, "proto"), os.path.join(src, "proto"))
        shutil.copy(os.path.join(REPO, "VERSION"), os.path.join(src, "VERSION"))

        venv = os.path.join(tmp, "venv")
        run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", venv])
        python = os.path.join(venv, "bin", "python")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PYTHONDONTWRITEBYTECODE="1")
        env.pop("PYTHONPATH", None)
        env.pop("ATTN_CLIENT_LIB", None)
        build_env = dict(env, ATTN_CLIENT_LIB=os.environ["ATTN_CLIENT_C_LIBRARY"])
        run([python, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-index",
             os.path.join(src, "client", "python")], env=build_env, cwd=tmp)
        printed = subprocess.run([python, "-m", "attnserve_client", "--version"], env=env, cwd=tmp,
                                 check=True, capture_output=True, text=True).stdout
        assert printed == f"attnserve_client {version}\n", printed
        run([python, "-m", "pip", "show", "attnserve-client"], env=env, cwd=tmp)
        run([os.path.join(venv, "bin", "attnserve-client"), "--help"], env=env, cwd=tmp,
            stdout=subprocess.DEVNULL)
        env["ATTN_TEST_PYTHON_DIR"] = HERE
        run([python, "-c", INSIDE, venv, version], env=env, cwd=tmp)
    print("pip_install_test: OK")


if __name__ == "__main__":
    main()
