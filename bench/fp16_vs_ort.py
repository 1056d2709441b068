#!/usr/bin/env python3
"""sparq's FP16 files (`sparq calibrate --method max` + `sparq quantize --precision fp16`) run by sparq (default: float32 kernels, values rounded
to float16 between operators) and by onnxruntime, each compared with the FP32
model run by onnxruntime: top-1 agreement of output 0 (argmax over the last
axis, per row) and its SQNR / cosine. Prints a Markdown table.

Usage: python3 bench/fp16_vs_ort.py --sparq build/bin/sparq --suite /work/models/real [--limit 64]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort


def ort_run(path, feeds, batch):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    n = len(next(iter(feeds.values())))
    outs = []
    for i in range(0, n, batch):
        outs.append(sess.run(None, {k: feeds[k][i:i + batch] for k in names})[0].astype(np.float32))
    return np.concatenate(outs)


def compare(a, ref):
    a2 = a.reshape(-1, a.shape[-1]).astype(np.float64)
    r2 = ref.reshape(-1, ref.shape[-1]).astype(np.float64)
    agree = float(np.mean(np.argmax(a2, -1) == np.argmax(r2, -1))) * 100
    err = np.sum((a2 - r2) ** 2)
    sqnr = 10 * np.log10(np.sum(r2 ** 2) / err) if err > 0 else float("inf")
    cos = float(np.sum(a2 * r2) / (np.linalg.norm(a2) * np.linalg.norm(r2)))
    return agree, sqnr, cos, bool(np.all(np.isfinite(a2)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparq", default="build/bin/sparq")
    ap.add_argument("--suite", default="/work/models/real")
    ap.add_argument("--models", default="efficientnet_lite0,minilm_l6,yolov8n_det,ppocr_rec,ppocr_det")
    ap.add_argument("--limit", type=int, default=64)
    a = ap.parse_args()
    print("| model | FP16 run by | top-1 agreement % | SQNR dB | cosine | finite |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            d = os.path.join(a.suite, name)
            fp16 = os.path.join(tmp, name + ".fp16.onnx")
            scales = os.path.join(tmp, name + ".scales.json")  # FP16's range checks read every tensor's range
            subprocess.run([a.sparq, "calibrate", os.path.join(d, "model.onnx"), "--data", os.path.join(d, "calib.npz"),
                            "--method", "max", "-o", scales], check=True, capture_output=True)
            subprocess.run([a.sparq, "quantize", os.path.join(d, "model.onnx"), "--scales", scales, "--precision", "fp16",
                            "-o", fp16], check=True, capture_output=True)
            data = np.load(os.path.join(d, "eval.npz"))
            feeds = {k: data[k][:a.limit] for k in data.files}
            ref = ort_run(os.path.join(d, "model.onnx"), feeds, 8)
            np.savez(os.path.join(tmp, "in.npz"), **feeds)
            out = os.path.join(tmp, "out.npz")
            p = subprocess.run([a.sparq, "eval", fp16, "--inputs", os.path.join(tmp, "in.npz"), "--batch", "8",
                                "--save-outputs", out, "--json"], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(p.stderr)
            got = np.load(out)
            sparq_out = got[got.files[0]].astype(np.float32)
            ort_out = ort_run(fp16, feeds, 8)
            for who, o in (("sparq", sparq_out), ("onnxruntime", ort_out)):
                agree, sqnr, cos, fin = compare(o, ref)
                print(f"| {name} | {who} | {agree:.2f} | {sqnr:.1f} | {cos:.6f} | {fin} |", flush=True)


if __name__ == "__main__":
    main()
