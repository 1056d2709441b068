#!/usr/bin/env python3
"""Calibration + INT8 quantization: sparq against onnxruntime's quantize_static.

For each model, on the same calibration data (the same samples, in batches
of --batch):

  sparq KL          `sparq run` with a recipe: KL calibration (TensorRT's
                    entropy calibrator, 2048 bins), INT8 QDQ, per-channel
                    symmetric int8 weights, symmetric int8 activations.
  sparq percentile  the same with calibration method percentile 99.999.
  ORT Entropy       onnxruntime.quantization.quantize_static: QDQ,
                    per_channel=True, QInt8 activations and weights,
                    ActivationSymmetric/WeightSymmetric (like TensorRT),
                    CalibrationMethod.Entropy (its defaults: 128 bins).
  ORT Percentile    the same with CalibrationMethod.Percentile (99.999).

What is timed: for sparq, the wall time of the `sparq run` process minus its
two evaluation stages (report.json "seconds"), i.e. start-up, model load,
calibration, quantization and writing the model + scales.json + calib.cache
(the recipe evaluates a single sample, so those stages are short anyway);
for onnxruntime, the quantize_static call (calibration, quantization and
writing the model), timed inside a worker process after its imports and
data loading. Peak memory: the peak resident set size of each process (GNU time's %M:
ru_maxrss of a process forked from /usr/bin/time, so that the harness's own
memory, which a fork from Python would carry into ru_maxrss, is not counted): the sparq process, the onnxruntime worker
(Python, onnxruntime and the calibration data included: the worker reports
its RSS just before quantize_static as "baseline"). Every tool runs alone,
in its own process, with all cores.

Accuracy: both INT8 models run in onnxruntime (CPU, ORT_ENABLE_ALL) over an
evaluation set disjoint from the calibration set, against the FP32 model in
onnxruntime: top-1 agreement (argmax over the last axis of output 0; rows are
samples, or tokens for tiny_encoder) and SQNR of output 0 in dB. The models
have random weights (tools/make_test_models.py), so there are no labels.

Usage:
  python3 bench/quant_vs_ort.py --sparq build/bin/sparq --models-dir build/models \\
      [--models resnet18,tiny_encoder] [--calib-samples 256] [--results bench/RESULTS.md]
"""
import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from results_md import write_section

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "tools"))

SECTION = "## Calibration + quantization vs onnxruntime"


# ---------------------------------------------------------------------------
# Data.

def smooth_images(rng, n: int) -> np.ndarray:
    """[n, 3, 224, 224] float32 image-like inputs (roughly unit variance after
    normalization): a few random low-frequency sinusoids per channel, a
    per-sample brightness offset and a little pixel noise."""
    yy, xx = np.meshgrid(np.linspace(0, 1, 224, dtype=np.float32), np.linspace(0, 1, 224, dtype=np.float32),
                         indexing="ij")
    out = np.empty((n, 3, 224, 224), np.float32)
    for i in range(n):
        for c in range(3):
            img = np.zeros((224, 224), np.float32)
            for _ in range(4):
                fy, fx = rng.uniform(0.5, 6.0, 2)
                phase = rng.uniform(0, 2 * np.pi)
                img += rng.uniform(0.3, 1.0) * np.sin(2 * np.pi * (fy * yy + fx * xx) + phase)
            out[i, c] = img + rng.normal(0.0, 0.5) + 0.1 * rng.standard_normal((224, 224)).astype(np.float32)
    return out


def make_data(name: str, calib_samples: int, eval_samples: int, work: str) -> dict:
    """Writes calibration and evaluation .npz files; returns their paths and the input name."""
    rng = np.random.default_rng(2024)
    if name == "resnet18":
        key = "input"
        calib = smooth_images(rng, calib_samples)
        evaluation = smooth_images(rng, eval_samples)
    elif name == "tiny_encoder":
        key = "input_ids"
        calib = rng.integers(0, 1000, (calib_samples, 32)).astype(np.int64)
        evaluation = rng.integers(0, 1000, (eval_samples, 32)).astype(np.int64)
    else:
        raise ValueError(f"no data recipe for model {name}")
    paths = {"input": key}
    for tag, arr in (("calib", calib), ("eval", evaluation), ("eval_one", evaluation[:1])):
        paths[tag] = os.path.join(work, f"{name}_{tag}.npz")
        np.savez(paths[tag], **{key: arr})
    return paths


# ---------------------------------------------------------------------------
# Running and measuring one process.

def measure(cmd, log_path: str, memory_limit_bytes: int = 0) -> dict:
    """Runs cmd alone; returns wall and CPU seconds, peak RSS (MiB) and exit code.
    With memory_limit_bytes the process gets that address-space limit, so
    that running out of memory fails it instead of the machine."""
    def limit():
        if memory_limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))

    # A child forked from this Python process starts with its memory image,
    # and Linux carries that high-water mark across exec into ru_maxrss: the
    # harness's own arrays would count as the tool's. GNU time forks the tool
    # from a small process and reports the tool's own peak.
    rss_path = log_path + ".maxrss"
    gnu_time = "/usr/bin/time"
    use_time = os.access(gnu_time, os.X_OK)
    wrapped = [gnu_time, "-f", "%M", "-o", rss_path] + list(cmd) if use_time else list(cmd)
    with open(log_path, "w") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    peak_kib = usage.ru_maxrss
    if use_time and os.path.exists(rss_path):
        with open(rss_path) as f:
            lines = [line for line in f.read().split() if line.isdigit()]
        if lines:
            peak_kib = int(lines[-1])
    # CPU time of the tool's threads (GNU time waits for it, so its usage holds the tool's).
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": peak_kib / 1024.0, "rc": proc.returncode, "log": log_path}


def tail(path: str, lines: int = 15) -> str:
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def run_sparq(sparq: str, model: str, data: dict, method: str, calib_samples: int, batch: int, work: str) -> dict:
    out_dir = os.path.join(work, f"sparq_{os.path.basename(model)[:-5]}_{method}_b{batch}")
    calibration = f"    method: {method}\n" + ("    percentile: 99.999\n" if method == "percentile" else "")
    recipe = (
        "version: 1\n"
        f"model: {model}\n"
        "data:\n"
        f"  calibration: {data['calib']}\n"
        f"  evaluation: {data['eval_one']}\n"
        f"  calibration_samples: {calib_samples}\n"
        f"  batch_size: {batch}\n"
        "quantize:\n"
        "  precision: int8\n"
        "  per_channel: true\n"
        "  calibration:\n"
        f"{calibration}"
        "    bins: 2048\n"
        "    symmetric: true\n"
        "  fallback:\n"
        "    enabled: false\n"
        "output:\n"
        f"  dir: {out_dir}\n"
        "  format: qdq\n"
        "  overwrite: true\n"
        "evaluate:\n"
        "  metric: sqnr\n"
        "  threads: 0\n"
        "  gate:\n"
        "    max_drop: 1000\n"
        "report:\n"
        "  markdown: ''\n"
    )
    recipe_path = out_dir + ".yaml"
    with open(recipe_path, "w") as f:
        f.write(recipe)
    m = measure([sparq, "run", recipe_path], out_dir + ".log")
    if m["rc"] != 0:
        raise RuntimeError(f"sparq run exited {m['rc']}:\n{tail(m['log'])}")
    with open(os.path.join(out_dir, "report.json")) as f:
        seconds = json.load(f)["seconds"]
    evaluate_s = sum(v for k, v in seconds.items() if k.startswith("evaluate"))
    m.update(time_s=m["wall_s"] - evaluate_s, stages=seconds,
             model=os.path.join(out_dir, os.path.basename(model)[:-5] + ".sparq.onnx"))
    return m


def run_ort(model: str, data: dict, method: str, calib_samples: int, batch: int, work: str,
            activation: str, memory_limit_bytes: int) -> dict:
    out = os.path.join(work, f"ort_{os.path.basename(model)[:-5]}_{method}_{activation}.onnx")
    result_path = out + ".json"
    cmd = [sys.executable, os.path.abspath(__file__), "--ort-worker", model, data["calib"], data["input"], method,
           str(calib_samples), str(batch), activation, out, result_path]
    m = measure(cmd, out + ".log", memory_limit_bytes)
    if m["rc"] != 0:
        text = tail(m["log"])
        m["error"] = "out of memory" if "MemoryError" in text or "bad_alloc" in text or "Failed to allocate" in text \
            else f"exit {m['rc']}"
        m["error_tail"] = text
        return m
    with open(result_path) as f:
        m.update(json.load(f))
    m["model"] = out
    return m


def ort_worker(model, calib_path, input_name, method, calib_samples, batch, activation, out, result_path) -> int:
    """Runs in its own process: quantize_static, timed."""
    import onnxruntime  # noqa: F401  (imported before timing)
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    with np.load(calib_path) as f:
        samples = f[input_name][:int(calib_samples)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.start = 0

        def get_next(self):
            if self.start >= len(samples):
                return None
            feed = {input_name: samples[self.start:self.start + int(batch)]}
            self.start += int(batch)
            return feed

    def rss_mib():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        return 0.0

    baseline = rss_mib()
    start = time.perf_counter()
    quantize_static(
        model, out, Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8 if activation == "uint8" else QuantType.QInt8,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["Conv", "Gemm", "MatMul"] if activation == "int8-same-ops" else None,
        calibrate_method={"entropy": CalibrationMethod.Entropy, "percentile": CalibrationMethod.Percentile}[method],
        extra_options={"ActivationSymmetric": activation != "uint8", "WeightSymmetric": True},
    )
    elapsed = time.perf_counter() - start
    with open(result_path, "w") as f:
        json.dump({"time_s": elapsed, "baseline_rss_mib": baseline}, f)
    return 0


# ---------------------------------------------------------------------------
# Accuracy in onnxruntime.

def accuracy(model_path: str, fp32_out: np.ndarray, inputs: dict, output_name: str) -> dict:
    """Top-1 agreement and SQNR of output 0 against FP32, raw and centered.
    Centered: each output minus the FP32 model's mean over the evaluation
    rows. A random-weight model's scores are mostly a per-class constant
    (resnet18 here predicts one class for every input), which makes raw
    agreement trivial and raw SQNR flattering; the centered scores keep only
    what depends on the input."""
    import quant_compare

    out = quant_compare.run_onnxruntime(model_path, inputs, optimize=True)[output_name]
    rows_ref = fp32_out.reshape(-1, fp32_out.shape[-1])
    rows_out = out.reshape(-1, out.shape[-1])
    mean = rows_ref.mean(axis=0, keepdims=True)
    return {"agreement": 100.0 * quant_compare.top1_agreement(fp32_out, out),
            "sqnr_db": quant_compare.sqnr_db(fp32_out, out),
            "centered_agreement": 100.0 * quant_compare.top1_agreement(rows_ref - mean, rows_out - mean),
            "centered_sqnr_db": quant_compare.sqnr_db(rows_ref - mean, rows_out - mean)}


# ---------------------------------------------------------------------------
# Report.

def git_head(folder: str) -> str:
    """The short commit of the checkout at folder; '?' without git or a checkout."""
    try:
        proc = subprocess.run(["git", "-C", folder, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    except OSError:
        return "?"
    return proc.stdout.strip() or "?"


def machine() -> str:
    name, cores = platform.processor() or "?", os.cpu_count()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                name = line.split(":", 1)[1].strip()
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return f"{name}, {cores} cores, {mem_gib:.0f} GiB RAM"


def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:.{digits}f}"


def markdown(rows: list, meta: dict) -> str:
    lines = [SECTION, "",
             f"- Machine: {meta['machine']} (shared with other jobs: timings are indicative, ±20%)",
             f"- Date: {meta['date']}; onnxruntime {meta['ort']}, numpy {meta['numpy']}, sparq at {meta['git']}",
             f"- Command: `{meta['command']}`",
             f"- Calibration: {meta['calib']} samples in batches of {meta['batch']} (same samples for every tool); "
             f"evaluation: {meta['eval']}",
             "- Timed: **sparq** = `sparq run` process wall time minus its two evaluation stages (start-up, load, "
             "calibration, quantization, writing model + scales.json + calib.cache); **ORT** = the "
             "`quantize_static` call (calibration, quantization, writing the model) inside a worker process, "
             "after imports and data loading.",
             "- Peak RSS: of each process alone (GNU time's %M, so the harness's memory is not counted). The "
             "ORT worker's includes Python, onnxruntime and the calibration data, shown as its baseline before "
             "`quantize_static`; sparq reads the calibration data a batch at a time.",
             "- Accuracy: both INT8 models run in onnxruntime (CPU, ORT_ENABLE_ALL) against the FP32 model in "
             "onnxruntime: top-1 agreement (argmax of output 0 per row: per image for resnet18, per token for "
             "tiny_encoder) and SQNR of output 0. Random weights, so no labels. *Centered*: both outputs minus "
             "the FP32 model's mean output over the evaluation rows, which removes the per-class constant that "
             "dominates a random-weight model's scores (resnet18 predicts class 220 for every input, so its raw "
             "agreement is trivially 100%).",
             "",
             "| model | tool | timed (s) | peak RSS (MiB) | ORT baseline RSS (MiB) | ORT/sparq time | "
             "ORT/sparq memory | top-1 agreement (%) | SQNR (dB) | centered top-1 agreement (%) | "
             "centered SQNR (dB) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['tool']} | {fmt(r.get('time_s'))} | {fmt(r.get('peak_rss_mib'), 0)} | "
                     f"{fmt(r.get('baseline_rss_mib'), 0)} | {r.get('time_ratio', '')} | {r.get('mem_ratio', '')} | "
                     f"{fmt(r.get('agreement'), 2)} | {fmt(r.get('sqnr_db'), 2)} | "
                     f"{fmt(r.get('centered_agreement'), 2)} | {fmt(r.get('centered_sqnr_db'), 2)} |")
    lines += ["", "Targets (issue): sparq >= 10x faster and >= 10x less peak memory than ORT's Entropy calibration, "
              "and its INT8 model at least as accurate.", ""]
    lines += [f"- {v}" for v in meta["verdicts"]]
    lines += [f"- Note: {n}" for n in meta["notes"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sparq", help="the sparq CLI binary (required)")
    parser.add_argument("--models-dir", help="folder of tools/make_test_models.py's models (required)")
    parser.add_argument("--models", default="resnet18,tiny_encoder")
    parser.add_argument("--calib-samples", type=int, default=256)
    parser.add_argument("--eval-samples", default="resnet18=64,tiny_encoder=128",
                        help="evaluation samples per model, name=N,...")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--sparq-small-batch", type=int, default=0,
                        help="also run sparq KL with this batch size (its memory is that of one batch)")
    parser.add_argument("--ort-methods", default="entropy,percentile")
    parser.add_argument("--ort-uint8", action="store_true",
                        help="also run ORT Entropy with its default asymmetric QUInt8 activations")
    parser.add_argument("--ort-same-ops", action="store_true",
                        help="also run ORT Entropy quantizing only Conv, Gemm and MatMul (the layers sparq quantizes)")
    parser.add_argument("--ort-memory-limit-gib", type=float, default=16.0,
                        help="address-space limit of each onnxruntime worker (a MemoryError, not the OOM killer)")
    parser.add_argument("--work", default=None, help="folder for data and models (default: a temporary one)")
    parser.add_argument("--results", default=None, help="write the table into this Markdown file's section")
    parser.add_argument("--ort-worker", nargs=9, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ort_worker:
        return ort_worker(*args.ort_worker)
    if not args.sparq or not args.models_dir:
        parser.error("--sparq and --models-dir are required")

    import onnx
    import onnxruntime
    import quant_compare

    work = args.work or tempfile.mkdtemp(prefix="quant_vs_ort_")
    os.makedirs(work, exist_ok=True)
    eval_counts = dict(kv.split("=") for kv in args.eval_samples.split(","))
    limit = int(args.ort_memory_limit_gib * 2 ** 30)
    rows, verdicts, notes = [], [], []
    for name in args.models.split(","):
        model = os.path.abspath(os.path.join(args.models_dir, name + ".onnx"))
        n_eval = int(eval_counts.get(name, 64))
        print(f"== {name}: data ({args.calib_samples} calibration, {n_eval} evaluation samples)", flush=True)
        data = make_data(name, args.calib_samples, n_eval, work)
        with np.load(data["eval"]) as f:
            eval_inputs = {data["input"]: f[data["input"]]}
        output_name = onnx.load(model, load_external_data=False).graph.output[0].name
        fp32_out = quant_compare.run_onnxruntime(model, eval_inputs, optimize=True)[output_name]

        results = {}
        sparq_runs = [("kl", args.batch, "sparq kl"), ("percentile", args.batch, "sparq percentile")]
        if args.sparq_small_batch:
            sparq_runs.append(("kl", args.sparq_small_batch, f"sparq kl (batch {args.sparq_small_batch})"))
        for method, batch, label in sparq_runs:
            print(f"   {label} ...", flush=True)
            r = run_sparq(args.sparq, model, data, method, args.calib_samples, batch, work)
            r.update(accuracy(r["model"], fp32_out, eval_inputs, output_name))
            results[label] = r
            print(f"      {r['time_s']:.1f} s, {r['peak_rss_mib']:.0f} MiB, stages {r['stages']}", flush=True)
        ort_runs = [(m, "int8") for m in args.ort_methods.split(",")]
        if args.ort_uint8:
            ort_runs.append(("entropy", "uint8"))
        if args.ort_same_ops:
            ort_runs.append(("entropy", "int8-same-ops"))
        for method, activation in ort_runs:
            label = f"ORT {method.capitalize()}" + {"int8": "", "uint8": " (QUInt8 activations)",
                                                     "int8-same-ops": " (Conv/Gemm/MatMul only)"}[activation]
            print(f"   {label} ...", flush=True)
            r = run_ort(model, data, method, args.calib_samples, args.batch, work, activation, limit)
            if "error" not in r:
                r.update(accuracy(r["model"], fp32_out, eval_inputs, output_name))
                print(f"      {r['time_s']:.1f} s, {r['peak_rss_mib']:.0f} MiB", flush=True)
            else:
                print(f"      failed: {r['error']}\n{r['error_tail']}", flush=True)
                notes.append(f"{name} {label} failed ({r['error']}, address-space limit "
                             f"{args.ort_memory_limit_gib:g} GiB, peak RSS {r['peak_rss_mib']:.0f} MiB)")
            results[label] = r

        sparq_kl = results["sparq kl"]
        for label, r in results.items():
            row = {"model": name, "tool": label, **{k: r.get(k) for k in
                   ("time_s", "peak_rss_mib", "baseline_rss_mib", "agreement", "sqnr_db", "centered_agreement",
                    "centered_sqnr_db")}}
            if label.startswith("ORT") and "error" not in r:
                twin = results["sparq percentile"] if "Percentile" in label else sparq_kl
                row["time_ratio"] = f"{r['time_s'] / twin['time_s']:.1f}x"
                row["mem_ratio"] = f"{r['peak_rss_mib'] / twin['peak_rss_mib']:.1f}x"
            if "error" in r:
                row["time_s"] = None
                row["tool"] += f" ({r['error']})"
            rows.append(row)

        entropy = results.get("ORT Entropy")
        if entropy and "error" not in entropy:
            t = entropy["time_s"] / sparq_kl["time_s"]
            m = entropy["peak_rss_mib"] / sparq_kl["peak_rss_mib"]
            acc = all(sparq_kl[k] >= entropy[k] - tol for k, tol in (
                ("sqnr_db", 0.05), ("agreement", 1e-9), ("centered_sqnr_db", 0.05), ("centered_agreement", 1e-9)))
            small = [(k, v) for k, v in results.items() if k.startswith("sparq kl (batch")]
            small_text = "".join(f"; with {k}: {entropy['peak_rss_mib'] / v['peak_rss_mib']:.1f}x less memory"
                                 for k, v in small)
            verdicts.append(
                f"{name}: speed {t:.1f}x ({'met' if t >= 10 else 'NOT met'}); memory {m:.1f}x "
                f"({'met' if m >= 10 else 'NOT met'}{small_text}); accuracy: sparq KL "
                f"{sparq_kl['agreement']:.2f}% / {sparq_kl['sqnr_db']:.2f} dB (centered "
                f"{sparq_kl['centered_agreement']:.2f}% / {sparq_kl['centered_sqnr_db']:.2f} dB) vs ORT Entropy "
                f"{entropy['agreement']:.2f}% / {entropy['sqnr_db']:.2f} dB (centered "
                f"{entropy['centered_agreement']:.2f}% / {entropy['centered_sqnr_db']:.2f} dB) "
                f"({'met' if acc else 'NOT met'})")
        else:
            verdicts.append(f"{name}: ORT Entropy did not complete; targets not measured")

    notes.append("ORT's quantize_static cannot change its Entropy histogram (128 bins, 128 quantized bins) "
                 "through extra_options; sparq uses 2048 bins like TensorRT. ORT keeps every intermediate "
                 "activation of every calibration sample in memory before building histograms; sparq folds "
                 "each batch into fixed-size histograms.")
    notes.append("By default ORT quantizes every op type it supports in QDQ form (also Add, MaxPool, Gather, "
                 "...); sparq quantizes Conv/Gemm/MatMul with weights (with Q/DQ on their activations). The "
                 "'Conv/Gemm/MatMul only' row restricts ORT to those ops (op_types_to_quantize), which also "
                 "restricts the tensors it calibrates.")
    meta = {
        "machine": machine(), "date": datetime.date.today().isoformat(), "ort": onnxruntime.__version__,
        "numpy": np.__version__, "calib": args.calib_samples, "batch": args.batch,
        "eval": ", ".join(f"{k} {v} samples" for k, v in eval_counts.items()),
        "git": git_head(REPO),
        "command": "python3 " + " ".join([os.path.relpath(os.path.abspath(__file__), REPO)] +
                                         (argv if argv is not None else sys.argv[1:])),
        "verdicts": verdicts, "notes": notes,
    }
    section = markdown(rows, meta)
    print()
    print(section)
    if args.results:
        write_section(args.results, SECTION, section)
        print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
