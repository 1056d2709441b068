#!/usr/bin/env python3
"""FP16 files in sparq's default execution (float32 kernels, every float16 value
rounded to float16 between operators) next to --fp16-as-fp32 and the FP32 file,
for two sparq binaries (before / after) and onnxruntime, in interleaved rounds.

  python3 bench/fp16_rounds.py --before OLD/sparq --after build/bin/sparq \
      --models minilm_l6,yolov8n_det,efficientnet_lite0 --batch 16 --threads 1 --rounds 3

Reads MODEL.onnx, MODEL.fp16.onnx and data/MODEL_eval.npz of --models-dir (the
speed files of bench/e2e_real_models.py), repeats the samples to fill the
batches (16 batches at batch 1, 6 above), and prints a markdown table of ms per
sample: the median over rounds of sparq's latency.cpu_mean_seconds and
latency.p50_seconds (the batches after the warm-up one) and of onnxruntime's
process CPU time and median wall time per run (bench/e2e_real_models.py's Ort).
The two sparq binaries alternate which runs first. On a shared machine read
the CPU columns.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_real_models import Ort  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--models-dir", default="/work/speed_models")
    p.add_argument("--models", default="minilm_l6,yolov8n_det,efficientnet_lite0")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    binaries = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    batch, nb = args.batch, (6 if args.batch > 1 else 16)
    tmp = tempfile.mkdtemp(prefix="sparq-fp16-")

    def sparq(binary, model, inputs, extra=()):
        cmd = [binary, "eval", model, "--inputs", inputs, "--batch", str(batch), "--threads", str(args.threads),
               "--limit", str(nb * batch), "--json", *extra]
        run = subprocess.run(cmd, capture_output=True, text=True, check=True)
        lat = json.loads(run.stdout)["latency"]
        return 1000 * lat["cpu_mean_seconds"] / batch, 1000 * lat["p50_seconds"] / batch

    res = {}
    runs = (("fp32", (), ""), ("fp16", (), ".fp16"), ("fp16_as_fp32", ("--fp16-as-fp32",), ".fp16"))
    for m in args.models.split(","):
        data = np.load(os.path.join(args.models_dir, "data", f"{m}_eval.npz"))
        arrays = {k: np.resize(data[k], (nb * batch,) + data[k].shape[1:]) for k in data.files}
        inputs = os.path.join(tmp, f"{m}.npz")
        np.savez(inputs, **arrays)
        feeds = [{k: v[i * batch:(i + 1) * batch] for k, v in arrays.items()} for i in range(nb)]
        ort = {f: Ort(os.path.join(args.models_dir, f"{m}{f}.onnx"), feeds, args.threads) for f in ("", ".fp16")}
        for r in range(args.rounds):
            order = list(binaries.items()) if r % 2 == 0 else list(binaries.items())[::-1]
            for name, extra, f in runs:
                for b, binary in order:
                    res.setdefault((m, name, b), []).append(
                        sparq(binary, os.path.join(args.models_dir, f"{m}{f}.onnx"), inputs, extra))
            for f, name in (("", "fp32"), (".fp16", "fp16")):
                cpu, wall = ort[f].cpu_ms()
                res.setdefault((m, name, "ort"), []).append((cpu / batch, wall / batch))
        print(f"{m} done", file=sys.stderr, flush=True)

    def cell(key):
        if key not in res:
            return "-"
        v = res[key]
        return f"{statistics.median(x[0] for x in v):.2f} / {statistics.median(x[1] for x in v):.2f}"

    print(f"batch {batch}, {args.threads} thread(s), {args.rounds} rounds; ms per sample, CPU / wall p50")
    print()
    print("| model | file, execution | before | after | onnxruntime, same file |")
    print("|---|---|---|---|---|")
    for m in args.models.split(","):
        for name, _, _ in runs:
            print(f"| {m} | {name} | {cell((m, name, 'before'))} | {cell((m, name, 'after'))} | "
                  f"{cell((m, name, 'ort'))} |")


if __name__ == "__main__":
    main()
