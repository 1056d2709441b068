#!/usr/bin/env python3
"""INT4 weight-only accuracy: sparq's `precision: int4` beside onnxruntime's MatMulNBitsQuantizer.

On one model and its evaluation data (a real-suite folder: model.onnx,
eval.npz, meta.json naming the output), for each block size:
  * sparq: `sparq run` with `quantize: {precision: int4, int4: {block_size: B,
    format: F, method: M}}` (zero points: the default; M rtn, gptq or awq,
    the last two on the first --calib samples of calib.npz), metric
    mean_cosine; the written file is also run by onnxruntime;
  * onnxruntime: MatMulNBitsQuantizer(block_size=B) with its defaults (RTN,
    is_symmetric=False, QOperator = MatMulNBits).
Every file runs in onnxruntime (CPU, all optimizations) on the evaluation
data; each row is the per-sample cosine of the output with FP32's (also
onnxruntime), mean and min, the output SQNR, and the file size. sparq's own
executor's mean cosine (from its report) is printed beside its rows.

  python3 bench/int4_accuracy.py --sparq build/bin/sparq --model-dir /work/models/real/minilm_l6 \
      --blocks 32,128 [--methods rtn,gptq,awq] [--calib 64] [--work /tmp/int4_acc]
"""
import argparse
import json
import os
import subprocess
import time

import numpy as np
import onnx
import onnxruntime as ort


def ort_outputs(path, feeds, output):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    n = len(next(iter(feeds.values())))
    outs = []
    for b in range(0, n, 16):
        outs.append(sess.run([output], {k: feeds[k][b:b + 16] for k in names})[0])
    return np.concatenate(outs)


def compare(ref, got):
    r = ref.reshape(len(ref), -1).astype(np.float64)
    g = got.reshape(len(got), -1).astype(np.float64)
    cos = np.sum(r * g, 1) / np.sqrt(np.sum(r * r, 1) * np.sum(g * g, 1))
    sqnr = 10 * np.log10(np.sum(r * r) / max(np.sum((r - g) ** 2), 1e-30))
    return float(cos.mean()), float(cos.min()), float(sqnr)


def size_mib(path):
    total = os.path.getsize(path)
    if os.path.exists(path + ".data"):
        total += os.path.getsize(path + ".data")
    return total / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sparq", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--blocks", default="32,128")
    ap.add_argument("--formats", default="matmulnbits,qdq")
    ap.add_argument("--work", default="/tmp/int4_acc")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--methods", default="rtn")
    ap.add_argument("--calib", type=int, default=64, help="calibration samples of calib.npz for gptq / awq")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    calib = os.path.join(args.work, "calib.npz")
    with np.load(os.path.join(args.model_dir, "calib.npz")) as f:
        np.savez(calib, **{k: f[k][:args.calib] for k in f.files})
    model = os.path.join(args.model_dir, "model.onnx")
    meta = json.load(open(os.path.join(args.model_dir, "meta.json")))
    output = meta.get("output") or onnx.load(model, load_external_data=False).graph.output[0].name
    with np.load(os.path.join(args.model_dir, "eval.npz")) as f:
        feeds = {k: f[k] for k in f.files}
    ref = ort_outputs(model, feeds, output)
    rows = [("FP32 (onnxruntime)", 1.0, 1.0, float("inf"), size_mib(model), "", "")]
    for block in [int(b) for b in args.blocks.split(",")]:
        for fmt, method in [(f, m) for m in args.methods.split(",") for f in args.formats.split(",")]:
            out = os.path.join(args.work, f"sparq_{method}_{fmt}_{block}")
            recipe = os.path.join(args.work, f"r_{method}_{fmt}_{block}.yaml")
            data = f"evaluation: {os.path.join(args.model_dir, 'eval.npz')}"
            if method != "rtn":
                data = f"calibration: {calib}, " + data
            with open(recipe, "w") as f:
                f.write(f"version: 1\nmodel: {model}\ndata: {{{data}, batch_size: 16}}\n"
                        f"quantize:\n  precision: int4\n  int4: {{block_size: {block}, format: {fmt}, method: {method}}}\n"
                        f"evaluate: {{metric: mean_cosine, threads: {args.threads}, gate: {{max_drop: 1}}}}\n"
                        f"output: {{dir: {out}, overwrite: true}}\nreport: {{markdown: '', junit: ''}}\n")
            t = time.time()
            proc = subprocess.run([args.sparq, "run", recipe], capture_output=True, text=True)
            secs = time.time() - t
            if proc.returncode not in (0, 1):
                raise SystemExit(proc.stdout + proc.stderr)
            rep = json.load(open(os.path.join(out, "report.json")))
            path = next(os.path.join(out, p) for p in os.listdir(out) if p.endswith(".onnx"))
            mean, mn, sqnr = compare(ref, ort_outputs(path, feeds, output))
            own = rep.get("gate", {}).get("output")
            rows.append((f"sparq int4 {method} block {block}, {fmt}", mean, mn, sqnr, size_mib(path),
                         f"{secs:.1f}", f"sparq's executor: mean cosine {own:.4f}"))
            print(rows[-1], flush=True)
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
        t = time.time()
        q = MatMulNBitsQuantizer(onnx.load(model), block_size=block)
        q.process()
        path = os.path.join(args.work, f"ort_q4_{block}.onnx")
        q.model.save_model_to_file(path)
        secs = time.time() - t
        mean, mn, sqnr = compare(ref, ort_outputs(path, feeds, output))
        rows.append((f"ORT MatMulNBitsQuantizer block {block} (RTN, asymmetric)", mean, mn, sqnr, size_mib(path),
                     f"{secs:.1f}", ""))
        print(rows[-1], flush=True)
    print("\n| variant | cosine (mean) | cosine (min) | SQNR dB | size (MiB) | time (s) | note |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, mean, mn, sqnr, size, secs, note in rows:
        print(f"| {name} | {mean:.4f} | {mn:.4f} | {sqnr:.2f} | {size:.1f} | {secs} | {note} |")


if __name__ == "__main__":
    main()
