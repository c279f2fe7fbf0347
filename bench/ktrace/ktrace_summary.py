#!/usr/bin/env python3
"""Summarises a kernel timeline written by bench/ktrace/ktrace.c.

For the CUDA graph replayed most often (the decode pass) it prints, per kind
of kernel (name and grid) and per replay: how many run, their mean time from
start to end (a kernel launched early counts its wait), and their share of
the replay's span on the critical path: each kernel in start order adds the
time its end lies past every earlier kernel's end, so the shares sum to the
span. Usage: ktrace_summary.py ktrace.tsv [--layer N]  (N: print the kernels
of replay 2 from position N on, one layer's worth, in order).
"""
import re
import sys
from collections import defaultdict


def short(name):
    m = re.match(r"_Z(\d+)", name)
    if not m:
        return name[:40]
    n = int(m.group(1))
    base = name[len(m.group(0)):len(m.group(0)) + n]
    targs = re.findall(r"L[bi](\d+)E", name[len(m.group(0)) + n:])
    return base + ("<" + ",".join(targs) + ">" if targs else "")


def main():
    path = sys.argv[1]
    layer_at = int(sys.argv[sys.argv.index("--layer") + 1]) if "--layer" in sys.argv else None
    recs = []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 8:
                continue
            recs.append((int(p[0]), int(p[1]), int(p[2]), int(p[3]), (int(p[4]), int(p[5]), int(p[6])), short(p[7])))
    graphs = defaultdict(list)
    for r in recs:
        if r[2]:
            graphs[r[2]].append(r)
    if not graphs:
        print("no graph replays in", path)
        return
    # Graphs are keyed by shape: take the one with the most kernels run.
    gid, rs = max(graphs.items(), key=lambda kv: len(kv[1]))
    rs.sort()
    seen = defaultdict(int)
    replays = defaultdict(list)
    for r in rs:
        k = seen[r[3]]
        seen[r[3]] += 1
        replays[k].append(r)
    full = max(len(v) for v in replays.values())
    reps = [sorted(v) for k, v in sorted(replays.items()) if len(v) == full and k > 0]
    if not reps:
        print("no complete replays")
        return
    agg = defaultdict(lambda: [0, 0.0, 0.0])
    spans = []
    for v in reps:
        last = v[0][0]
        for r in v:
            inc = max(0, r[1] - last)
            last = max(last, r[1])
            a = agg[(r[5], r[4])]
            a[0] += 1
            a[1] += r[1] - r[0]
            a[2] += inc
        spans.append(last - v[0][0])
    n = len(reps)
    span = sum(spans) / n / 1e3
    print(f"graph {gid}: {full} kernels a replay, {n} replays, span {span:.1f} us "
          f"(min {min(spans) / 1e3:.1f}, max {max(spans) / 1e3:.1f})")
    print(f"{'kernel':58s} {'grid':>14s} {'n':>4s} {'mean us':>8s} {'path us':>9s} {'share':>6s}")
    for key, a in sorted(agg.items(), key=lambda kv: -kv[1][2]):
        cnt = a[0] / n
        print(f"{key[0][:58]:58s} {str(key[1]):>14s} {cnt:4.0f} {a[1] / a[0] / 1e3:8.2f} "
              f"{a[2] / n / 1e3:9.1f} {100 * a[2] / n / 1e3 / span:5.1f}%")
    if layer_at is not None and len(reps) > 2:
        v = reps[2]
        print(f"replay 2, kernels {layer_at}..: start (us from the previous end), time, critical-path add")
        last = v[layer_at - 1][1] if layer_at > 0 else v[0][0]
        hi = max(r[1] for r in v[:layer_at]) if layer_at > 0 else v[0][0]
        for r in v[layer_at:layer_at + 8]:
            inc = max(0, r[1] - hi)
            print(f"  {r[5][:50]:50s} {str(r[4]):>14s} start {(r[0] - last) / 1e3:+7.2f} time {(r[1] - r[0]) / 1e3:7.2f}"
                  f" add {inc / 1e3:6.2f}")
            last = r[1]
            hi = max(hi, r[1])


if __name__ == "__main__":
    main()
