#!/usr/bin/env python3
"""Silero VAD before and after folding its If on sr (issue 24): per-chunk
time of sparq and onnxruntime running each file, and each file's outputs
against onnxruntime running the original fed sr = 16000.

    python3 bench/vad_fold.py --sparq build/bin/sparq \
        --file original=/work/models/real/silero_vad/model.onnx \
        --file folded=<sparq run, quantize off>/model.sparq.onnx \
        --file int8=<sparq run, default recipe>/model.sparq.onnx

One 576-sample chunk (64 context + 512) and its state per run, batch 1,
1 thread. sparq: `sparq eval FILE --inputs chunks.npz --threads 1 --batch 1
--json` (`--constant sr=16000` where the file still has the input), its
per-batch CPU mean and p50 latency; onnxruntime 1 intra-op thread, all
optimizations, one session.run per chunk timed by time.process_time and
perf_counter. Medians over --rounds.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np


def ort_session(path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def feeds_for(sess, chunks, states, i):
    names = {x.name for x in sess.get_inputs()}
    feed = {"input": chunks[i:i + 1], "state": np.ascontiguousarray(states[i][:, None])}
    if "sr" in names:
        feed["sr"] = np.array(16000, np.int64)
    return feed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sparq", required=True)
    ap.add_argument("--file", action="append", required=True, help="label=path; the first is the reference")
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    files = [f.split("=", 1) for f in args.file]
    rng = np.random.default_rng(0)
    chunks = rng.uniform(-0.5, 0.5, (args.chunks, 576)).astype(np.float32)
    states = rng.uniform(-0.5, 0.5, (args.chunks, 2, 128)).astype(np.float32)
    tmp = tempfile.mkdtemp()
    data = os.path.join(tmp, "chunks.npz")
    np.savez(data, input=chunks, state=states)

    reference = None
    print("| file | size (MiB) | integer ops | sparq CPU ms/chunk | sparq p50 ms | sparq peak RSS MiB "
          "| onnxruntime CPU ms/chunk | onnxruntime wall ms/chunk | max abs change of p vs original (ORT) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, path in files:
        import onnx

        ops = [n.op_type for n in onnx.load(path).graph.node]
        sess = ort_session(path)
        has_sr = "sr" in {x.name for x in sess.get_inputs()}
        cpu, p50, rss = [], [], []
        for _ in range(args.rounds):
            cmd = [args.sparq, "eval", path, "--inputs", data, "--threads", "1", "--batch", "1", "--json"]
            if has_sr:
                cmd += ["--constant", "sr=16000"]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            j = json.loads(out)
            cpu.append(1e3 * j["latency"]["cpu_mean_seconds"])
            p50.append(1e3 * j["latency"]["p50_seconds"])
            rss.append(j["peak_rss_mib"])
        probs = []
        ort_cpu, ort_wall = [], []
        for _ in range(args.rounds):
            c0, w0 = time.process_time(), time.perf_counter()
            run = [sess.run(None, feeds_for(sess, chunks, states, i))[0] for i in range(args.chunks)]
            ort_cpu.append(1e3 * (time.process_time() - c0) / args.chunks)
            ort_wall.append(1e3 * (time.perf_counter() - w0) / args.chunks)
            probs = np.concatenate(run)
        if reference is None:
            reference = probs
        change = float(np.abs(probs - reference).max())
        size = os.path.getsize(path) / 2 ** 20
        integer = sum(op in ("QuantizeLinear", "QLinearConv", "ConvInteger", "MatMulInteger") for op in ops)
        print(f"| {label} | {size:.2f} | {integer} | {statistics.median(cpu):.3f} | {statistics.median(p50):.3f} "
              f"| {statistics.median(rss):.0f} | {statistics.median(ort_cpu):.3f} | {statistics.median(ort_wall):.3f} "
              f"| {change:.2g} |")


if __name__ == "__main__":
    main()
