#!/usr/bin/env python3
"""Real pretrained models (issue 14): sparq's executor against onnxruntime on
the same ONNX files, batch 1, the same thread count for both.

Files, in --models-dir (bench/export_real_models.py writes MODEL.onnx; the
others come from `sparq run` recipes and onnxruntime.quantization, see the
directory's ort_quant.py):

  MODEL.onnx          fp32
  MODEL.int8.onnx     sparq's INT8 QDQ file
  MODEL.fp16.onnx     sparq's FP16 file
  MODEL.ort_qdq.onnx  onnxruntime's static QDQ file (quantize_static, per channel)
  MODEL.ort_dyn.onnx  onnxruntime's dynamic file (quantize_dynamic), where present

Rows and targets (issue 14):
  FP32      sparq(MODEL.onnx) vs ORT(MODEL.onnx)                       >= 1.0
  INT8      sparq(MODEL.int8) vs ORT's best INT8 file (MODEL.int8 or
            MODEL.ort_qdq, whichever ORT runs faster)                  >= 1.0
  FP16      sparq(MODEL.fp16) vs sparq(MODEL.onnx)                     >= 0.9
  ORT QDQ   sparq(MODEL.ort_qdq) vs ORT(MODEL.ort_qdq)                 >= 0.9
  ORT dyn   sparq(MODEL.ort_dyn) vs ORT(MODEL.ort_dyn)                 >= 0.9

Timing: --rounds rounds; in each, every file runs in turn on every runtime
(interleaved, so all see the same load): sparq as `sparq eval --json --batch 1
--limit N` (model_seconds / N: Executor::Run only, the first batch included;
with --warm, latency.mean_seconds: the N - 1 batches after the warm-up one,
as ORT's warm-up run is left out). With --cpu-time (1 thread only) every
time is CPU time instead of wall time, for a machine shared with other
work: sparq's is the CPU time of `--limit N` minus that of `--limit 1` (the
same load and warm-up batch) over N - 1, ORT's the process CPU time of its
N runs over N;
the FP16 file with --fp16-as-fp32 (float16 lowered to float32 at load),
ORT as N session.run calls on the same samples after one warm-up run
(ORT_ENABLE_ALL, intra_op threads = --threads, sequential). Each time is the
median over the rounds. With --baseline, a second sparq binary (the
unmodified main build) runs too, for a before/after column.

Usage: python3 bench/e2e_real_models.py [--sparq build/bin/sparq] [--baseline BIN]
    [--models-dir /work/models/speed] [--threads 2] [--rounds 5] [--samples 8]
    [--warm] [--cpu-time] [--results bench/RESULTS.md]
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_md import write_section  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SECTION = "## Real models vs onnxruntime (issue 14)"
# model -> evaluation data (in MODELS_DIR/data)
MODELS = {"efficientnet_lite0": "effnet_eval.npz", "minilm_l6": "minilm_eval.npz"}


def sparq_ms(sparq, model, inputs, threads, samples, extra=(), warm=False):
    cmd = [sparq, "eval", model, "--inputs", inputs, "--batch", "1", "--threads", str(threads), "--limit",
           str(samples), "--json", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    run = json.loads(proc.stdout)
    if warm:
        return 1000 * run["latency"]["mean_seconds"]
    return 1000 * run["model_seconds"] / run["batches"]


def children_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def sparq_cpu_ms(sparq, model, inputs, samples, extra=()):
    """CPU ms per batch after the warm-up one: --limit N minus --limit 1, 1 thread."""
    used, batches = {}, {}
    for limit in (samples, 1):
        cmd = [sparq, "eval", model, "--inputs", inputs, "--batch", "1", "--threads", "1", "--limit", str(limit),
               "--json", *extra]
        before = children_cpu_seconds()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        used[limit] = children_cpu_seconds() - before
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        batches[limit] = json.loads(proc.stdout)["batches"]  # the data may hold fewer than N samples
    return 1000 * (used[samples] - used[1]) / (batches[samples] - batches[1])


class Ort:
    def __init__(self, model, feeds, threads):
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.feeds = feeds
        self.session.run(None, feeds[0])

    def ms(self):
        start = time.perf_counter()
        for feed in self.feeds:
            self.session.run(None, feed)
        return 1000 * (time.perf_counter() - start) / len(self.feeds)

    def cpu_ms(self):
        start = time.process_time()
        for feed in self.feeds:
            self.session.run(None, feed)
        return 1000 * (time.process_time() - start) / len(self.feeds)


def machine():
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor()
    return f"{model}, {os.cpu_count()} hardware threads, {platform.system()} {platform.release()}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sparq", default=os.path.join(REPO, "build", "bin", "sparq"))
    p.add_argument("--baseline", default=None, help="another sparq binary to time too (before/after)")
    p.add_argument("--models-dir", default="/work/models/speed")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--samples", type=int, default=8, help="batches of 1 per timing")
    p.add_argument("--warm", action="store_true",
                   help="time sparq's batches after its warm-up batch only (ORT's warm-up run is never timed)")
    p.add_argument("--cpu-time", action="store_true",
                   help="CPU time instead of wall time (needs --threads 1): for a machine shared with other work")
    p.add_argument("--results", default=None)
    args = p.parse_args(argv)
    if args.cpu_time and args.threads != 1:
        p.error("--cpu-time needs --threads 1 (CPU time of several threads is not latency)")
    import onnxruntime
    binaries = {"sparq": os.path.abspath(args.sparq)}
    if args.baseline:
        binaries["main"] = os.path.abspath(args.baseline)
    files = {}  # (model, variant) -> path
    feeds, inputs = {}, {}
    tmp = tempfile.mkdtemp(prefix="sparq-real-")
    for name in args.models.split(","):
        data = np.load(os.path.join(args.models_dir, "data", MODELS[name]))
        arrays = {k: data[k][: args.samples] for k in data.files}
        if args.cpu_time and len(next(iter(arrays.values()))) < 2:
            p.error(f"--cpu-time needs at least 2 samples ({name} has fewer)")
        inputs[name] = os.path.join(tmp, name + ".npz")
        np.savez(inputs[name], **arrays)
        feeds[name] = [{k: v[i:i + 1] for k, v in arrays.items()} for i in range(args.samples)]
        for variant, suffix in (("fp32", ""), ("int8", ".int8"), ("fp16", ".fp16"), ("ort_qdq", ".ort_qdq"),
                                ("ort_dyn", ".ort_dyn")):
            path = os.path.join(args.models_dir, name + suffix + ".onnx")
            if os.path.isfile(path):
                files[(name, variant)] = path
    sessions = {key: Ort(path, feeds[key[0]], args.threads) for key, path in files.items()}
    times = {}  # (runtime, model, variant) -> [ms per round]
    for r in range(args.rounds):
        for key, path in files.items():
            for runtime, binary in binaries.items():
                extra = ["--fp16-as-fp32"] if key[1] == "fp16" and runtime == "sparq" else []
                times.setdefault((runtime,) + key, []).append(
                    sparq_cpu_ms(binary, path, inputs[key[0]], args.samples, extra) if args.cpu_time else
                    sparq_ms(binary, path, inputs[key[0]], args.threads, args.samples, extra, args.warm))
            times.setdefault(("ort",) + key, []).append(
                sessions[key].cpu_ms() if args.cpu_time else sessions[key].ms())
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}

    def t(runtime, model, variant):
        return med.get((runtime, model, variant))

    rows = []
    for name in args.models.split(","):
        for variant, label, target in (("fp32", "FP32", 1.0), ("int8", "sparq INT8", 1.0), ("fp16", "FP16", 0.9),
                                       ("ort_qdq", "ORT QDQ file", 0.9), ("ort_dyn", "ORT dynamic file", 0.9)):
            if (name, variant) not in files:
                continue
            ours = t("sparq", name, variant)
            if variant == "int8":
                cands = [(t("ort", name, v), v) for v in ("int8", "ort_qdq") if t("ort", name, v) is not None]
                theirs, against = min(cands)
                against = f"ORT best INT8 ({'sparq file' if against == 'int8' else 'its QDQ file'})"
            elif variant == "fp16":
                theirs, against = t("sparq", name, "fp32"), "sparq FP32"
            else:
                theirs, against = t("ort", name, variant), "ORT, same file"
            before = t("main", name, variant)
            rows.append({"model": name, "variant": label, "sparq_ms": ours, "main_ms": before,
                         "ort_same_file_ms": t("ort", name, variant), "against": against, "against_ms": theirs,
                         "ratio": theirs / ours, "target": target})
    lines = [SECTION, "",
             f"Machine: {machine()}. onnxruntime {onnxruntime.__version__}. {args.threads} threads, batch 1, "
             f"{', '.join(f'{n} {len(f)}' for n, f in feeds.items())} samples per timing (--samples "
             f"{args.samples}, or all the data holds), median of {args.rounds} interleaved rounds "
             f"({'CPU ' if args.cpu_time else ''}ms per sample"
             f"{'; sparq: the batches after its warm-up batch' if args.warm or args.cpu_time else ''}).",
             "", "Command: `python3 bench/e2e_real_models.py " + " ".join(argv or sys.argv[1:]) + "`", "",
             "| model | file | sparq ms | main ms (before) | ORT ms (same file) | compared with | its ms | ratio | target |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        main_ms = f"{r['main_ms']:.1f}" if r["main_ms"] is not None else "-"
        met = "met" if r["ratio"] >= r["target"] else "**missed**"
        lines.append(f"| {r['model']} | {r['variant']} | {r['sparq_ms']:.1f} | {main_ms} | "
                     f"{r['ort_same_file_ms']:.1f} | {r['against']} | {r['against_ms']:.1f} | "
                     f"{r['ratio']:.2f}x | >= {r['target']} {met} |")
    lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(tmp, "results.json"), "w") as f:
        json.dump({"rows": rows, "times": {"/".join(k): v for k, v in times.items()}}, f, indent=1)
    print(f"raw numbers: {os.path.join(tmp, 'results.json')}", file=sys.stderr)
    if args.results:
        write_section(args.results, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
