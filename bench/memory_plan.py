#!/usr/bin/env python3
"""The executor's memory plan on vs off (`sparq eval --no-memory-plan`): per
model and batch size, the median over interleaved rounds of sparq's mean CPU
time and p50 wall time per batch, peak RSS and minor page faults of the whole
`sparq eval` process (/usr/bin/time -v). Prints a Markdown table.

Usage: python3 bench/memory_plan.py --sparq build/bin/sparq --suite /work/models/real
           [--models a,b] [--batches 1,16] [--threads 1] [--limit 64] [--rounds 3]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparq", default="build/bin/sparq")
    ap.add_argument("--suite", default="/work/models/real")
    ap.add_argument("--models", default="efficientnet_lite0,minilm_l6,yolov8n_det,ppocr_rec,ppocr_det")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
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
