"""onnxruntime against sparq on the FP8 files bench/accuracy_suite.py wrote.

For each model folder of an accuracy_suite work folder and each `sparq fp8`
variant in it: `sparq eval` on the evaluation split (--save-outputs) and
onnxruntime (CPU) on the same file and inputs at each optimization level,
then per model output: SQNR of onnxruntime's output against sparq's (dB),
the share of elements equal to float32 rounding (|a - b| <= 1e-5 (1 + |b|)),
and the largest difference. Prints a Markdown table; a level onnxruntime
refuses the file at says why.

  python3 bench/fp8_agreement.py --sparq build/bin/sparq --work /work/fp8_acc
"""
import argparse
import glob
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from accuracy_suite import ort_run, sqnr_db  # noqa: E402


LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_ALL")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sparq", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    print("| model | variant | output | onnxruntime level | SQNR ORT vs sparq (dB) | equal % | max abs diff |")
    print("|---|---|---|---|---:|---:|---:|")
    for model_dir in sorted(glob.glob(os.path.join(args.work, "*", ""))):
        eval_npz = os.path.join(model_dir, "eval.npz")
        if not os.path.isfile(eval_npz):
            continue
        for variant in sorted(glob.glob(os.path.join(model_dir, "sparq_fp8_*", "*.onnx"))):
            label = os.path.basename(os.path.dirname(variant))
            out_npz = variant + ".sparq_eval.npz"
            with np.load(eval_npz) as f:
                feeds = {k: f[k] for k in f.files}
            cmd = [args.sparq, "eval", variant, "--inputs", eval_npz, "--save-outputs", out_npz,
                   "--threads", str(args.threads), "--batch", "8"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"| {os.path.basename(model_dir[:-1])} | {label} | | sparq eval failed: "
                      f"{(proc.stdout + proc.stderr)[-200:]!r} | | |")
                continue
            with np.load(out_npz) as f:
                ours = {k: f[k] for k in f.files}
            row = f"| {os.path.basename(model_dir[:-1])} | {label.replace('_', ' ')} |"
            for name, mine in ours.items():
                for level in LEVELS:
                    try:
                        theirs = ort_run(variant, feeds, name, batch=8, level=level)
                    except Exception as e:  # noqa: BLE001
                        print(f"{row} {name} | {level} | refused: {str(e).splitlines()[0][-120:]} | | |", flush=True)
                        continue
                    equal = np.abs(theirs - mine) <= 1e-5 * (1 + np.abs(mine))
                    print(f"{row} {name} | {level} | {sqnr_db(mine, theirs):.2f} | {100 * equal.mean():.2f} | "
                          f"{float(np.max(np.abs(theirs - mine))):.3g} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
