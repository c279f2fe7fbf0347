"""Starts a real `tern serve` on a free port for the server test suites."""
import http.client
import json
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# TERN_SERVE_BIN runs the suites against another build (e.g. build-san/tern).
TERN = pathlib.Path(os.environ.get("TERN_SERVE_BIN", os.environ.get("TERN_BIN", ROOT / "build" / "tern")))
MODEL = ROOT / "models" / "tern-demo-code-17m"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *extra, model=None, env=None):
        if not TERN.exists():
            pytest.fail(f"{TERN} is missing: run make first")
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [str(TERN), "serve", "--model", str(model or MODEL), "--port", str(self.port), *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"tern serve exited early:\n{self.output()}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        pytest.fail("tern serve did not come up")

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def conn(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def get(self, path):
        c = self.conn()
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def post(self, path, body, headers=None):
        """Returns (status, parsed JSON or raw bytes)."""
        c = self.conn()
        try:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            c.request("POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
            r = c.getresponse()
            raw = r.read()
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, raw
        finally:
            c.close()

    def sse(self, path, body):
        """Streams a request; returns the list of raw SSE events (strings)."""
        c = self.conn()
        try:
            c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            assert r.status == 200, r.read()
            assert r.getheader("Content-Type") == "text/event-stream"
            return [e for e in r.read().decode().split("\n\n") if e]
        finally:
            c.close()

    def metric(self, name):
        status, body = self.get("/metrics")
        assert status == 200
        for line in body.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail("tern serve did not stop on SIGTERM")
        return self.proc.returncode


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    rc = s.stop()
    assert rc == 0, s.output()
