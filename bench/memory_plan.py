#!/usr/bin/env python3
"""The executor's memory plan on vs off (`sparq eval --no-memory-plan`): per
model and batch size, the median over interleaved rounds of sparq's mean CPU
time and p50 wall time per batch, peak RSS and minor page faults of the whole
`sparq eval` process (/usr/bin/time -v). Prints a Markdown table.

With --allocs it instead counts heap allocations (malloc, calloc, realloc,
the aligned allocators; operator new goes through malloc) of the whole
process with bench/alloc_count.c, an LD_PRELOAD shim it compiles with `cc`,
at --limit samples and at twice that: the per-batch count is the difference
over the batches added, i.e. what one more batch allocates in steady state.

Usage: python3 bench/memory_plan.py --sparq build/bin/sparq --suite /work/models/real
           [--models a,b] [--batches 1,16] [--threads 1] [--limit 64] [--rounds 3] [--allocs]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def run(sparq, model_dir, batch, threads, limit, plan):
    cmd = ["/usr/bin/time", "-v", sparq, "eval", os.path.join(model_dir, "model.onnx"), "--inputs",
           os.path.join(model_dir, "eval.npz"), "--batch", str(batch), "--threads", str(threads), "--limit",
           str(limit), "--json"]
    if not plan:
        cmd.append("--no-memory-plan")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    report = json.loads(p.stdout)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 1024
    faults = int(re.search(r"Minor \(reclaiming a frame\) page faults: (\d+)", p.stderr).group(1))
    lat = report["latency"]
    return lat["cpu_mean_seconds"] * 1e3, lat["p50_seconds"] * 1e3, rss, faults


HERE = os.path.dirname(os.path.abspath(__file__))


def build_alloc_counter(work):
    """bench/alloc_count.c compiled into `work`; its path."""
    lib = os.path.join(work, "alloc_count.so")
    cmd = ["cc", "-O2", "-shared", "-fPIC", "-o", lib, os.path.join(HERE, "alloc_count.c")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return lib


def count_allocs(sparq, model_dir, batch, threads, limit, plan, lib, work):
    """(allocations, bytes asked for, batches run) of one `sparq eval`."""
    out = os.path.join(work, "count.txt")
    if os.path.exists(out):
        os.remove(out)
    cmd = [sparq, "eval", os.path.join(model_dir, "model.onnx"), "--inputs", os.path.join(model_dir, "eval.npz"),
           "--batch", str(batch), "--threads", str(threads), "--limit", str(limit), "--json"]
    if not plan:
        cmd.append("--no-memory-plan")
    env = dict(os.environ, LD_PRELOAD=lib, SPARQ_ALLOC_COUNT_FILE=out)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    with open(out) as f:
        fields = f.read().split()
    return int(fields[1]), int(fields[3]), json.loads(p.stdout)["batches"]


def allocs_table(a):
    import tempfile
    with tempfile.TemporaryDirectory() as work:
        lib = build_alloc_counter(work)
        print("| model | batch | batches | allocations off -> on | MiB asked for off -> on | "
              "allocations per extra batch off -> on |")
        print("|---|---|---|---|---|---|")
        for name in a.models.split(","):
            for batch in [int(b) for b in a.batches.split(",")]:
                limit = max(a.limit, 4 * batch)
                row = {}
                for plan in (False, True):
                    n1, b1, k1 = count_allocs(a.sparq, os.path.join(a.suite, name), batch, a.threads, limit, plan,
                                              lib, work)
                    n2, _, k2 = count_allocs(a.sparq, os.path.join(a.suite, name), batch, a.threads, 2 * limit,
                                             plan, lib, work)
                    row[plan] = (n1, b1 / 2**20, (n2 - n1) / max(k2 - k1, 1), k1)
                off, on = row[False], row[True]
                print(f"| {name} | {batch} | {off[3]} | {off[0]} -> {on[0]} | {off[1]:.0f} -> {on[1]:.0f} | "
                      f"{off[2]:.0f} -> {on[2]:.0f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparq", default="build/bin/sparq")
    ap.add_argument("--suite", default="/work/models/real")
    ap.add_argument("--models", default="efficientnet_lite0,minilm_l6,yolov8n_det,ppocr_rec,ppocr_det")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--allocs", action="store_true", help="count heap allocations instead of timing")
    a = ap.parse_args()
    if a.allocs:
        allocs_table(a)
        return
    print(f"| model | batch | CPU ms/batch off -> on | p50 ms off -> on | peak RSS MiB off -> on | minor faults off -> on |")
    print("|---|---|---|---|---|---|")
    for name in a.models.split(","):
        for batch in [int(b) for b in a.batches.split(",")]:
            res = {True: [], False: []}
            for _ in range(a.rounds):
                for plan in (False, True):
                    res[plan].append(run(a.sparq, os.path.join(a.suite, name), batch, a.threads, max(a.limit, 4 * batch), plan))
            med = {k: [statistics.median(x[i] for x in v) for i in range(4)] for k, v in res.items()}
            off, on = med[False], med[True]
            print(f"| {name} | {batch} | {off[0]:.2f} -> {on[0]:.2f} ({off[0] / on[0]:.2f}x) | {off[1]:.2f} -> {on[1]:.2f} | "
                  f"{off[2]:.0f} -> {on[2]:.0f} | {off[3]:.0f} -> {on[3]:.0f} |", flush=True)


if __name__ == "__main__":
    main()
