"""The Python client against a secured attn_server: TLS with the test CA's
roots and a bearer token (Client(token=...)) are served; a missing or wrong
token is UNAUTHENTICATED; health needs no token.

Run by ctest like python_client_test. Certificates come from the openssl CLI
in a fresh temporary directory; no key is checked in.
"""

import os
import subprocess
import sys
import tempfile
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from attn_test_server import ServerProcess  # noqa: E402
from attnserve_client import AttnServeError, Client  # noqa: E402

TOKEN = "py-test-token-7f3a"


def make_pki(directory):
    """A CA and a server certificate for 127.0.0.1 signed by it; their paths."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for command in (
        ["openssl", "req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
         "-subj", "/CN=attn-py-test-ca"],
        ["openssl", "req", *key, "-keyout", "server.key", "-out", "server.csr",
         "-subj", "/CN=localhost"],
        ["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext"],
    ):
        subprocess.run(command, cwd=directory, check=True, capture_output=True)
    return {name: os.path.join(directory, name) for name in ("ca.crt", "server.crt", "server.key")}


def setUpModule():
    global TMP, PKI, SERVER
    TMP = tempfile.TemporaryDirectory(prefix="attn_py_security_")
    PKI = make_pki(TMP.name)
    token_file = os.path.join(TMP.name, "tokens")
    with open(token_file, "w") as f:
        f.write(f"# test token\n{TOKEN}\n")
    SERVER = ServerProcess(
        ["--backend=cpu", "--cpu_threads=1", f"--tls_cert={PKI['server.crt']}",
         f"--tls_key={PKI['server.key']}", f"--token_file={token_file}"],
        client_options={"root_certificates": PKI["ca.crt"]}).__enter__()


def tearDownModule():
    SERVER.__exit__(None, None, None)
    TMP.cleanup()


class SecuredServerTest(unittest.TestCase):
    def test_tls_and_token_are_served(self):
        rng = np.random.default_rng()
        q, k, v = (rng.standard_normal((1, 16, 2, 64)).astype(np.float16) for _ in range(3))
        with Client(SERVER.address, root_certificates=PKI["ca.crt"], token=TOKEN) as client:
            self.assertGreater(client.info.limits.max_message_bytes, 0)
            out, _timing = client.attend(q, k, v)
            self.assertEqual(out.shape, (1, 16, 2, 64))
            self.assertTrue(np.isfinite(out.astype(np.float32)).all())

    def test_missing_or_wrong_token_is_unauthenticated(self):
        for token, reason in ((None, "missing credential"), ("wrong", "invalid credential")):
            with self.assertRaises(AttnServeError) as raised:
                Client(SERVER.address, root_certificates=PKI["ca.crt"], token=token)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn(reason, raised.exception.details())

    def test_health_needs_no_token(self):
        with Client(SERVER.address, root_certificates=PKI["ca.crt"],
                    fetch_server_info=False) as client:
            self.assertEqual(client.health(), "SERVING")


if __name__ == "__main__":
    unittest.main()
