#!/usr/bin/env python3
"""End-to-end inference speed: sparq's executor against onnxruntime, on the same ONNX files.

Models: tools/make_test_models.py's resnet18, mobilenet_v2 and tiny_encoder
(the transformer: input_ids [N, 32] int64), each in four variants; every
variant is one ONNX file that both runtimes run:

  fp32           the exported model
  int8           `sparq run`: INT8 QDQ (the default output format),
                 per-channel weights, max calibration
  int8_2to4      the same after 2:4 pruning (50%) of the weighted layers
  int8_block4x4  the same after 4x4 block pruning at 80%

Pruning is one-shot without recovery and leaves the first and the last
weighted layer dense (prune.skip_first_last, the default); calibration uses 8
seeded random samples; the gate is wide open. Only speed is measured here,
not accuracy. The models are cached in --work-dir: a variant is made again
when its recipe changed, when the FP32 model or the sparq build is newer, or
with --rebuild-models.

What is timed, per model, variant and batch size B, with the same thread
count T for both runtimes, on the same inputs (a seeded random chunk of 32
samples; batch i is rows [i*B, (i+1)*B) of it, wrapping around):

  sparq  `sparq eval MODEL --inputs DIR --batch B --threads T --limit N*B
         --json`: its model_seconds, the time spent in Executor::Run summed
         over the N batches. Not timed: start-up, loading the model, creating
         the executor (which packs the weights) and reading the data. N >= 2
         is the smallest count whose expected time reaches --min-seconds,
         estimated from a first one-batch run (the probe), and raised (the
         run repeated) while a run falls short of it. sparq eval cannot
         leave out its first batch, so the N batches include it; the probe's
         time (a first batch too) over the mean batch time is reported as
         "first/mean", which shows what that costs.
  ORT    onnxruntime.InferenceSession: CPUExecutionProvider, ORT_ENABLE_ALL,
         intra_op_num_threads=T, inter_op_num_threads=1, sequential execution.
         Not timed: creating the session and one warm-up run. Timed:
         session.run over at least 2 runs, until --min-seconds.

  samples/s = samples run / time; sparq/ORT > 1 means sparq is faster.
  With --repeats R, each row times sparq and ORT R times, alternating (so
  that both see the same load), and reports the best of each.

Same computation: the probe saves sparq's outputs for the first batch
(--save-outputs); ORT's warm-up run is on the same batch. The table gives the
largest absolute difference and the lowest SQNR over the model's outputs.
Kernels: the probe's `--verbose` list, summarized for the Conv / Gemm /
MatMul nodes after sparq's fusions (any op type containing one of those
names: QLinearConv, QLinearMatMul, FusedConv, ...), e.g. "QLinearConv 19
gemm_s8". MatMuls of two activations (attention) count too.
Zero weights: the share of the file's initializer values that are zero
(`sparq inspect --json`), which shows that the pruning took.

Targets (the issue): sparq's INT8 latency no slower than onnxruntime's on the
same model (checked for every INT8 variant); FP32 within 1.2x of it
(sparq/ORT >= 1/1.2).

Writes the raw numbers to WORK_DIR/e2e_results.json; with --results, its
section of that Markdown file (the other sections are kept). A full run takes
about 3 minutes on 2 cores. Exit status: 0; 1 when a row failed (the tables
still print, the failure is a note); 2 on a usage error (no sparq binary, no
onnxruntime, an unknown model or variant).

Usage:
  python3 bench/e2e_vs_ort.py [--sparq build/bin/sparq] [--work-dir build/e2e]
      [--models-dir DIR] [--models resnet18,mobilenet_v2,tiny_encoder]
      [--variants fp32,int8,int8_2to4,int8_block4x4] [--batches 1,32] [--threads N]
      [--min-seconds 2] [--repeats 1] [--rebuild-models] [--results bench/RESULTS.md]
  python3 bench/e2e_vs_ort.py --real-models /work/models/speed --threads 2 --repeats 5
      (the real pretrained models of issue 14: bench/e2e_real_models.py)
"""
import argparse
import collections
import datetime
import glob
import json
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

from results_md import write_section

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TOOLS = os.path.join(REPO, "tools")
sys.path.insert(0, TOOLS)

SECTION = "## End to end vs onnxruntime"
MODELS = ("resnet18", "mobilenet_v2", "tiny_encoder")
SEED = 2026
CHUNK_SAMPLES = 32     # distinct input samples both runtimes cycle through
CALIB_SAMPLES = 8      # calibration samples of the INT8 recipes
EVAL_SAMPLES = 2       # evaluation samples of the recipes (their gate is wide open)
MIN_BATCHES = 2        # timed batches (sparq) and timed runs (ORT), at least
CONSTANT_OUTPUT = 1e-3  # outputs varying less than this between samples are noted (see compare())
FP32_TARGET = 1 / 1.2  # sparq/ORT at or above this meets the FP32 target
INT8_TARGET = 1.0      # and this the INT8 one

# variant -> (label, the recipe's prune section, or None for the FP32 file itself)
VARIANTS = {
    "fp32": ("FP32", None),
    "int8": ("INT8", ""),
    "int8_2to4": ("INT8 + 2:4 (50%)",
                  'prune:\n  enabled: true\n  structure: "2:4"\n  schedule: oneshot\n  recovery: false\n'),
    "int8_block4x4": ("INT8 + block 4x4 (80%)",
                      "prune:\n  enabled: true\n  structure: block4x4\n  sparsity: 0.8\n"
                      "  schedule: oneshot\n  recovery: false\n"),
}
# The table summarizes the kernels of nodes whose op type contains one of
# these, so that the ops sparq fuses them into count too (QLinearConv,
# QLinearMatMul, ai.sparq FusedConv, ...).
WEIGHTED_OPS = ("Conv", "Gemm", "MatMul")


class BenchError(Exception):
    """A problem the user must fix (missing binary, bad option): exit 2."""


# ---------------------------------------------------------------------------
# Models and data.

def input_spec(models_dir: str, name: str):
    """(input name, per-sample shape, dtype) from the sample inputs that
    make_test_models.py writes beside each model."""
    with np.load(os.path.join(models_dir, name + ".npz")) as f:
        if len(f.files) != 1:
            raise BenchError(f"{name}: expected one model input, found {f.files}")
        key = f.files[0]
        return key, f[key].shape[1:], f[key].dtype


def random_samples(rng, n: int, shape, dtype) -> np.ndarray:
    """Standard normal floats (images), or token ids below the vocabulary size."""
    if np.issubdtype(dtype, np.integer):
        from make_test_models import VOCAB
        return rng.integers(0, VOCAB, (n, *shape)).astype(dtype)
    return rng.standard_normal((n, *shape), dtype=np.float32).astype(dtype)


def make_data(models_dir: str, name: str, work: str) -> dict:
    """Writes the model's calibration, evaluation and timing samples as .npy
    (the same bytes on every run); returns their paths and the input name."""
    key, shape, dtype = input_spec(models_dir, name)
    rng = np.random.default_rng([SEED, MODELS.index(name)])
    data = {"input": key}
    for tag, n in (("calib", CALIB_SAMPLES), ("eval", EVAL_SAMPLES), ("chunk", CHUNK_SAMPLES)):
        data[tag] = os.path.join(work, "data", f"{name}_{tag}.npy")
        arr = random_samples(rng, n, shape, dtype)
        if not (os.path.isfile(data[tag]) and np.array_equal(np.load(data[tag]), arr)):
            np.save(data[tag], arr)
    return data


def recipe_text(model: str, data: dict, prune: str, out_dir: str) -> str:
    return (
        "version: 1\n"
        f"model: {model}\n"
        "data:\n"
        f"  calibration: {data['calib']}\n"
        f"  evaluation: {data['eval']}\n"
        f"  calibration_samples: {CALIB_SAMPLES}\n"
        f"  batch_size: {CALIB_SAMPLES}\n"
        f"{prune}"
        "quantize:\n"
        "  precision: int8\n"
        "  calibration:\n"
        "    method: max\n"
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
        "    max_drop: 1000000\n"
        "report:\n"
        "  markdown: ''\n"
        "  junit: ''\n"
    )


def make_variant(sparq: str, models_dir: str, name: str, variant: str, data: dict, work: str,
                 rebuild: bool) -> str:
    """Returns the variant's ONNX file, running `sparq run` unless a cached
    one was made from the same recipe after the FP32 model and after the
    sparq build (whose quantizer may have changed)."""
    fp32 = os.path.abspath(os.path.join(models_dir, name + ".onnx"))
    prune = VARIANTS[variant][1]
    if prune is None:
        return fp32
    out_dir = os.path.join(work, "models", f"{name}_{variant}")
    model = os.path.join(out_dir, name + ".sparq.onnx")
    recipe_path = out_dir + ".yaml"
    text = recipe_text(fp32, data, prune, out_dir)
    newest_input = max([os.path.getmtime(fp32)] + [v[0] for v in build_files(sparq).values() if v])
    if not rebuild and os.path.isfile(model) and os.path.getmtime(model) >= newest_input \
            and os.path.isfile(recipe_path):
        with open(recipe_path) as f:
            if f.read() == text:
                return model
    with open(recipe_path, "w") as f:
        f.write(text)
    print(f"   making {variant}: sparq run {os.path.relpath(recipe_path)}", flush=True)
    proc = run_tool([sparq, "run", recipe_path])
    if proc.returncode != 0 or not os.path.isfile(model):
        raise RuntimeError(f"sparq run {recipe_path} exited {proc.returncode}:\n{tail(proc.stdout + proc.stderr)}")
    return model


def timing_folder(data: dict, samples: int) -> str:
    """A folder of links to the sample chunk, enough to hold `samples` rows:
    sparq eval reads a folder's .npy files in name order as one dataset."""
    folder = data["chunk"][:-len(".npy")]
    os.makedirs(folder, exist_ok=True)
    for i in range(math.ceil(samples / CHUNK_SAMPLES)):
        link = os.path.join(folder, f"part_{i:05d}.npy")
        if not os.path.lexists(link):
            os.symlink(os.path.join("..", os.path.basename(data["chunk"])), link)
    return folder


# ---------------------------------------------------------------------------
# Running both runtimes.

def run_tool(cmd: list) -> subprocess.CompletedProcess:
    """Runs cmd, output captured; a binary that cannot be started (one being
    rebuilt, say) is a RuntimeError, which fails one row, not the run."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise RuntimeError(f"cannot run {cmd[0]}: {e}")


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def one_line(text: str) -> str:
    """An error's last lines joined into one, for a Markdown list item."""
    return " / ".join(line.strip() for line in tail(text, 3).splitlines() if line.strip())


def sparq_eval(sparq: str, model: str, inputs: str, batch: int, threads: int, limit: int, extra=()) -> dict:
    cmd = [sparq, "eval", model, "--inputs", inputs, "--batch", str(batch), "--threads", str(threads),
           "--limit", str(limit), "--json", *extra]
    proc = run_tool(cmd)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{tail(proc.stdout + proc.stderr)}")
    return json.loads(proc.stdout)


def weight_sparsity(sparq: str, model: str):
    """The fraction of the model's initializer values that are zero
    (`sparq inspect --json` totals), or None when inspect fails."""
    try:
        proc = run_tool([sparq, "inspect", model, "--json"])
        return float(json.loads(proc.stdout)["totals"]["sparsity"]) if proc.returncode == 0 else None
    except (RuntimeError, ValueError, KeyError, TypeError):
        return None


def summarize_kernels(nodes: list) -> str:
    """'QLinearConv 19 gemm_s8; Conv 1 ref' for the weighted layers' nodes."""
    counts = collections.Counter((n["op"], n["kernel"]) for n in nodes if any(w in n["op"] for w in WEIGHTED_OPS))
    return "; ".join(f"{op} {k} {kernel}" for (op, kernel), k in sorted(counts.items(), key=lambda x: -x[1]))


def sparq_probe(sparq: str, model: str, data: dict, batch: int, threads: int, work: str, tag: str) -> dict:
    """One batch with --verbose and --save-outputs: the kernels, the outputs
    and the time of a process's first batch."""
    probe_out = os.path.join(work, "outputs", f"{tag}_sparq.npz")
    probe = sparq_eval(sparq, model, timing_folder(data, batch), batch, threads, batch,
                       ["--verbose", "--save-outputs", probe_out])
    with np.load(probe_out) as f:
        outputs = {k: f[k] for k in f.files}
    return {"first_s": max(probe["model_seconds"], 1e-6), "kernels": summarize_kernels(probe["kernels"]),
            "outputs": outputs}


def time_sparq(sparq: str, model: str, data: dict, batch: int, threads: int, batches: int,
               min_seconds: float) -> dict:
    """`batches` batches in one sparq eval process, its model_seconds; run
    again with more batches while that is under min_seconds (the estimate
    from a first batch can be off either way)."""
    for _ in range(4):
        run = sparq_eval(sparq, model, timing_folder(data, batches * batch), batch, threads, batches * batch)
        if run["batches"] != batches or run["threads"] != threads:
            raise RuntimeError(f"sparq eval ran {run['batches']} batches on {run['threads']} threads, "
                               f"asked for {batches} on {threads}")
        seconds = max(run["model_seconds"], 1e-9)
        if seconds >= min_seconds:
            break
        batches = math.ceil(batches * 1.2 * min_seconds / seconds)
    return {"samples_per_s": run["samples"] / seconds, "seconds": seconds, "batches": run["batches"]}


class OrtRunner:
    """An onnxruntime session and the batches sparq reads from the chunk
    links, sliced before timing. Creating it runs the warm-up batch (the
    probe's batch), whose outputs it keeps."""

    def __init__(self, model: str, data: dict, batch: int, threads: int):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.batch = batch
        chunk = np.load(data["chunk"])
        distinct = CHUNK_SAMPLES // math.gcd(batch, CHUNK_SAMPLES)
        self.feeds = [{data["input"]: np.ascontiguousarray(
            np.take(chunk, range(i * batch, (i + 1) * batch), axis=0, mode="wrap"))} for i in range(distinct)]
        self.names = [o.name for o in self.session.get_outputs()]
        self.outputs = dict(zip(self.names, self.session.run(self.names, self.feeds[0])))

    def time(self, min_seconds: float) -> dict:
        """session.run over at least MIN_BATCHES runs and min_seconds."""
        runs, seconds = 0, 0.0
        while runs < MIN_BATCHES or seconds < min_seconds:
            feed = self.feeds[runs % len(self.feeds)]
            start = time.perf_counter()
            self.session.run(self.names, feed)
            seconds += time.perf_counter() - start
            runs += 1
        return {"samples_per_s": runs * self.batch / seconds, "seconds": seconds, "batches": runs}


def compare(ours: dict, theirs: dict) -> dict:
    """Largest |sparq - ORT| and lowest SQNR (dB, ORT as the signal) over the
    outputs; and how much ORT's outputs vary between the batch's samples (std
    over samples / mean |output|, lowest over the outputs; None for one
    sample): near 0, the comparison checks little more than a constant."""
    max_abs, sqnr = 0.0, math.inf
    variation = min((float(np.mean(np.std(ref, axis=0)) / max(float(np.mean(np.abs(ref))), 1e-30))
                     for ref in theirs.values()), default=None) if all(len(r) > 1 for r in theirs.values()) else None
    for name, ref in theirs.items():
        if name not in ours or ours[name].shape != ref.shape:
            raise RuntimeError(f"output {name!r}: sparq gave {ours[name].shape if name in ours else 'nothing'}, "
                               f"onnxruntime {ref.shape}")
        a, b = ours[name].astype(np.float64), ref.astype(np.float64)
        max_abs = max(max_abs, float(np.max(np.abs(a - b))) if a.size else 0.0)
        noise = float(np.sum((a - b) ** 2))
        if noise > 0:
            sqnr = min(sqnr, 10 * math.log10(max(float(np.sum(b ** 2)), 1e-300) / noise))
    return {"max_abs_diff": max_abs, "sqnr_db": sqnr, "output_variation": variation}


def measure(sparq: str, model: str, name: str, variant: str, data: dict, batch: int, args, work: str,
            notes: list) -> dict:
    """One table row: both runtimes on one file at one batch size. A failure
    becomes the row's "error" (and a note), so the other rows still run."""
    label = VARIANTS[variant][0]
    row = {"model": name, "variant": variant, "label": label, "batch": batch, "file": os.path.relpath(model, work)}
    stage = "sparq eval"
    try:
        probe = sparq_probe(sparq, model, data, batch, args.threads, work, f"{name}_{variant}_b{batch}")
        batches = max(MIN_BATCHES, math.ceil(args.min_seconds / probe["first_s"]))
        stage = "onnxruntime"
        runner = OrtRunner(model, data, batch, args.threads)
        s = o = None
        for _ in range(args.repeats):  # alternating, so that both see the same load; the best of each
            stage = "sparq eval"
            t = time_sparq(sparq, model, data, batch, args.threads, batches, args.min_seconds)
            batches = t["batches"]
            s = t if s is None or t["samples_per_s"] > s["samples_per_s"] else s
            stage = "onnxruntime"
            t = runner.time(args.min_seconds)
            o = t if o is None or t["samples_per_s"] > o["samples_per_s"] else o
        ort_outputs = runner.outputs
        del runner  # its threads end before the next row
        stage = "comparing outputs"
        row.update(sparq=s["samples_per_s"], ort=o["samples_per_s"], ratio=s["samples_per_s"] / o["samples_per_s"],
                   kernels=probe["kernels"], first_over_mean=probe["first_s"] / (s["seconds"] / s["batches"]),
                   sparq_batches=s["batches"], ort_runs=o["batches"], **compare(probe["outputs"], ort_outputs))
    except Exception as e:  # onnxruntime raises its own exception types
        print(f"   {variant} batch {batch}: {stage} failed: {e}", flush=True)
        row["error"] = stage
        notes.append(f"{name} {label} batch {batch}: {stage} failed: {one_line(str(e))}")
        return row
    print(f"   {variant:14s} batch {batch:3d}: sparq {fmt_rate(row['sparq'])} samples/s ({s['batches']} batches), "
          f"ORT {fmt_rate(row['ort'])} ({o['batches']} runs), {row['ratio']:.2f}x, max abs diff "
          f"{fmt_diff(row['max_abs_diff'])}, SQNR {fmt_sqnr(row['sqnr_db'])} dB; {row['kernels']}", flush=True)
    return row


def constant_output_notes(rows: list) -> list:
    """Notes on outputs that hardly vary between samples (see compare()):
    one per model when its FP32 file is such, else one per variant."""
    notes = []
    flagged = [r for r in rows if r.get("output_variation") is not None and r["output_variation"] < CONSTANT_OUTPUT]
    fp32_models = {r["model"] for r in flagged if r["variant"] == "fp32"}
    for name in fp32_models:
        notes.append(f"{name}: even the FP32 model's outputs hardly depend on the input (std over samples / mean "
                     "|output| below 1e-3: random weights, the signal dies out through the layers), so the "
                     "agreement columns of all its variants check little more than a constant")
    seen = set()
    for r in flagged:
        if r["model"] not in fp32_models and (r["model"], r["variant"]) not in seen:
            seen.add((r["model"], r["variant"]))
            notes.append(f"{r['model']} {r['label']}: the outputs hardly depend on the input (std over samples / "
                         f"mean |output| = {r['output_variation']:.1g}), so its agreement columns check little more "
                         "than a constant (pruning without recovery can erase a random-weight model's signal)")
    return notes


# ---------------------------------------------------------------------------
# Report.

def lscpu() -> dict:
    fields = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return fields
    for line in out.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def machine() -> str:
    info = lscpu()
    flags = set(info.get("Flags", "").split())
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags]
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return (f"{info.get('Model name', platform.processor() or '?')}, {os.cpu_count()} cores, {mem_gib:.0f} GiB RAM; "
            f"ISA: {', '.join(isa) or 'none of avx2/avx512f/avx512_vnni'}")


def fmt_rate(v) -> str:
    return "n/a" if v is None else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def fmt_percent(v) -> str:
    return "n/a" if v is None else f"{100 * v:.0f}%"


def fmt_diff(v) -> str:
    return "n/a" if v is None else f"{v:.3g}"


def fmt_sqnr(v) -> str:
    return "n/a" if v is None else "inf" if math.isinf(v) else f"{v:.1f}"


def table(rows: list, batch: int) -> list:
    lines = [f"Batch {batch}:", "",
             "| model | variant | zero weights | sparq samples/s | ORT samples/s | sparq/ORT | sparq first/mean | "
             "sparq kernels (conv/matmul nodes) | max abs diff | SQNR vs ORT (dB) |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        if r["batch"] != batch:
            continue
        if "error" in r:
            lines.append(f"| {r['model']} | {r['label']} | {fmt_percent(r.get('weight_sparsity'))} | "
                         f"failed: {r['error']} | | | | | | |")
            continue
        lines.append(f"| {r['model']} | {r['label']} | {fmt_percent(r.get('weight_sparsity'))} | "
                     f"{fmt_rate(r['sparq'])} | {fmt_rate(r['ort'])} | "
                     f"{r['ratio']:.2f}x | {r['first_over_mean']:.2f} | {r['kernels']} | "
                     f"{fmt_diff(r['max_abs_diff'])} | {fmt_sqnr(r['sqnr_db'])} |")
    return lines + [""]


def verdicts(rows: list, models: list) -> list:
    """One line per model and target, saying plainly whether it is met."""
    out = []
    for name in models:
        for target, variants, text in (
                (FP32_TARGET, ("fp32",), "FP32 within 1.2x of onnxruntime"),
                (INT8_TARGET, ("int8", "int8_2to4", "int8_block4x4"), "INT8 no slower than onnxruntime")):
            mine = [r for r in rows if r["model"] == name and r["variant"] in variants]
            if not mine:
                continue
            measured = [r for r in mine if "error" not in r]
            if any(r["ratio"] < target for r in measured):
                verdict = "NOT met"
            elif len(measured) < len(mine):
                verdict = "not measured (a run failed)" if not measured else "met where measured (a run failed)"
            else:
                verdict = "met"
            detail = ", ".join(f"{r['label']} batch {r['batch']}: " +
                               (f"{r['ratio']:.2f}x" if "error" not in r else "failed") for r in mine)
            out.append(f"{name}: {text} (sparq/ORT >= {target:.2f}): **{verdict}** ({detail})")
    return out


def markdown(rows: list, meta: dict) -> str:
    lines = [SECTION, "",
             f"- Machine: {meta['machine']}; load average (1 min) {meta['load'][0]:.1f} at the start, "
             f"{meta['load'][1]:.1f} at the end (above 0 = other work shared the cores)",
             f"- Date: {meta['date']}; onnxruntime {meta['ort']}, numpy {meta['numpy']}; sparq binary "
             f"`{meta['sparq']}` at {meta['git']}",
             f"- Command: `{meta['command']}`",
             f"- Threads: {meta['threads']} for both runtimes (sparq `--threads`; ORT intra_op_num_threads, "
             "inter_op_num_threads 1, sequential, ORT_ENABLE_ALL, CPUExecutionProvider). Timed for at least "
             f"{meta['min_seconds']:g} s and {MIN_BATCHES} batches per measurement; best of {meta['repeats']} "
             "measurement(s) per runtime, alternating.",
             "- Models: tools/make_test_models.py (random weights). INT8 variants: `sparq run`, QDQ, per-channel "
             f"weights, max calibration on {CALIB_SAMPLES} random samples; pruning one-shot without recovery, "
             "first and last weighted layer dense. Both runtimes run the same ONNX file.",
             "- Timed: **sparq** = `sparq eval --json` model_seconds (Executor::Run summed over the batches; "
             "not start-up, model load, weight packing at executor creation, data I/O), the first batch "
             "included (*first/mean*: a first batch's time over the mean batch); **ORT** = `session.run`, "
             "after session creation and one warm-up run. Inputs: the same 32 random samples for both.",
             "- *zero weights*: the fraction of the file's initializer values that are zero (`sparq inspect "
             "--json`), the first and last weighted layers being dense.",
             "- Same computation: *max abs diff* and *SQNR* of sparq's outputs against ORT's on the first "
             "batch, worst over the model's outputs (an INT8 model's two runtimes may round differently).",
             ""]
    for batch in meta["batches"]:
        lines += table(rows, batch)
    lines += ["Targets (issue): sparq's INT8 end-to-end latency no slower than onnxruntime's on the same model "
              "(every INT8 variant); FP32 within 1.2x of onnxruntime.", ""]
    lines += [f"- {v}" for v in verdicts(rows, meta["models"])]
    lines += [f"- Note: {n}" for n in meta["notes"]]
    return "\n".join(lines) + "\n"


def build_files(path: str) -> dict:
    """The binary and the libsparq shared libraries beside it or one folder
    up (a CMake build links bin/sparq to libsparq.so), each with its
    (mtime, size): a change means the build changed under the benchmark."""
    folder = os.path.dirname(os.path.abspath(path))
    files = [os.path.abspath(path)] + sorted(glob.glob(os.path.join(folder, "libsparq*")) +
                                             glob.glob(os.path.join(folder, "..", "libsparq*")))
    found = {}
    for f in files:
        try:
            found[os.path.normpath(f)] = (os.path.getmtime(f), os.path.getsize(f))
        except OSError:  # removed while being rebuilt
            found[os.path.normpath(f)] = None
    return found


def git(folder: str, *args) -> str:
    """git's output in folder, or None where there is no git (a stock
    machine) or no checkout: the benchmarks never need git to run."""
    try:
        proc = subprocess.run(["git", "-C", folder] + list(args), capture_output=True, text=True)
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def binary_version(path: str, files: dict) -> str:
    """The commit of the checkout that holds the binary, whether that
    checkout has uncommitted changes, and when the build was last written:
    the binary itself does not say what source it was built from."""
    folder = os.path.dirname(os.path.abspath(path))
    built = datetime.datetime.fromtimestamp(max((v[0] for v in files.values() if v), default=0),
                                            datetime.timezone.utc)
    built = built.strftime("%Y-%m-%d %H:%M UTC")
    head = git(folder, "rev-parse", "--short", "HEAD")
    if head is None:
        return f"? (no git, or outside a git checkout), built {built}"
    dirty = git(folder, "status", "--porcelain", "--untracked-files=no")
    return f"{head}{' + uncommitted changes' if dirty else ''} (checkout state now), built {built}"


# ---------------------------------------------------------------------------

def parse_list(text: str, allowed, what: str) -> list:
    items = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in items if s not in allowed]
    if unknown or not items:
        raise BenchError(f"--{what}: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(allowed)}")
    return items


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sparq", default=os.path.join(REPO, "build", "bin", "sparq"), help="the sparq CLI binary")
    parser.add_argument("--work-dir", default=os.path.join(REPO, "build", "e2e"),
                        help="models, recipes, data and outputs; kept, so a re-run reuses the models")
    parser.add_argument("--models-dir", default=None,
                        help="folder of tools/make_test_models.py's models (default: WORK_DIR/models, made there)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads of both runtimes")
    parser.add_argument("--min-seconds", type=float, default=2.0, help="time each measurement at least this long")
    parser.add_argument("--repeats", type=int, default=1,
                        help="measure each row this many times, the runtimes alternating; report the best of each")
    parser.add_argument("--rebuild-models", action="store_true", help="make the INT8 variants even when cached")
    parser.add_argument("--results", default=None, help="write the tables into this Markdown file's section")
    parser.add_argument("--real-models", default=None, metavar="DIR",
                        help="time the real pretrained models in DIR instead (bench/e2e_real_models.py: FP32, "
                             "sparq INT8, FP16, onnxruntime's QDQ and dynamic files; --sparq, --threads, "
                             "--repeats as rounds and --results pass through)")
    args = parser.parse_args(argv)
    if args.real_models:
        import e2e_real_models
        forwarded = ["--sparq", args.sparq, "--models-dir", args.real_models, "--threads", str(args.threads),
                     "--rounds", str(max(args.repeats, 3))]
        return e2e_real_models.main(forwarded + (["--results", args.results] if args.results else []))
    try:
        return run(args, argv)
    except BenchError as e:
        print(f"e2e_vs_ort: error: {e}", file=sys.stderr)
        return 2


def run(args, argv) -> int:
    models = parse_list(args.models, MODELS, "models")
    variants = parse_list(args.variants, VARIANTS, "variants")
    try:
        batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        raise BenchError(f"--batches: {args.batches!r} is not a comma-separated list of integers")
    if any(b < 1 for b in batches) or args.threads < 1 or args.repeats < 1 or args.min_seconds < 0:
        raise BenchError("--batches, --threads and --repeats must be >= 1, --min-seconds >= 0")
    sparq = os.path.abspath(args.sparq)
    if not os.path.isfile(sparq) or not os.access(sparq, os.X_OK):
        raise BenchError(f"sparq binary not found or not executable: {sparq} (build it, or pass --sparq PATH)")
    try:
        import onnxruntime
    except ImportError as e:
        raise BenchError(f"onnxruntime is not installed ({e}); see tools/requirements.txt")

    work = os.path.abspath(args.work_dir)
    for sub in ("data", "models", "outputs"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    models_dir = os.path.abspath(args.models_dir or os.path.join(work, "models"))
    if args.models_dir is None:
        proc = subprocess.run([sys.executable, os.path.join(TOOLS, "make_test_models.py"), models_dir],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise BenchError(f"tools/make_test_models.py {models_dir} failed:\n{tail(proc.stdout + proc.stderr)}")
    for name in models:
        if not os.path.isfile(os.path.join(models_dir, name + ".onnx")):
            raise BenchError(f"{models_dir} has no {name}.onnx (run tools/make_test_models.py {models_dir})")

    rows, notes = [], []
    load_start = os.getloadavg()[0]
    build_start = build_files(sparq)
    for name in models:
        print(f"== {name}", flush=True)
        data = make_data(models_dir, name, work)
        for variant in variants:
            label = VARIANTS[variant][0]
            try:
                model = make_variant(sparq, models_dir, name, variant, data, work, args.rebuild_models)
            except RuntimeError as e:
                print(f"   {variant}: {e}", flush=True)
                notes.append(f"{name} {label}: making the model failed: {one_line(str(e))}")
                rows += [{"model": name, "variant": variant, "label": label, "batch": b, "error": "sparq run"}
                         for b in batches]
                continue
            zeros = weight_sparsity(sparq, model)
            for batch in batches:
                rows.append(dict(measure(sparq, model, name, variant, data, batch, args, work, notes),
                                 weight_sparsity=zeros))

    if build_files(sparq) != build_start:
        notes.append(f"the sparq build ({', '.join(build_start)}) changed while this ran: rows may come from "
                     "different builds; run again on a build nobody is writing")
    notes += constant_output_notes(rows)
    meta = {
        "machine": machine(), "load": (load_start, os.getloadavg()[0]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "ort": onnxruntime.__version__, "numpy": np.__version__, "sparq": args.sparq,
        "git": binary_version(sparq, build_start),
        "command": "python3 " + " ".join([os.path.relpath(os.path.abspath(__file__), REPO)] +
                                         (argv if argv is not None else sys.argv[1:])),
        "threads": args.threads, "min_seconds": args.min_seconds, "repeats": args.repeats, "batches": batches,
        "models": models,
        "notes": notes,
    }
    with open(os.path.join(work, "e2e_results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    section = markdown(rows, meta)
    print()
    print(section)
    if args.results:
        write_section(args.results, SECTION, section)
        print(f"wrote {args.results}")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
