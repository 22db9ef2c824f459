"""Runs the built attn_server for the Python end-to-end tests.

    with ServerProcess(["--backend=cpu"]) as server:
        client = Client(server.address)

Starts `$ATTN_SERVER_BINARY --listen=127.0.0.1:0 --port_file=...`, waits
(bounded) for the port file and for grpc.health.v1 SERVING, and on exit
sends SIGTERM and waits, killing the server if it does not stop in time.
`client_options` are the Client keyword arguments the health check connects
with (TLS roots for a TLS server).
"""

import faulthandler
import os
import signal
import subprocess
import sys
import tempfile
import time

from attnserve_client import Client

START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 30
# Every test that imports this module ends, with every Python thread's stack
# on stderr, if it is still running after this long: before ctest's 300 s
# kill, which says nothing of where it stood. python_client_test once hung
# (1 run in about 250, never reproduced): if one does again, its stacks say
# where. The tests take 5-60 s.
WATCHDOG_S = 240
faulthandler.dump_traceback_later(WATCHDOG_S, exit=True, file=sys.stderr)


class ServerProcess:
    def __init__(self, flags=(), client_options=None):
        self.binary = os.environ["ATTN_SERVER_BINARY"]
        self.flags = list(flags)
        self.client_options = dict(client_options or {})
        self.address = None
        self.process = None
        self.exit_code = None
        self._tmp = None

    def __enter__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="attn_py_test_")
        port_file = os.path.join(self._tmp.name, "port")
        self.process = subprocess.Popen(
            [self.binary, "--listen=127.0.0.1:0", f"--port_file={port_file}", *self.flags])
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"attn_server exited during start-up: {self.process.returncode}")
            if os.path.exists(port_file):
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.address = f"127.0.0.1:{int(text)}"
                    break
            time.sleep(0.05)
        else:
            self._kill()
            raise RuntimeError(f"attn_server wrote no port file within {START_TIMEOUT_S} s")
        with Client(self.address, connect_timeout=START_TIMEOUT_S,
                    fetch_server_info=False, **self.client_options) as client:
            while client.health() != "SERVING":
                if time.monotonic() > deadline:
                    self._kill()
                    raise RuntimeError("attn_server did not report SERVING in time")
                time.sleep(0.05)
        return self

    def _kill(self):
        self.process.kill()
        self.process.wait()

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.exit_code = self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._kill()
        self._tmp.cleanup()
