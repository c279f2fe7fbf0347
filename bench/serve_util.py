"""Starting `tern serve` for the server benchmarks."""
import http.client
import pathlib
import socket
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TERN = ROOT / "build" / "tern"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model, threads=0, *extra):
    """Starts tern serve on a free port and waits (up to 60 s) for /health; returns (process, port)."""
    port = free_port()
    proc = subprocess.Popen([str(TERN), "serve", "--model", str(model), "--port", str(port), "--log-level", "WARNING",
                             *extra] + (["--threads", str(threads)] if threads else []))
    for _ in range(600):
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/health")
            break
        except OSError:
            time.sleep(0.1)
    return proc, port
