#!/usr/bin/env python3
"""Load test for `tern serve`: N concurrent streaming clients for a fixed time.

Every client loops over streaming chat / text requests (random lengths, some
with stop strings, some abandoned mid-stream) and checks each reply's framing.
Passes when no request failed and the server's RSS at the end is within 5% of
its RSS after the first half of the run (no growth under steady load).

usage: bench/server_load.py [--clients 32] [--duration 120] [--threads N]
exit status 0 on pass, 1 on failure.
"""
import argparse
import http.client
import json
import random
import signal
import threading
import time

from serve_util import ROOT, start_server
PROMPTS = ["Write a function that adds two numbers.", "Parse a CSV file and print each row.",
           "Implement binary search in Python.", "class LinkedList:", "def quicksort(xs):"]


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def one_request(port, rng):
    chat = rng.random() < 0.6
    body = {"max_tokens": rng.randint(8, 64), "stream": True, "temperature": rng.choice([0, 0.7]),
            "seed": rng.randint(0, 1000)}
    if rng.random() < 0.3:
        body["stop"] = ["\n\n", "return"]
    if chat:
        path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": rng.choice(PROMPTS)}]
    else:
        path, body["prompt"] = "/v1/completions", rng.choice(PROMPTS)
    abandon = rng.random() < 0.1
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return f"status {r.status}: {r.read()[:200]!r}"
        if abandon:
            r.read1(100)
            return None
        events = [e for e in r.read().decode().split("\n\n") if e and not e.startswith(":")]
        if events[-1] != "data: [DONE]":
            return "no [DONE]"
        last = json.loads(events[-2][6:])
        if last["choices"][0]["finish_reason"] not in ("stop", "length"):
            return f"bad finish {last}"
        return None
    except Exception as e:  # noqa: BLE001 - every failure is counted
        return f"{type(e).__name__}: {e}"
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "tern-demo-code-17m"))
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--duration", type=float, default=120)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    srv, port = start_server(a.model, a.threads, "--queue-size", "64")
    start = time.time()
    stop_at = start + a.duration
    counts = {"ok": 0, "fail": 0}
    errors = []
    lock = threading.Lock()

    def client(i):
        rng = random.Random(i)
        while time.time() < stop_at:
            err = one_request(port, rng)
            with lock:
                counts["fail" if err else "ok"] += 1
                if err and len(errors) < 10:
                    errors.append(err)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    rss_mid = None
    samples = []
    while any(t.is_alive() for t in threads):
        time.sleep(1)
        el = time.time() - start
        samples.append((round(el), rss_kib(srv.pid)))
        if rss_mid is None and el >= a.duration / 2:
            rss_mid = samples[-1][1]
    for t in threads:
        t.join()
    rss_end = rss_kib(srv.pid)
    status, metrics = None, ""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    metrics = c.getresponse().read().decode()
    srv.send_signal(signal.SIGTERM)
    rc = srv.wait(timeout=60)
    gen = next((l.split()[1] for l in metrics.splitlines() if l.startswith("tern_generated_tokens_total")), "?")
    drift = abs(rss_end - rss_mid) / rss_mid if rss_mid else 1.0
    print(f"clients {a.clients}, {a.duration:.0f} s: {counts['ok']} ok, {counts['fail']} failed, "
          f"{gen} tokens generated; RSS {rss_mid} KiB at half time, {rss_end} KiB at the end "
          f"({drift * 100:.2f}% drift); server exit {rc}")
    for e in errors:
        print("  error:", e)
    ok = counts["fail"] == 0 and drift <= 0.05 and rc == 0 and counts["ok"] > 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
