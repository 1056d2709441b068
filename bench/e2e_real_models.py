#!/usr/bin/env python3
"""Real pretrained models (issue 14): sparq's executor against onnxruntime on
the same ONNX files, batch 1, the same thread count for both.

Files, in --models-dir (bench/export_real_models.py writes MODEL.onnx; the
others come from `sparq run` recipes and onnxruntime.quantization, see the
directory's ort_quant.py):

  MODEL.onnx          fp32
  MODEL.int8.onnx     sparq's INT8 QDQ file (static)
  MODEL.int8_dyn.onnx sparq's INT8 file of quantize.mode dynamic, where present
                      (the accurate INT8 of a transformer: bench/ACCURACY.md)
  MODEL.int8_bsr.onnx sparq's INT8 + 4x4 block-sparse file, where present (a
                      speed row: one-shot pruning without training wrecks
                      the model's outputs, see its cosine column)
  MODEL.fp16.onnx     sparq's FP16 file
  MODEL.ort_qdq.onnx  onnxruntime's static QDQ file (quantize_static, per channel)
  MODEL.ort_qop.onnx  onnxruntime's static QOperator file, where it cannot load its
                      own QDQ file (basic-pitch)
  MODEL.ort_dyn.onnx  onnxruntime's dynamic file (quantize_dynamic), where present

Rows and targets (issue 14):
  FP32      sparq(MODEL.onnx) vs ORT(MODEL.onnx)                       >= 1.0
  INT8      sparq(MODEL.int8) vs ORT's best INT8 file (MODEL.int8,
            MODEL.ort_qdq or MODEL.ort_dyn, whichever ORT runs fastest) >= 1.0
  INT8 dyn  sparq(MODEL.int8_dyn) vs the same                          >= 1.0
  INT8 BSR  sparq(MODEL.int8_bsr) vs the same                          >= 1.0

Every file's output 0 is also compared with the FP32 model's (both run by
onnxruntime, the cosine over the samples, flattened): a speed ratio of an
INT8 file that no longer computes the model means little.
  FP16      sparq(MODEL.fp16) vs sparq(MODEL.onnx)                     >= 0.9
  ORT QDQ   sparq(MODEL.ort_qdq) vs ORT(MODEL.ort_qdq)                 >= 0.9
  ORT dyn   sparq(MODEL.ort_dyn) vs ORT(MODEL.ort_dyn)                 >= 0.9

Timing: --rounds rounds; in each, every file runs in turn on every runtime
(interleaved, so all see the same load): sparq as `sparq eval --json --batch B
--limit N*B` (model_seconds / N: Executor::Run only, the first batch included;
with --warm, latency.mean_seconds: the N - 1 batches after the warm-up one,
as ORT's warm-up run is left out). With --cpu-time (1 thread only) every
time is CPU time instead of wall time, for a machine shared with other
work, and the wall-clock p50 of the same runs stands beside it (sparq:
latency.p50_seconds; ORT: the median of its timed calls): sparq's is `sparq eval`'s latency.cpu_mean_seconds (process CPU time
around each run, the N - 1 batches after the warm-up one; an older binary
without it: the CPU time of `--limit N` minus that of `--limit 1` over
N - 1), ORT's the process CPU time of its N runs over N;
the FP16 file with --fp16-as-fp32 (float16 lowered to float32 at load),
ORT as N session.run calls on the same samples after one warm-up run
(ORT_ENABLE_ALL, intra_op threads = --threads, sequential). Each time is the
median over the rounds, divided by B: ms per sample (with --baseline the two
sparq binaries take turns running first). With --batch B > 1 the
data's samples are repeated to fill N batches of B. With --baseline, a second sparq binary (the
unmodified main build) runs too, for a before/after column.

--suite DIR (the real-model suite of tools/make_real_suite.py, e.g.
build/models/real) builds --models-dir first (default build/models/speed),
for every suite model: MODEL.onnx (a link to its model.onnx), the first
32 samples of its calibration split and the first --samples * --batch of its
evaluation split
(data/MODEL_calib.npz, data/MODEL_eval.npz), sparq's files from recipes
written there (INT8: max calibration, per-channel, no fallback; for the
text transformer also quantize.mode dynamic; FP16; with --sparse also the
INT8 + block4x4 70% file), onnxruntime's QDQ file (quant_pre_process, then
quantize_static: QDQ, per channel, QUInt8 activations, QInt8 weights; without
the pre-process where it fails; its QOperator file where onnxruntime cannot
load the QDQ one) and, for the text transformer (every model with
--ort-dynamic), its dynamic file (quantize_dynamic, QInt8 weights). A variant
sparq cannot write is left out (basic-pitch's FP16 file: Inf in its Log).
Files already there are kept.

Usage: python3 bench/e2e_real_models.py [--sparq build/bin/sparq] [--baseline BIN]
    [--models-dir /work/models/speed] [--threads 2] [--rounds 5] [--samples 8] [--batch 1]
    [--warm] [--cpu-time] [--results bench/RESULTS.md]
    [--suite build/models/real [--sparse]]
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
# (bench/export_real_models.py's folder; --suite names its data MODEL_eval.npz)
MODELS = {"efficientnet_lite0": "effnet_eval.npz", "minilm_l6": "minilm_eval.npz"}
DEFAULT_MODELS_DIR = "/work/models/speed"
CALIB_SAMPLES = 32  # --suite: calibration samples of sparq's and onnxruntime's static files


def prepare_from_suite(suite, work, sparq, models, samples, sparse, ort_dynamic=False):
    """Writes work/MODEL*.onnx and work/data/MODEL_{calib,eval}.npz from the suite (see the docstring)."""
    os.makedirs(os.path.join(work, "data"), exist_ok=True)
    for name in models:
        src = os.path.join(suite, name)
        with open(os.path.join(src, "meta.json")) as f:
            task = json.load(f)["task"]
        fp32 = os.path.join(work, name + ".onnx")
        if not os.path.exists(fp32):
            os.symlink(os.path.abspath(os.path.join(src, "model.onnx")), fp32)
        for split in ("calib", "eval"):
            out = os.path.join(work, "data", f"{name}_{split}.npz")
            n = CALIB_SAMPLES if split == "calib" else samples
            if os.path.exists(out):
                with np.load(out) as kept:
                    if len(kept[kept.files[0]]) >= n:
                        continue
            data = np.load(os.path.join(src, split + ".npz"))
            np.savez(out, **{k: data[k][:n] for k in data.files})
        variants = {"int8": "  precision: int8\n  calibration:\n    method: max\n  fallback:\n    enabled: false\n",
                    "fp16": "  precision: fp16\n"}
        if task == "text_embedding":
            variants["int8_dyn"] = "  precision: int8\n  mode: dynamic\n  fallback:\n    enabled: false\n"
        for variant, quantize in variants.items():
            try:
                make_sparq_file(sparq, work, name, variant, "quantize:\n" + quantize)
            except RuntimeError as e:  # e.g. basic-pitch's FP16 file: Inf in its Log; the variant's rows are left out
                print(f"{name}: no {variant} file, left out: {str(e).strip().splitlines()[-1]}", file=sys.stderr)
        if sparse:
            make_sparq_file(sparq, work, name, "int8_bsr",
                            "prune:\n  enabled: true\n  structure: block4x4\n  sparsity: 0.7\n  steps: 1\n"
                            "  recovery: false\nquantize:\n" + variants["int8"])
        make_ort_files(work, name, ort_dynamic or task == "text_embedding")


def make_sparq_file(sparq, work, name, variant, body):
    out = os.path.join(work, f"{name}.{variant}.onnx")
    if os.path.exists(out):
        return
    recipe = os.path.join(work, f"{name}.{variant}.yaml")
    with open(recipe, "w") as f:
        f.write(f"# bench/e2e_real_models.py --suite: the {variant} file of {name} (a speed row)\n"
                f"model: {name}.onnx\noutput:\n  dir: out_{name}.{variant}\n  model: {name}.{variant}.onnx\n"
                f"  overwrite: true\ndata:\n  calibration: data/{name}_calib.npz\n"
                f"  evaluation: data/{name}_eval.npz\n{body}"
                "evaluate:\n  metric: cosine\n  gate:\n    max_drop: 100.0\n")
    proc = subprocess.run([sparq, "run", recipe], cwd=work, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"sparq run {recipe}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    os.replace(os.path.join(work, f"out_{name}.{variant}", f"{name}.{variant}.onnx"), out)


def make_ort_files(work, name, dynamic):
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    fp32 = os.path.join(work, name + ".onnx")
    calib = np.load(os.path.join(work, "data", f"{name}_calib.npz"))

    class Reader(CalibrationDataReader):
        def __init__(self):
            n = len(calib[calib.files[0]])
            self.feeds = iter([{k: calib[k][i:i + 1] for k in calib.files} for i in range(n)])

        def get_next(self):
            return next(self.feeds, None)

    pre = os.path.join(work, name + ".pre.onnx")
    cwd = os.getcwd()
    os.chdir(work)  # quant_pre_process leaves temporary files in the cwd
    try:
        if not os.path.exists(pre):
            try:
                quant_pre_process(fp32, pre)
            except Exception as e:  # noqa: BLE001 - any failure: quantize the model as it is
                print(f"{name}: quant_pre_process failed ({type(e).__name__}: {e}); quantizing without it",
                      file=sys.stderr)
                pre = fp32
        qdq = os.path.join(work, name + ".ort_qdq.onnx")
        if not os.path.exists(qdq) and not os.path.exists(os.path.join(work, name + ".ort_qop.onnx")):
            quantize_static(pre, qdq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            try:
                ort.InferenceSession(qdq, providers=["CPUExecutionProvider"])
            except Exception as e:  # noqa: BLE001 - e.g. opset 12 models: a DequantizeLinear with axis
                if pre == fp32:
                    raise
                print(f"{name}: onnxruntime cannot load its own QDQ file of the pre-processed model "
                      f"({str(e)[:200]}); quantizing without quant_pre_process", file=sys.stderr)
                quantize_static(fp32, qdq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
                try:
                    ort.InferenceSession(qdq, providers=["CPUExecutionProvider"])
                except Exception as e2:  # noqa: BLE001 - basic-pitch: its QDQ file never loads
                    os.remove(qdq)
                    qop = os.path.join(work, name + ".ort_qop.onnx")
                    print(f"{name}: onnxruntime cannot load its own QDQ file ({str(e2)[:200]}); its static "
                          f"QOperator file instead", file=sys.stderr)
                    if not os.path.exists(qop):
                        quantize_static(fp32, qop, Reader(), quant_format=QuantFormat.QOperator, per_channel=True,
                                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        dyn = os.path.join(work, name + ".ort_dyn.onnx")
        if dynamic and not os.path.exists(dyn):
            quantize_dynamic(pre, dyn, weight_type=QuantType.QInt8)
    finally:
        os.chdir(cwd)


def sparq_ms(sparq, model, inputs, threads, samples, batch, extra=(), warm=False):
    """ms per batch of `batch`, over `samples` batches."""
    cmd = [sparq, "eval", model, "--inputs", inputs, "--batch", str(batch), "--threads", str(threads), "--limit",
           str(samples * batch), "--json", *extra]
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


def sparq_cpu_ms(sparq, model, inputs, samples, batch, extra=()):
    """CPU ms per batch after the warm-up one, 1 thread: the eval's own
    latency.cpu_mean_seconds (process CPU time around each Executor::Run);
    for a binary without it, the process CPU time of --limit N batches minus
    that of --limit 1 batch (which also counts the model load twice over)."""
    used, batches = {}, {}
    for limit in (samples, 1):
        cmd = [sparq, "eval", model, "--inputs", inputs, "--batch", str(batch), "--threads", "1", "--limit",
               str(limit * batch), "--json", *extra]
        before = children_cpu_seconds()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        used[limit] = children_cpu_seconds() - before
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        run = json.loads(proc.stdout)
        wall = 1000 * run["latency"]["p50_seconds"] if run["latency"].get("p50_seconds") else None
        if run["latency"].get("cpu_mean_seconds") is not None:
            return 1000 * run["latency"]["cpu_mean_seconds"], wall
        batches[limit] = run["batches"]  # the data may hold fewer than N samples
        if limit == samples:
            wall_n = wall
    return 1000 * (used[samples] - used[1]) / (batches[samples] - batches[1]), wall_n


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
        """CPU ms per run, and the median wall-clock ms of the same runs."""
        start = time.process_time()
        walls = []
        for feed in self.feeds:
            t0 = time.perf_counter()
            self.session.run(None, feed)
            walls.append(time.perf_counter() - t0)
        return 1000 * (time.process_time() - start) / len(self.feeds), 1000 * statistics.median(walls)


def output_cosine(reference, other):
    """Cosine of output 0 of `other` against `reference` over all samples
    (flattened), both run by onnxruntime."""
    a = np.concatenate([reference.session.run(None, f)[0].ravel() for f in reference.feeds]).astype(np.float64)
    b = np.concatenate([other.session.run(None, f)[0].ravel() for f in other.feeds]).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


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
    p.add_argument("--models-dir", default=DEFAULT_MODELS_DIR)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--samples", type=int, default=8, help="batches per timing")
    p.add_argument("--batch", type=int, default=1,
                   help="samples per batch (the data's samples are repeated to fill the batches)")
    p.add_argument("--warm", action="store_true",
                   help="time sparq's batches after its warm-up batch only (ORT's warm-up run is never timed)")
    p.add_argument("--cpu-time", action="store_true",
                   help="CPU time instead of wall time (needs --threads 1): for a machine shared with other work")
    p.add_argument("--results", default=None)
    p.add_argument("--suite", default=None,
                   help="the real-model suite (tools/make_real_suite.py): build --models-dir from it first")
    p.add_argument("--sparse", action="store_true", help="with --suite: also the INT8 + block4x4 70%% files")
    p.add_argument("--ort-dynamic", action="store_true",
                   help="with --suite: onnxruntime's dynamic file for every model (else for text models only)")
    args = p.parse_args(argv)
    if args.suite:
        if args.models_dir == DEFAULT_MODELS_DIR:
            args.models_dir = os.path.join(REPO, "build", "models", "speed")
        if args.models == ",".join(MODELS):
            args.models = ",".join(sorted(d for d in os.listdir(args.suite)
                                          if os.path.isfile(os.path.join(args.suite, d, "meta.json"))))
        prepare_from_suite(args.suite, args.models_dir, os.path.abspath(args.sparq), args.models.split(","),
                           max(args.samples * args.batch, 2), args.sparse, args.ort_dynamic)
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
        # A folder --suite built earlier names its data MODEL_eval.npz too.
        data_file = MODELS.get(name, "")
        if args.suite or not os.path.isfile(os.path.join(args.models_dir, "data", data_file)):
            data_file = f"{name}_eval.npz"
        data = np.load(os.path.join(args.models_dir, "data", data_file))
        need = args.samples * args.batch
        arrays = {k: np.resize(data[k], (max(need, 1),) + data[k].shape[1:])[:need] if args.batch > 1
                  else data[k][: args.samples] for k in data.files}
        if args.cpu_time and len(next(iter(arrays.values()))) < 2:
            p.error(f"--cpu-time needs at least 2 samples ({name} has fewer)")
        inputs[name] = os.path.join(tmp, name + ".npz")
        np.savez(inputs[name], **arrays)
        b = args.batch
        feeds[name] = [{k: v[i * b:(i + 1) * b] for k, v in arrays.items()}
                       for i in range(len(next(iter(arrays.values()))) // b)]
        for variant, suffix in (("fp32", ""), ("int8", ".int8"), ("int8_dyn", ".int8_dyn"),
                                ("int8_bsr", ".int8_bsr"), ("fp16", ".fp16"),
                                ("ort_qdq", ".ort_qdq"), ("ort_qop", ".ort_qop"), ("ort_dyn", ".ort_dyn")):
            path = os.path.join(args.models_dir, name + suffix + ".onnx")
            if os.path.isfile(path):
                files[(name, variant)] = path
    sessions = {key: Ort(path, feeds[key[0]], args.threads) for key, path in files.items()}
    cosine = {key: output_cosine(sessions[(key[0], "fp32")], sessions[key]) for key in files}
    times = {}  # (runtime, model, variant) -> [ms per round]
    walls = {}  # with --cpu-time: the wall-clock p50 of the same runs
    sparq_cannot = set()  # (model, variant) files sparq does not run
    for r in range(args.rounds):
        for key, path in files.items():
            # Alternate which sparq binary runs first (with --baseline): the first of two
            # back-to-back runs of one file pays for the page cache and the caches.
            for runtime, binary in (list(binaries.items()) if r % 2 == 0 else list(binaries.items())[::-1]):
                extra = ["--fp16-as-fp32"] if key[1] == "fp16" else []
                if key in sparq_cannot:
                    continue
                try:
                    if args.cpu_time:
                        cpu, wall = sparq_cpu_ms(binary, path, inputs[key[0]], args.samples, args.batch, extra)
                    else:
                        cpu, wall = sparq_ms(binary, path, inputs[key[0]], args.threads, args.samples, args.batch,
                                             extra, args.warm), None
                except RuntimeError as e:  # onnxruntime's QOperator file: com.microsoft operators
                    sparq_cannot.add(key)
                    print(f"{path}: sparq does not run it, left out ({str(e).strip().splitlines()[-1][:200]})",
                          file=sys.stderr)
                    continue
                times.setdefault((runtime,) + key, []).append(cpu / args.batch)
                if wall is not None:
                    walls.setdefault((runtime,) + key, []).append(wall / args.batch)
            if args.cpu_time:
                cpu, wall = sessions[key].cpu_ms()
                times.setdefault(("ort",) + key, []).append(cpu / args.batch)
                walls.setdefault(("ort",) + key, []).append(wall / args.batch)
            else:
                times.setdefault(("ort",) + key, []).append(sessions[key].ms() / args.batch)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    wall_med = {k: statistics.median(v) for k, v in walls.items()}

    def t(runtime, model, variant):
        return med.get((runtime, model, variant))

    def wall_text(r):
        if r.get("sparq_wall_ms") is None or r.get("ort_wall_ms") is None:
            return "-"
        return f"{r['sparq_wall_ms']:.1f} / {r['ort_wall_ms']:.1f} ({r['ort_wall_ms'] / r['sparq_wall_ms']:.2f}x)"

    rows = []
    for name in args.models.split(","):
        for variant, label, target in (("fp32", "FP32", 1.0), ("int8", "sparq INT8", 1.0),
                                       ("int8_dyn", "sparq INT8 dynamic", 1.0),
                                       ("int8_bsr", "sparq INT8 + block4x4 70%", 1.0), ("fp16", "FP16", 0.9),
                                       ("ort_qdq", "ORT QDQ file", 0.9), ("ort_qop", "ORT QOperator file", 0.9),
                                       ("ort_dyn", "ORT dynamic file", 0.9)):
            if (name, variant) not in files:
                continue
            ours = t("sparq", name, variant)
            if ours is None:  # a file sparq does not run: only a candidate for ORT's best
                continue
            if variant in ("int8", "int8_dyn", "int8_bsr"):
                cands = [(t("ort", name, v), v) for v in ("int8", "ort_qdq", "ort_qop", "ort_dyn")
                         if t("ort", name, v) is not None]
                theirs, against = min(cands)
                against = "ORT best INT8 (" + {"int8": "sparq's static file", "ort_qdq": "its QDQ file",
                                               "ort_qop": "its QOperator file", "ort_dyn": "its dynamic file"}[against] + \
                    f", cosine {cosine[(name, against)]:.4f})"
            elif variant == "fp16":
                theirs, against = t("sparq", name, "fp32"), "sparq FP32"
            else:
                theirs, against = t("ort", name, variant), "ORT, same file"
            before = t("main", name, variant)
            rows.append({"model": name, "variant": label, "sparq_ms": ours, "main_ms": before,
                         "sparq_wall_ms": wall_med.get(("sparq", name, variant)),
                         "ort_wall_ms": wall_med.get(("ort", name, variant)),
                         "ort_same_file_ms": t("ort", name, variant), "against": against, "against_ms": theirs,
                         "ratio": theirs / ours, "target": target, "cosine": cosine[(name, variant)]})
    section = SECTION if args.batch == 1 else SECTION.replace(" (issue 14)", f", batch {args.batch} (issue 14)")
    lines = [section, "",
             f"Machine: {machine()}. onnxruntime {onnxruntime.__version__}. {args.threads} threads, batch {args.batch}, "
             f"{', '.join(f'{n} {len(f)}' for n, f in feeds.items())} batches per timing (--samples "
             f"{args.samples}, or all the data holds), median of {args.rounds} interleaved rounds "
             f"({'CPU ' if args.cpu_time else ''}ms per sample"
             f"{'; sparq: the batches after its warm-up batch' if args.warm or args.cpu_time else ''}).",
             "", "Command: `python3 bench/e2e_real_models.py " + " ".join(argv or sys.argv[1:]) + "`", "",
             "| model | file | cosine vs FP32 | sparq ms | main ms (before) | ORT ms (same file) | compared with | its ms "
             "| ratio | target | wall p50 ms: sparq / ORT (same file) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        main_ms = f"{r['main_ms']:.1f}" if r["main_ms"] is not None else "-"
        met = "met" if r["ratio"] >= r["target"] else "**missed**"
        lines.append(f"| {r['model']} | {r['variant']} | {r['cosine']:.4f} | {r['sparq_ms']:.1f} | {main_ms} | "
                     f"{r['ort_same_file_ms']:.1f} | {r['against']} | {r['against_ms']:.1f} | "
                     f"{r['ratio']:.2f}x | >= {r['target']} {met} | {wall_text(r)} |")
    lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(tmp, "results.json"), "w") as f:
        json.dump({"rows": rows, "times": {"/".join(k): v for k, v in times.items()}}, f, indent=1)
    print(f"raw numbers: {os.path.join(tmp, 'results.json')}", file=sys.stderr)
    if args.results:
        write_section(args.results, section, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
