#!/usr/bin/env python3
"""The default recipe (no `quantize` section: search, then fallback) on the
suite's MiniLM-L6 weights as other scripts export them (bench/outside_models.py
export_minilm(): eager / SDPA attention, TorchScript / dynamo exporters), on
the suite's real sentences; the sentence embedding (last_hidden_state
mean-pooled over the attention mask) of onnxruntime on each written model
against onnxruntime on its FP32 file (bench/ACCURACY.md, "Default recipe on
transformer exports outside the suite").

  python3 bench/outside_default_recipe.py --sparq build/bin/sparq \\
      --minilm-dir DIR --suite /work/models/real --work /tmp/mx
"""
import argparse
import glob
import os
import subprocess

import numpy as np


def pooled(path, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    h = sess.run(None, feeds)[0]
    mask = feeds["attention_mask"].astype(np.float32)[..., None]
    return (h * mask).sum(1) / mask.sum(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sparq", required=True)
    ap.add_argument("--minilm-dir", required=True, help="folder of minilm_*.onnx exports")
    ap.add_argument("--suite", default="/work/models/real")
    ap.add_argument("--work", required=True)
    ap.add_argument("--calib", type=int, default=32)
    ap.add_argument("--eval", type=int, default=64)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    src = os.path.join(a.suite, "minilm_l6")
    calib, evals = np.load(os.path.join(src, "calib.npz")), np.load(os.path.join(src, "eval.npz"))
    feeds = {k: evals[k][:a.eval] for k in evals.files}
    np.savez(os.path.join(a.work, "calib.npz"), **{k: calib[k][:a.calib] for k in calib.files})
    np.savez(os.path.join(a.work, "eval.npz"), **feeds)
    print("| export | sparq exit | pooled cosine mean (min) |\n|---|---:|---:|")
    for model in sorted(glob.glob(os.path.join(a.minilm_dir, "minilm_*.onnx"))):
        name = os.path.basename(model)[:-5]
        out = os.path.join(a.work, name)
        recipe = os.path.join(a.work, name + ".yaml")
        with open(recipe, "w") as f:
            f.write(f"version: 1\nmodel: {model}\ndata:\n  calibration: {a.work}/calib.npz\n"
                    f"  evaluation: {a.work}/eval.npz\n  batch_size: 8\noutput:\n  dir: {out}\n  overwrite: true\n"
                    "evaluate:\n  metric: mean_cosine\n  gate:\n    max_drop: 0.01\n")
        with open(os.path.join(a.work, name + ".log"), "w") as log:
            rc = subprocess.run([a.sparq, "run", recipe], stdout=log, stderr=subprocess.STDOUT).returncode
        written = glob.glob(os.path.join(out, "*.onnx"))
        if not written:
            print(f"| {name} | {rc} | - |")
            continue
        ref, q = pooled(model, feeds), pooled(written[0], feeds)
        cos = (ref * q).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(q, axis=1)
        print(f"| {name} | {rc} | {cos.mean():.4f} ({cos.min():.4f}) |")


if __name__ == "__main__":
    main()
