#!/usr/bin/env python3
"""Re-scores written models of bench/accuracy_suite.py on another slice of a
suite model's evaluation split, against the FP32 model there: onnxruntime
(CPU) and the suite's own metrics (accuracy_suite.task_metrics). Meant for the
question whether a row's margin is real: the suite's tables use the first
--eval samples (64), the split holds more (make_real_suite.py --eval 200).

    python3 bench/rescore_models.py --suite /work/models/real yolov8n_det 64 200 a/model.sparq.onnx b/model.sparq.onnx

Prints one line per file: its metrics on samples [start, end)."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accuracy_suite as S  # noqa: E402


def rescore(suite, name, start, end, paths):
    """{path: metrics} of each written model on eval samples [start, end)."""
    model_dir = os.path.join(suite, name)
    with open(os.path.join(model_dir, "meta.json")) as f:
        meta = json.load(f)
    with np.load(os.path.join(model_dir, "eval.npz")) as f:
        evals = {k: f[k][start:end] for k in f.files}
    if not len(next(iter(evals.values()))):
        raise ValueError(f"{name}: no evaluation samples in [{start}, {end})")
    layout = {k: meta[k] for k in ("batch_axis", "constants") if k in meta}
    ref = S.ort_run(os.path.join(model_dir, "model.onnx"), evals, meta["output"], layout=layout)
    return {p: S.task_metrics(meta, ref, S.ort_run(p, evals, meta["output"], layout=layout)) for p in paths}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=os.path.join(S.REPO, "build", "models", "real"))
    ap.add_argument("name", help="the suite model (a folder of --suite)")
    ap.add_argument("start", type=int, help="first evaluation sample")
    ap.add_argument("end", type=int, help="one past the last evaluation sample")
    ap.add_argument("models", nargs="+", help="written .onnx files of that model")
    args = ap.parse_args(argv)
    for path, m in rescore(args.suite, args.name, args.start, args.end, args.models).items():
        print(path, json.dumps({k: round(float(v), 4) if isinstance(v, (int, float, np.floating)) else v
                                for k, v in m.items()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
