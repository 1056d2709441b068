#!/usr/bin/env python3
"""Calibration cost on the real-model suite: sparq KL against onnxruntime's Entropy.

Issue 14's target: calibrating with KL over 256 samples is at least 10x faster
than onnxruntime's Entropy calibration, with at least 10x less peak memory,
on each suite model. Both sides do the same job, from the FP32 model and the
calibration split to a written INT8 QDQ model:

  sparq      `sparq calibrate --method kl --samples N --int8-only` then
             `sparq quantize --scales` (two processes: time summed, peak RSS
             the larger); --int8-only observes only the tensors INT8
             quantization reads (the same INT8 model), --tensors all every one
  onnxruntime quantize_static(..., calibrate_method=Entropy, QDQ,
             per_channel=True) in a worker process, reading the same samples
             in batches of 8 (bench/accuracy_suite.py's worker); its time is
             the quantize_static call, imports and data loading excluded

Wall time of each process (sparq includes its start-up and data loading, so
the comparison favours onnxruntime slightly), or with --cpu-time the CPU time
of all its threads (onnxruntime's: process_time around the call), and peak
RSS from GNU time.
Runs are sequential, one at a time; --rounds > 1 interleaves and takes medians.

Usage:
  python3 bench/calib_vs_ort.py --sparq build/bin/sparq --suite build/models/real [--samples 256]
      [--models efficientnet_lite0,...] [--md bench/RESULTS.md]
"""
import argparse
import datetime
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from accuracy_suite import REPO, run_ort, write_splits  # noqa: E402
from quant_vs_ort import machine, measure, tail  # noqa: E402

SECTION = "## Calibration cost vs onnxruntime (issue 14)"


def run_sparq(sparq, model, calib, n, work, threads, tensors):
    scales = os.path.join(work, "sparq_kl_scales.json")
    out = os.path.join(work, "sparq_kl.onnx")
    scope = ["--int8-only"] if tensors == "int8" else []
    cal = measure([sparq, "calibrate", model, "--data", calib, "--method", "kl", "--samples", str(n), "--batch", "8",
                   "--threads", str(threads), "-o", scales] + scope, os.path.join(work, "sparq_calibrate.log"))
    if cal["rc"] != 0:
        return {"error": "sparq calibrate: " + " ".join(tail(cal["log"], 3).split())[-300:]}
    q = measure([sparq, "quantize", model, "--scales", scales, "-o", out], os.path.join(work, "sparq_quantize.log"))
    if q["rc"] != 0:
        return {"error": "sparq quantize: " + " ".join(tail(q["log"], 3).split())[-300:]}
    return {"time_s": cal["wall_s"] + q["wall_s"], "calibrate_s": cal["wall_s"],
            "cpu_s": cal["cpu_s"] + q["cpu_s"], "peak_rss_mib": max(cal["peak_rss_mib"], q["peak_rss_mib"])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sparq", required=True)
    ap.add_argument("--suite", default=os.path.join(REPO, "build", "models", "real"))
    ap.add_argument("--models", default="efficientnet_lite0,minilm_l6,yolov8n_det,ppocr_rec,ppocr_det")
    ap.add_argument("--samples", type=int, default=256, help="calibration samples (at most what the split has)")
    ap.add_argument("--threads", type=int, default=2, help="sparq's threads (onnxruntime uses its default)")
    ap.add_argument("--tensors", choices=["int8", "all"], default="int8",
                    help="sparq observes the tensors INT8 quantization reads (--int8-only: the same INT8 model, "
                         "the rest of the graph fused) or every tensor (what a TensorRT cache or FP16 needs)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--work", default=os.path.join(REPO, "build", "calib_vs_ort"))
    ap.add_argument("--cpu-time", action="store_true",
                    help="compare CPU time (all threads) instead of wall time: for a machine shared with other work")
    ap.add_argument("--md", default="", help="replace this section of a Markdown file (e.g. bench/RESULTS.md)")
    args = ap.parse_args(argv)
    sparq = os.path.abspath(args.sparq)
    rows = []
    for name in args.models.split(","):
        model = os.path.join(os.path.abspath(args.suite), name, "model.onnx")
        work = os.path.join(os.path.abspath(args.work), name)
        os.makedirs(work, exist_ok=True)
        paths, calib, _ = write_splits(os.path.dirname(model), work, args.samples, 2)
        n = len(next(iter(calib.values())))
        runs = {"sparq": [], "ort": []}
        for _ in range(args.rounds):
            runs["sparq"].append(run_sparq(sparq, model, paths["calib"], n, work, args.threads, args.tensors))
            runs["ort"].append(run_ort(model, paths, work, "Entropy", "static", "Entropy", n))
        row = {"model": name, "samples": n}
        for side, results in runs.items():
            ok = [r for r in results if "error" not in r]
            if not ok:
                row[side] = {"error": results[0]["error"]}
                continue
            key = "cpu_s" if args.cpu_time else "time_s"
            row[side] = {"time_s": statistics.median(r[key] for r in ok),
                         "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in ok)}
        rows.append(row)
        print(row, flush=True)
    text = markdown(rows, args, argv)
    print(text)
    if args.md:
        replace_section(args.md, text)
    return 0


def markdown(rows, args, argv):
    def cell(side, key, digits):
        v = side.get(key)
        return "" if v is None else f"{v:.{digits}f}"

    lines = [SECTION, "",
             f"Machine: {machine()}. Date {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC.", "",
             "Command: `python3 bench/calib_vs_ort.py " + " ".join(argv if argv is not None else sys.argv[1:]) + "`",
             "", "sparq: `sparq calibrate --method kl" + (" --int8-only" if args.tensors == "int8" else "") +
             "` + `sparq quantize --scales` (" +
             ("CPU time of all threads" if args.cpu_time else "wall") + ", start-up and data loading "
             "included); onnxruntime: `quantize_static(..., calibrate_method=Entropy, QDQ, per_channel=True)` "
             "(the call). Target: >= 10x faster and >= 10x less peak memory.", "",
             "| model | samples | sparq s | ORT Entropy s | speed-up | sparq peak MiB | ORT peak MiB | memory ratio | "
             "targets |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        s, o = r["sparq"], r["ort"]
        if "error" in s or "error" in o:
            lines.append(f"| {r['model']} | {r['samples']} | {s.get('error', cell(s, 'time_s', 1))} | "
                         f"{o.get('error', cell(o, 'time_s', 1))} | | | | | |")
            continue
        speed = o["time_s"] / s["time_s"]
        mem = o["peak_rss_mib"] / s["peak_rss_mib"]
        verdict = ("speed met" if speed >= 10 else "speed **missed**") + ", " + \
                  ("memory met" if mem >= 10 else "memory **missed**")
        lines.append(f"| {r['model']} | {r['samples']} | {s['time_s']:.1f} | {o['time_s']:.1f} | {speed:.1f}x | "
                     f"{s['peak_rss_mib']:.0f} | {o['peak_rss_mib']:.0f} | {mem:.1f}x | {verdict} |")
    return "\n".join(lines) + "\n"


def replace_section(path, text):
    with open(path) as f:
        old = f.read()
    start = old.find(SECTION)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + ("" if end < 0 else old[end:])
    with open(path, "w") as f:
        f.write(new)


if __name__ == "__main__":
    sys.exit(main())
