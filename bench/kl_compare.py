#!/usr/bin/env python3
"""KL thresholds on the same activations: sparq's KL (this build, and an
older build given with --before), sparq's max, and onnxruntime's Entropy
calibrator (its defaults: 128 bins, 128 quantized bins, symmetric=False).

  python3 bench/kl_compare.py --model M.onnx --calib calib.npz [--samples 16]
                              [--sparq build/bin/sparq] [--before OLD/sparq]

Prints, per tensor that both calibrate, each threshold as a fraction of the
tensor's max |x|, and a summary of how often each lands below 25% of max.
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np


def sparq_table(sparq, model, data, method, work, name):
    out = os.path.join(work, name + ".json")
    subprocess.run([sparq, "calibrate", model, "--data", data, "--method", method, "-o", out],
                   check=True, capture_output=True)
    return json.load(open(out))["tensors"]  # name -> range


def ort_entropy(model, x, work):
    from onnxruntime.quantization import CalibrationMethod, create_calibrator
    cal = create_calibrator(model, augmented_model_path=os.path.join(work, "aug.onnx"),
                            calibrate_method=CalibrationMethod.Entropy)

    class Reader:
        def __init__(self):
            self.it = iter([{"input": x[i:i + 1]} for i in range(len(x))])

        def get_next(self):
            return next(self.it, None)

    cal.collect_data(Reader())
    data = cal.compute_data()
    out = {}
    for name in data:
        lo, hi = data[name].range_value
        out[name] = float(max(abs(np.asarray(lo).item()), abs(np.asarray(hi).item())))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--calib", required=True)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--sparq", default="build/bin/sparq")
    ap.add_argument("--before", default="")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kl_compare-")
    x = np.load(a.calib)["input"][:a.samples]
    data = os.path.join(work, "calib.npz")
    np.savez(data, input=x)
    mx = sparq_table(a.sparq, a.model, data, "max", work, "max")
    cols = {"sparq kl": sparq_table(a.sparq, a.model, data, "kl", work, "kl")}
    if a.before:
        cols["before kl"] = sparq_table(a.before, a.model, data, "kl", work, "before")
    ort = ort_entropy(a.model, x, work)
    names = [n for n in mx if n in ort and mx[n]["abs_max"] > 0]
    print(f"{len(names)} tensors, {len(x)} samples; threshold / max|x|\n")
    print("| tensor | " + " | ".join(cols) + " | ort Entropy |")
    print("| --- |" + " --- |" * (len(cols) + 1))
    fr = {k: [] for k in list(cols) + ["ort Entropy"]}
    for n in names:
        m = mx[n]["abs_max"]
        row = [cols[k][n]["threshold"] / m for k in cols] + [min(ort[n], m) / m]
        for k, v in zip(fr, row):
            fr[k].append(v)
        print(f"| {n} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    print("\n| method | median | min | tensors < 25% of max |")
    print("| --- | --- | --- | --- |")
    for k, v in fr.items():
        v = np.array(v)
        print(f"| {k} | {np.median(v):.2f} | {v.min():.2f} | {int((v < 0.25).sum())} / {len(v)} |")


if __name__ == "__main__":
    main()
