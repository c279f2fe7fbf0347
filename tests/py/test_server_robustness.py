"""tern serve under bad input, full queues, disconnects, concurrency and
shutdown: status codes, error bodies, and that it keeps serving."""
import json
import random
import socket
import threading
import time

import pytest

from server_harness import Server

MSGS = [{"role": "user", "content": "Write a function that adds two numbers."}]


@pytest.fixture(scope="module")
def srv():
    # Strict serial (--max-batch 1) so that one running request makes the next wait.
    s = Server("--max-body-bytes", "65536", "--queue-size", "1", "--max-batch", "1")
    yield s
    assert s.stop() == 0, s.output()


def raw_stream(srv, body):
    """Opens a streaming request on a raw socket; returns it after the first data event."""
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(data) + data)
    buf = b""
    while b"data: " not in buf:
        chunk = sock.recv(4096)
        assert chunk, buf
        buf += chunk
    return sock, buf


def test_not_found_and_methods(srv):
    for path in ("/nope", "/v1", "/v1/chat/completions/x"):
        status, body = srv.get(path)
        assert status == 404 and json.loads(body)["error"]["message"] == "Not Found"
    status, body = srv.get("/v1/chat/completions")
    assert status == 404
    status, body = srv.post("/health", {})
    assert status == 404
    c = srv.conn()
    c.request("OPTIONS", "/v1/chat/completions")
    r = c.getresponse()
    assert r.status == 204 and r.getheader("Access-Control-Allow-Origin") == "*"
    c.close()


def test_bad_bodies(srv):
    status, body = srv.post("/v1/chat/completions", b"{\"messages\": [")
    assert status == 400 and body["error"]["message"].startswith("Invalid JSON in request body")
    assert body["error"]["type"] == "invalid_request_error"
    status, body = srv.post("/v1/chat/completions", b"[1, 2]")
    assert status == 400 and body["error"]["message"] == "Request should be a JSON dictionary"
    status, body = srv.post("/v1/chat/completions", {"messages": MSGS, "max_tokens": "ten"})
    assert status == 400 and body["error"]["message"] == "max_tokens must be of type int"
    status, body = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]})
    assert status == 400
    status, body = srv.post("/v1/completions", {"prompt": ["a"]})
    assert status == 400 and body["error"]["message"] == "prompt must be a non-empty string"
    status, body = srv.post("/v1/chat/completions", b"\xff\xfe{}")
    assert status == 400


def test_body_too_large(srv):
    big = json.dumps({"prompt": "x" * 70000})
    status, body = srv.post("/v1/completions", big)
    assert status == 413 and body["error"]["type"] == "invalid_request_error" and "65536" in body["error"]["message"]
    # Chunked upload (no Content-Length) over the cap.
    c = srv.conn()
    c.putrequest("POST", "/v1/completions")
    c.putheader("Transfer-Encoding", "chunked")
    c.putheader("Content-Type", "application/json")
    c.endheaders()
    part = b"x" * 10000
    for _ in range(8):
        c.send(b"%x\r\n%s\r\n" % (len(part), part))
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    assert r.status == 413 and json.loads(r.read())["error"]
    c.close()
    assert srv.get("/health")[0] == 200


def test_keep_alive(srv):
    c = srv.conn()
    for _ in range(3):
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": "def f():", "max_tokens": 2}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200 and json.loads(r.read())["usage"]["completion_tokens"] <= 2
    c.request("GET", "/health")
    assert c.getresponse().read() == b'{"status": "ok"}'
    c.close()


def test_stream_disconnect_stops_generation(srv):
    before = srv.metric("tern_generated_tokens_total")
    drops = srv.metric("tern_client_disconnects_total")
    sock, _ = raw_stream(srv, {"messages": MSGS, "max_tokens": 4000, "stream": True})
    sock.close()
    t0 = time.time()
    status, body = srv.post("/v1/completions", {"prompt": "def f():", "max_tokens": 1})
    assert status == 200 and time.time() - t0 < 3
    assert srv.metric("tern_client_disconnects_total") == drops + 1
    assert srv.metric("tern_generated_tokens_total") - before < 64


def test_non_stream_disconnect_stops_generation(srv):
    before = srv.metric("tern_generated_tokens_total")
    drops = srv.metric("tern_client_disconnects_total")
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    data = json.dumps({"messages": MSGS, "max_tokens": 4000}).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    t0 = time.time()
    while srv.metric("tern_requests_running") == 0 and time.time() - t0 < 5:
        time.sleep(0.01)
    sock.close()
    status, _ = srv.post("/v1/completions", {"prompt": "def f():", "max_tokens": 1})
    assert status == 200
    assert srv.metric("tern_client_disconnects_total") == drops + 1
    # Stopped long before its 4000 tokens (the 1-token request adds one).
    assert srv.metric("tern_generated_tokens_total") - before < 1000


def test_queue_full_and_keepalive(srv):
    running, _ = raw_stream(srv, {"messages": MSGS, "max_tokens": 4000, "stream": True})
    waiting = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    data = json.dumps({"messages": MSGS, "max_tokens": 4, "stream": True}).encode()
    waiting.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    buf = b""
    t0 = time.time()
    while b": keepalive" not in buf and time.time() - t0 < 5:
        buf += waiting.recv(4096)
    assert b": keepalive" in buf and b"data: " not in buf
    assert srv.metric("tern_queue_depth") == 1
    status, body = srv.post("/v1/chat/completions", {"messages": MSGS, "max_tokens": 2})
    assert status == 503 and "queue is full" in body["error"]["message"]
    running.close()
    while b"data: [DONE]" not in buf:
        chunk = waiting.recv(4096)
        assert chunk
        buf += chunk
    waiting.close()
    assert srv.get("/health")[0] == 200


def test_http_garbage(srv):
    rng = random.Random(5)
    junk = [b"GARBAGE\r\n\r\n", b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
            b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 10\r\n\r\n{",
            b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
            b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]
    junk += [bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 300))) for _ in range(20)]
    for j in junk:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(j)
        s.shutdown(socket.SHUT_WR)
        try:
            s.recv(4096)
        except OSError:
            pass
        s.close()
    assert srv.get("/health")[0] == 200


def test_mutated_bodies(srv):
    rng = random.Random(11)
    seed = json.dumps({"messages": MSGS, "max_tokens": 2, "stop": ["a"], "logit_bias": {"5": 1},
                       "top_logprobs": 2, "logprobs": True, "temperature": 0.5, "seed": 3})
    codes = set()
    for _ in range(150):
        b = bytearray(seed.encode())
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(b))
            op = rng.randrange(3)
            if op == 0:
                b[i] = rng.choice(b'{}[]":,0123456789-.etrufalsn\\ ')
            elif op == 1:
                del b[i]
            else:
                b.insert(i, rng.randrange(256))
        status, _ = srv.post("/v1/chat/completions", bytes(b))
        codes.add(status)
    assert codes <= {200, 400}, codes
    assert srv.get("/health")[0] == 200


def test_concurrent_clients():
    s = Server("--queue-size", "64")
    try:
        results = []

        def one(i):
            if i % 2:
                events = s.sse("/v1/chat/completions", {"messages": MSGS, "max_tokens": 8, "stream": True})
                results.append(events[-1] == "data: [DONE]")
            else:
                status, body = s.post("/v1/completions", {"prompt": "def f%d():" % i, "max_tokens": 8})
                results.append(status == 200 and body["usage"]["completion_tokens"] <= 8)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 24 and all(results)
        status, body = s.get("/metrics")
        text = body.decode()
        assert 'tern_requests_total{endpoint="/v1/chat/completions",status="2xx"} 12' in text
        assert "tern_queue_depth 0" in text and "tern_prompt_tokens_total" in text
    finally:
        assert s.stop() == 0


def test_sigterm_finishes_running_stream():
    s = Server()
    sock, buf = raw_stream(s, {"messages": MSGS, "max_tokens": 4000, "stream": True})
    s.proc.terminate()
    while b"data: [DONE]" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    sock.close()
    assert b"data: [DONE]" in buf and b'"finish_reason": "stop"' in buf
    assert s.proc.wait(timeout=20) == 0


def test_port_in_use_and_bad_flags(srv):
    import subprocess
    from server_harness import MODEL, TERN
    r = subprocess.run([str(TERN), "serve", "--model", str(MODEL), "--port", str(srv.port)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot listen" in r.stderr
    r = subprocess.run([str(TERN), "serve", "--model", str(MODEL), "--chat-template-args", "[1]"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--chat-template-args must be a JSON object" in r.stderr
    r = subprocess.run([str(TERN), "serve", "--model", str(MODEL), "--adapter-path", "x"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not supported" in r.stderr
    r = subprocess.run([str(TERN), "serve", "--model", str(MODEL), "--draft-model", "/nonexistent-draft"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "/nonexistent-draft" in r.stderr
