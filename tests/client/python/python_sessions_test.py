"""KV-cache sessions in the Python client (issue 32), against the CPU-backend
attn_server: a session prefilled in chunks and decoded token by token gives
float64 attention over its whole history (causal, bottom-right, GQA); many
sessions step in one call; fork shares the history and diverges; truncate
drops rejected tokens; close and the client's end free the pages; mistakes
are refused naming the field. Each suite runs through both Client
transports (the sessions always travel over grpcio, on the lease's channel).
Run by ctest with PYTHONPATH=<build>/client/python and ATTN_SERVER_BINARY set.
"""

import os
import sys
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from attn_test_server import ServerProcess  # noqa: E402
from attnserve_client import (  # noqa: E402
    AttnServeError,
    Client,
    attention_reference,
    bf16_bits_to_float,
    float_to_bf16_bits,
    relative_l2_error,
)

TOLERANCE = 1e-2
SEED = int.from_bytes(os.urandom(4), "little")
WAIT_S = 30
HEADS, KV_HEADS, DIM, LAYERS = 4, 2, 64, 2


def setUpModule():
    global SERVER, PLAIN_SERVER
    SERVER = ServerProcess(["--backend=cpu", "--cpu_threads=1", "--kv_page_bytes=16384",
                            "--kv_cache_bytes=8388608"]).__enter__()
    PLAIN_SERVER = ServerProcess(["--backend=cpu", "--cpu_threads=1",
                                  "--kv_cache_bytes=0"]).__enter__()


def tearDownModule():
    SERVER.__exit__(None, None, None)
    PLAIN_SERVER.__exit__(None, None, None)


def wait_until(condition):
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class History:
    """What the client knows of a session: its bf16 k/v per layer, to check
    outputs against float64 attention over all of it."""

    def __init__(self, rng):
        self.rng = rng
        self.k = [np.zeros((0, KV_HEADS, DIM), np.uint16) for _ in range(LAYERS)]
        self.v = [np.zeros((0, KV_HEADS, DIM), np.uint16) for _ in range(LAYERS)]

    def copy(self):
        other = History(self.rng)
        other.k, other.v = list(self.k), list(self.v)
        return other

    def new_tokens(self, n):
        return tuple(float_to_bf16_bits(self.rng.standard_normal((n, heads, DIM)))
                     for heads in (HEADS, KV_HEADS, KV_HEADS))

    def expect(self, layer, q, k, v):
        """Appends k, v to `layer` and returns float64 attention of q over it."""
        self.k[layer] = np.concatenate([self.k[layer], k])
        self.v[layer] = np.concatenate([self.v[layer], v])
        f = lambda bits: bf16_bits_to_float(bits)[None].astype(np.float64)  # noqa: E731
        return attention_reference(f(q), f(self.k[layer]), f(self.v[layer]), causal=True)[0]

    def truncate(self, n):
        self.k = [k[:len(k) - n] for k in self.k]
        self.v = [v[:len(v) - n] for v in self.v]


def as_float(out):
    return bf16_bits_to_float(np.asarray(out).view(np.uint16)).astype(np.float64)


class SessionTest(unittest.TestCase):
    TRANSPORT = "native"

    @classmethod
    def setUpClass(cls):
        cls.client = Client(SERVER.address, transport=cls.TRANSPORT)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def setUp(self):
        self.rng = np.random.default_rng(SEED)

    def open(self, **kwargs):
        args = dict(num_layers=LAYERS, num_heads=HEADS, kv_num_heads=KV_HEADS, head_dim=DIM,
                    max_tokens=512)
        args.update(kwargs)
        return self.client.open_session(**args)

    def step(self, session, history, n, layers=range(LAYERS)):
        for layer in layers:
            q, k, v = history.new_tokens(n)
            out = session.attend(layer, q, k, v)
            self.assertEqual(out.shape, (n, HEADS, DIM))
            error = relative_l2_error(as_float(out), history.expect(layer, q, k, v))
            self.assertLess(error, TOLERANCE, f"seed {SEED}, layer {layer}, n {n}")

    def test_prefill_in_chunks_then_decode_matches_float64(self):
        with self.open() as session:
            history = History(self.rng)
            for chunk in (37, 64, 1):  # crosses pages (page_tokens below)
                self.step(session, history, chunk)
            for _ in range(5):
                self.step(session, history, 1)
            self.assertEqual(session.layer_tokens, [107, 107])
            self.assertGreater(session.page_tokens, 0)
            listed = {info.session_id: info for info in self.client.list_sessions()}
            self.assertEqual(list(listed[session.id].layer_tokens), [107, 107])

    def test_lse_and_many_sessions_in_one_call(self):
        a, b = self.open(), self.open()
        try:
            ha, hb = History(self.rng), History(self.rng)
            self.step(a, ha, 20)
            self.step(b, hb, 3)
            for layer in range(LAYERS):
                qa, ka, va = ha.new_tokens(1)
                qb, kb, vb = hb.new_tokens(2)
                result = self.client.attend_sessions(layer, [(a, qa, ka, va), (b, qb, kb, vb)],
                                                     return_lse=True)
                self.assertEqual(result.layer_tokens, [21, 5])
                self.assertEqual([lse.shape for lse in result.lses], [(HEADS, 1), (HEADS, 2)])
                self.assertTrue(all(np.isfinite(lse).all() for lse in result.lses))
                for out, (history, q, k, v) in zip(result.outs,
                                                   ((ha, qa, ka, va), (hb, qb, kb, vb))):
                    error = relative_l2_error(as_float(out), history.expect(layer, q, k, v))
                    self.assertLess(error, TOLERANCE, f"seed {SEED}")
                self.assertTrue(result.response.backend)
        finally:
            a.close()
            b.close()

    def test_fork_diverges_and_truncate_drops_tokens(self):
        with self.open() as parent:
            history = History(self.rng)
            self.step(parent, history, 50)
            with parent.fork() as child:
                self.assertEqual(child.layer_tokens, [50, 50])
                child_history = history.copy()
                self.step(child, child_history, 3)
                self.step(parent, history, 1)
                child.truncate(2)
                child_history.truncate(2)
                self.assertEqual(child.layer_tokens, [51, 51])
                self.step(child, child_history, 1)
                self.step(parent, history, 1)

    def test_refusals_name_the_field(self):
        with self.open() as session:
            q, k, v = History(self.rng).new_tokens(1)
            with self.assertRaises(AttnServeError) as caught:
                session.attend(LAYERS, q, k, v)
            self.assertEqual(caught.exception.code().name, "INVALID_ARGUMENT")
            self.assertIn("layer", caught.exception.details())
            with self.assertRaises(ValueError):
                session.attend(0, q, k[:0], v)
            with self.assertRaises(AttnServeError) as caught:
                session.truncate(1)
            self.assertIn("tokens", caught.exception.details())
        with self.assertRaises(AttnServeError) as caught:
            session.fork()  # closed
        self.assertEqual(caught.exception.code().name, "NOT_FOUND")
        with self.assertRaises(AttnServeError) as caught:
            self.open(head_dim=0)
        self.assertEqual(caught.exception.code().name, "INVALID_ARGUMENT")
        self.assertIn("head_dim", caught.exception.details())

    def test_client_close_frees_every_page(self):
        other = Client(SERVER.address, transport=self.TRANSPORT)
        session = other.open_session(num_layers=LAYERS, num_heads=HEADS, kv_num_heads=KV_HEADS,
                                     head_dim=DIM, max_tokens=512, reserve=True)
        self.assertGreater(self.client.stats().kv_pages_used, 0)
        self.assertNotIn(session.id, [info.session_id for info in self.client.list_sessions()])
        other.close()
        self.assertTrue(wait_until(
            lambda: session.id not in [s.session_id for s in self.client.list_sessions()]
            and self.client.stats().sessions == len(self.client.list_sessions())))

    def test_server_without_sessions_says_so(self):
        with Client(PLAIN_SERVER.address, transport=self.TRANSPORT) as plain:
            with self.assertRaises(AttnServeError) as caught:
                plain.open_session(num_layers=1, num_heads=2, head_dim=DIM, max_tokens=16)
            self.assertEqual(caught.exception.code().name, "FAILED_PRECONDITION")


class GrpcioSessionTest(SessionTest):
    TRANSPORT = "grpcio"


if __name__ == "__main__":
    unittest.main()
