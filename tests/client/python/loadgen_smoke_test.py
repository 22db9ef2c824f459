"""attn_loadgen against the CPU-backend attn_server: short bounded runs of
both load modes, checking that the reports add up and parse.

Run by ctest with PYTHONPATH=<build>/client/python, ATTN_SERVER_BINARY and
ATTN_LOADGEN_BINARY set.
"""

import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from attn_test_server import ServerProcess  # noqa: E402

PERCENTILES = ["p50", "p90", "p95", "p99", "p99.9", "max"]


def setUpModule():
    global SERVER
    SERVER = ServerProcess(["--backend=cpu", "--cpu_threads=1"]).__enter__()


def tearDownModule():
    SERVER.__exit__(None, None, None)


class LoadgenSmokeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="attn_loadgen_test_")

    def tearDown(self):
        self.tmp.cleanup()

    def run_loadgen(self, *args):
        out_dir = os.path.join(self.tmp.name, "out")
        command = [os.environ["ATTN_LOADGEN_BINARY"], f"--address={SERVER.address}",
                   "--shape=1,64,2,32", "--dtype=bf16", "--warmup=0.2s", "--duration=0.8s",
                   "--channels=2", f"--out_dir={out_dir}", "--json_requests", *args]
        # Bounded: each level ends by itself; the timeout only guards the test.
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        with open(os.path.join(out_dir, "loadgen.json")) as f:
            report = json.load(f)
        with open(os.path.join(out_dir, "loadgen.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        svg = ElementTree.parse(os.path.join(out_dir, "loadgen_latency.svg")).getroot()
        self.assertTrue(svg.tag.endswith("svg"))
        self.assertEqual(len(rows), len(report["levels"]))
        self.assertNotIn("\r", result.stderr)  # no progress line without a terminal
        return result.stdout, report, rows

    def check_level(self, level, row):
        self.assertGreater(level["sent"], 0)
        self.assertEqual(level["completed"] + level["failed"], level["sent"])
        self.assertEqual(sum(level["errors"].values()), level["failed"])
        self.assertEqual(len(level["requests"]), level["sent"])
        latency = level["latency_ms"]
        self.assertEqual(latency["count"], level["completed"])
        values = [latency[p] for p in PERCENTILES]
        self.assertEqual(values, sorted(values), latency)
        self.assertLessEqual(latency["min"], latency["p50"])
        self.assertGreater(level["throughput_rps"], 0)
        self.assertGreater(level["tensor_gbps"], 0)
        for request in level["requests"]:
            self.assertLessEqual(request["due_ms"], request["sent_ms"])
            self.assertLessEqual(request["sent_ms"], request["done_ms"])
        # The CSV row says the same.
        self.assertEqual(int(row["sent"]), level["sent"])
        self.assertEqual(int(row["completed"]) + int(row["failed"]), int(row["sent"]))
        csv_values = [float(row[f"latency_{p.replace('.', '')}_ms"]) for p in PERCENTILES]
        self.assertEqual(csv_values, sorted(csv_values))
        # The server's counters moved over the level (the snapshots bracket
        # the window only approximately, so no exact equality).
        self.assertGreater(level["server_stats_delta"]["requests_ok"], 0)

    def test_closed_loop_sweep(self):
        stdout, report, rows = self.run_loadgen("--concurrency=1:2:x2")
        self.assertEqual([lvl["concurrency"] for lvl in report["levels"]], [1, 2])
        self.assertEqual(report["config"]["mode"], "closed_loop")
        self.assertEqual(report["server"]["backend"], "cpu")
        for level, row in zip(report["levels"], rows):
            self.check_level(level, row)
            self.assertEqual(level["late"], 0)
        self.assertIn("c=2", stdout)

    def test_open_loop_with_request_bound(self):
        _, report, rows = self.run_loadgen("--rate=100", "--arrivals=constant", "--requests=40")
        level = report["levels"][0]
        self.check_level(level, rows[0])
        self.assertEqual(level["mode"], "open_loop")
        self.assertLessEqual(level["sent"] + level["unsent"], 40)
        self.assertGreaterEqual(level["late_percent"], 0)

    def test_breadth_flags_are_sent_and_reported(self):
        stdout, report, rows = self.run_loadgen(
            "--concurrency=1", "--requests=10", "--kv_shape=1,96,1,32", "--causal", "--lse",
            "--window=16,-1")
        problem = report["config"]["problem"]
        self.assertEqual((problem["kv_seq_len"], problem["kv_num_heads"]), (96, 1))
        self.assertTrue(problem["causal"] and problem["return_lse"])
        self.assertEqual((problem["window_left"], problem["window_right"]), (16, -1))
        # Query i (of 64) sees keys i+32-16 .. i+32: 17 each; FLOPs = 4*D*H*pairs.
        self.assertEqual(report["config"]["flops_per_request"], 4 * 32 * 2 * 64 * 17)
        self.check_level(report["levels"][0], rows[0])
        self.assertIn("causal", stdout)
        _, report, _ = self.run_loadgen("--concurrency=1", "--requests=5", "--seqlens_q=10,40",
                                        "--seqlens_k=20,30")
        problem = report["config"]["problem"]
        self.assertTrue(problem["varlen"])
        self.assertEqual(problem["cu_seqlens_q"], [0, 10, 50])
        self.assertEqual(report["config"]["flops_per_request"], 4 * 32 * 2 * (10 * 20 + 40 * 30))

    def test_bad_flags_and_unreachable_server(self):
        loadgen = os.environ["ATTN_LOADGEN_BINARY"]
        result = subprocess.run([loadgen, "--concurrency=0"], capture_output=True, text=True,
                                timeout=60)
        self.assertEqual(result.returncode, 2)
        result = subprocess.run([loadgen, "--address=127.0.0.1:1", "--connect_timeout=1s"],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 1)
        self.assertIn("127.0.0.1:1", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
