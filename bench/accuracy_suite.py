#!/usr/bin/env python3
"""Accuracy on the real-model suite: sparq's variants vs onnxruntime's quantizers.

For each model that tools/make_real_suite.py built (FP32 model, calibration
and evaluation splits, meta.json with the task), on the same data:

  sparq max / kl / percentile / mse   `sparq run`: INT8 QDQ, per-channel
                                      symmetric int8 weights, symmetric int8
                                      activations, that calibration method,
                                      no fallback
  sparq <method> + fallback           `sparq run`, that method (--fallback-methods,
                                      default KL) as above with the accuracy
                                      fallback on, gated on the calibration
                                      split (not the evaluation split) by the
                                      task's gate (FALLBACK_GATES); only for
                                      tasks that have one
  sparq int8 default recipe (search)  `sparq run`, a quantize section with no
                                      calibration keys (quantize.search
                                      chooses, scored by the task's
                                      evaluate.metric), fallback off
  sparq default recipe, whole         `sparq run` of what a new user writes:
                                      model, data (calibration, the
                                      evaluation split, meta.json's pinned
                                      constants), evaluate.metric of the
                                      task (sqnr: min_sqnr_db 30, the floor
                                      sparq's error message suggests; dense
                                      maps with --dense-map-metric map_iou:
                                      map_iou at meta.json's threshold, its
                                      default gate); no quantize section:
                                      search, gate and fallback with
                                      sparq's defaults
  sparq fp16                          `sparq run`, precision fp16
  sparq 2:4 + int8 (<method>)         `sparq run`, prune 2:4 (50%) with
                                      recovery, then INT8 as above
  sparq 2:4, block reconstruction     (--prune-variants 2:4,2:4b) the same
    + int8 (<method>)                 with prune.reconstruction block after
                                      the least squares
  sparq 2:4, N steps distilled        (--prune-variants 2:4d; also uniform50d, ...)
    + int8 (<method>)                 progressive (schedule linear,
                                      --distill-steps), tools/retrain_distill.py
                                      as prune.retrain after each step's least
                                      squares, the dense model its teacher,
                                      --distill-args its options
  sparq 2:4, OBS + int8 (<method>)    (--prune-variants 2:4o; also uniform50o,
                                      auto50o) prune.recovery_method obs:
                                      the mask chosen again with the
                                      inverse Hessian (SparseGPT), then
                                      the least squares
  sparq P% uniform / auto + int8      (--prune-variants uniform50,auto50)
                                      unstructured, every layer at P% or
                                      P% overall allocated by the
                                      sensitivity scan (prune.allocation)
  ORT static MinMax / Entropy /       onnxruntime.quantization.quantize_static:
  Percentile [+ pre-process]          QDQ, per_channel=True, its default
                                      types (QInt8 activations with a zero
                                      point, QInt8 weights); "+ pre-process":
                                      on the output of quant_pre_process
  ORT dynamic                         quantize_dynamic (QInt8 weights)

Every written model then runs in onnxruntime (CPU) over the evaluation split
and is compared with the FP32 model's outputs there, by the task metric of
meta.json (tools/real_suite_metrics.py): top-1 agreement and top-5 overlap
(classifier), cosine of the sentence embeddings and Spearman of the pair
similarities against the graded pair scores (text), FP32 boxes matched at
IoU 0.5 after NMS and score drift (detector), character error rate of CTC
greedy decoding against FP32's reading (recognizer), IoU of the binarized
probability maps (dense map), speech decisions at meta.json's threshold
agreeing with FP32's and the mean / max probability change (vad); plus the
output SQNR. Inputs stored samples-first but declared with the batch on
another axis (meta.json "batch_axis", a recurrent state [2, batch, 128]) are
moved there for onnxruntime, and pinned inputs ("constants", a sample rate)
are fed to it and written as data.constants in sparq's recipes. One runtime for all
variants, so the numbers compare the quantized files, not the executors.

Timed: sparq = the `sparq run` process wall time minus its evaluation stages
(report.json "seconds"; it evaluates 2 samples only); ORT = the quantize call
in a worker process after imports and data loading. Peak RSS: of each process
(GNU time's %M). Model size: the written .onnx file.

Writes bench/ACCURACY.md (or --md) and the raw numbers as JSON in --work.

Usage:
  python3 tools/make_real_suite.py --calib 256 --eval 200
  python3 bench/accuracy_suite.py --sparq build/bin/sparq [--suite build/models/real]
      [--models efficientnet_lite0,minilm_l6] [--calib 32] [--eval 64] [--md bench/ACCURACY.md]
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools"))

from quant_vs_ort import git_head, machine, measure, tail  # noqa: E402
import real_suite_metrics as M  # noqa: E402
from make_real_suite import ort_feed  # noqa: E402

SPARQ_METHODS = ("max", "kl", "percentile", "mse")
# The gate of the "+ fallback" variants per task: (evaluate.metric, evaluate.gate key, its value).
# The detector's is a floor on the output SQNR, whose box coordinates dominate
# it. sparq's box_recall gated on the calibration split passes at once (the
# calibration photos' own boxes survive; 48 of 53 on the evaluation photos),
# and a class_score_sqnr floor of 24 dB kept 50-51 of 53 (bench/ACCURACY.md,
# yolov8n_det): neither beats TASK_VARIANTS' static recipe.
# The 'd' prune variants' settings (--distill-steps / --distill-args / --distill-data).
PRUNE_EXTRA = []  # --prune-extra: lines of every pruned variant's prune block
DISTILL = {"steps": 3, "args": [], "data": "", "recovery": True}
PRUNE_EVAL = {"samples": 0}  # --prune-eval: the pruned variants' recipe evaluation (steps, allocation scan)
FALLBACK_GATES = {"classifier": ("agreement", "max_drop", 5), "ctc_recognizer": ("ctc_accuracy", "max_drop", 5),
                  "detector": ("sqnr", "min_sqnr_db", 35)}
NOTES = (
    "ORT static Entropy equals MinMax here: quantize_static builds the entropy calibrator with its defaults, "
    "num_bins=128 and num_quantized_bins=128 (onnxruntime/quantization/calibrate.py, create_calibrator), which "
    "leaves one candidate threshold, the whole histogram range; quantize_static's extra_options cannot change "
    "the bin counts (only CalibTensorRangeSymmetric, CalibMovingAverage, CalibPercentile, ...). On EfficientNet "
    "all 178 scales of the two files were checked equal.",
    "sparq 2:4 + int8: `prune.skip_first_last` keeps the first and last layers dense and depthwise / small "
    "layers cannot take 2:4, so the share of zero weights (the note) stays below the 50% asked; the run does "
    "not fail for it (issue 15 section 2, 'pruning on real models').",
    "MiniLM and onnxruntime's static quantizers: the exported BERT builds its additive attention mask from "
    "float32-min (-3.4e38, constant /bert/Constant_29); Entropy and Percentile then fail building histograms over a range "
    "numpy cannot bin, and MinMax quantizes those tensors to a useless scale (cosine 0.38). quantize_dynamic "
    "does not calibrate activations and is the ORT method that works there.",
    "yolov8n_det is nudenet's YOLOv8n, trained on 18 classes of people's body parts and faces: on the sample "
    "photos it finds few objects (see the FP32 boxes column), so one box is several points of the match "
    "rate; SQNR and score drift carry more of the signal there. A COCO detector whose weights ship inside a "
    "PyPI wheel was not found (ultralytics fetches its weights at run time, which the suite does not allow).",
    "YOLOv8's single output concatenates box coordinates (0-320 pixels) and class scores (0-1) in one tensor "
    "[N, 4 + C, anchors]: one activation scale for both leaves the scores a few quantization steps, so a "
    "variant can show a high SQNR (the coordinates dominate it) and still lose most boxes (ORT static). The "
    "box match rate is the metric to read.",
    "The PP-OCRv4 models ship at opset 12; sparq converts them to opset 13 for per-channel weights (said in "
    "report.json warnings). The recognizer's INT8 read nothing (CER 99-100%) while that conversion failed "
    "(libonnx's Softmax 12 -> 13 adapter needs a shape that shape inference cannot give after a Reshape to a "
    "computed shape) and its weights fell back to per tensor; sparq now rewrites such a Softmax itself. "
    "onnxruntime keeps opset 12 and, asked for per_channel=True, silently writes per-tensor scales (all 580 "
    "scales of its recognizer file are scalars).",
    "ppocr_rec, what is left: the first layers are the sensitive ones. Alone in INT8 (the rest float, KL "
    "scales) the first depthwise convolution (p2o.Conv.1) brings the output to 9.8 dB SQNR, the first Conv 11.1 dB, "
    "the next pointwise Conv 11.8 dB, a later one (p2o.Conv.4) 29.1 dB: the tensor between the first two (Conv + "
    "BatchNormalization) has per-channel ranges from 0.5 to 24, which one per-tensor activation scale serves "
    "badly (thresholds: max and KL 24.1, MSE 20.2, percentile 18.6). The fallback, ranking each layer alone, "
    "moves p2o.Conv.1 first; that one layer in FP32 takes KL from 11.5% to 3.3% CER.",
    "A variant with NaN/Inf in its outputs is reported as failed with the count of non-finite values.",
    "Sample counts are small (2 shared cores): one evaluation sample is 1.6 points of agreement at 64 samples.",
)
ORT_METHODS = ("MinMax", "Entropy", "Percentile")
# The recipe recommended per task (recipes/README.md), run besides the
# plain methods: (label, METHOD[:percentile][/asym]+quantize lines).
DETECTOR_FOUR_CONVS = r"/model\.0/conv/Conv|/model\.1/conv/Conv|/model\.2/cv1/conv/Conv|/model\.2/cv2/conv/Conv"
TASK_VARIANTS = {"detector": (
    ("percentile 99.9999, uint8 activations, first four convs fp16",
     "percentile:99.9999/asym+layers: [{match: '" + DETECTOR_FOUR_CONVS + "', precision: fp16}]"),)}


# ---------------------------------------------------------------------------
# Data.

def load_split(path, n):
    with np.load(path) as f:
        return {k: f[k][:n] for k in f.files}


def pack_sentences(calib, cls=101, sep=102):
    """Text calibration without padding: one more sample per sentence, its
    tokens followed by the next sentences' ([CLS] a [SEP] b [SEP] c ...), cut
    at the sequence length, the attention mask all ones. The suite's
    sentences are 11-17 tokens of 64, so most rows a layer is fitted on are
    padding, whose outputs the mean-pooled embedding never reads; packed
    samples give every row a real token in a real (if longer) context, as
    LLM calibration packs documents."""
    ids, mask = calib["input_ids"], calib["attention_mask"]
    n, length = ids.shape
    bodies = [[int(t) for t, m in zip(ids[i], mask[i]) if m and t not in (cls, sep)] for i in range(n)]
    packed = np.zeros_like(ids)
    for i in range(n):
        seq, j = [cls], i
        while len(seq) < length:
            seq += bodies[j % n] + [sep]
            j += 1
        seq = seq[:length - 1] + [sep]
        packed[i] = seq
    out = {k: np.concatenate([v, np.zeros_like(v) if k == "token_type_ids" else np.ones_like(v)])
           for k, v in calib.items() if k != "input_ids"}
    out["input_ids"] = np.concatenate([ids, packed])
    return out


def augment_calibration(calib, how):
    """--calib-augment: 'flip' adds each image mirrored left-right (NCHW, the
    last axis); 'pack' adds packed sentences (pack_sentences)."""
    if how == "flip":
        return {k: np.concatenate([v, v[..., ::-1]]) if v.ndim == 4 else np.concatenate([v, v])
                for k, v in calib.items()}
    if how == "pack":
        return pack_sentences(calib)
    return calib


def write_splits(model_dir, work, n_calib, n_eval, augment="", calib_file=""):
    """Writes the first n samples of each split into work; returns paths and arrays.
    `augment`: see augment_calibration (the calibration split only); `calib_file`:
    the calibration split's source instead of the suite's calib.npz (--calib-file)."""
    source = calib_file or os.path.join(model_dir, "calib.npz")
    calib = augment_calibration(load_split(source, n_calib), augment)
    evals = load_split(os.path.join(model_dir, "eval.npz"), n_eval)
    paths = {"calib": os.path.join(work, "calib.npz"), "eval": os.path.join(work, "eval.npz"),
             "eval_small": os.path.join(work, "eval_small.npz")}
    np.savez(paths["calib"], **calib)
    paths["calib_samples"] = len(next(iter(calib.values())))
    np.savez(paths["eval"], **evals)
    np.savez(paths["eval_small"], **{k: v[:2] for k, v in evals.items()})
    if PRUNE_EVAL["samples"]:  # --prune-eval: the first N calibration samples (no augmentation)
        paths["prune_eval"] = os.path.join(work, "prune_eval.npz")
        head = load_split(os.path.join(model_dir, "calib.npz"), PRUNE_EVAL["samples"])
        np.savez(paths["prune_eval"], **head)
    return paths, calib, evals


# ---------------------------------------------------------------------------
# Running onnxruntime on a written model.

def has_float8(path):
    """True when the model holds float8e4m3fn initializers (an FP8 Q/DQ file)."""
    import onnx

    return any(t.data_type == onnx.TensorProto.FLOAT8E4M3FN for t in onnx.load(path).graph.initializer)


def has_float16(path):
    """True when the model holds float16 initializers (an FP16 file)."""
    import onnx

    return any(t.data_type == onnx.TensorProto.FLOAT16 for t in onnx.load(path).graph.initializer)


def ort_crashes_loading(path, level="ORT_ENABLE_ALL"):
    """True when onnxruntime dies of a signal creating a session for `path`
    at `level`, probed in a child process: onnxruntime 1.32 segfaults at
    ORT_ENABLE_ALL on a float16 Transpose feeding a MatMul with a constant
    weight (madmom_onsets' FP16 file, bench/ACCURACY.md) instead of raising,
    which would take this whole run down."""
    code = ("import sys, onnxruntime as ort\n"
            "o = ort.SessionOptions()\n"
            "o.log_severity_level = 3\n"
            "o.graph_optimization_level = getattr(ort.GraphOptimizationLevel, sys.argv[2])\n"
            "ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])\n")
    proc = subprocess.run([sys.executable, "-c", code, path, level], capture_output=True, timeout=600)
    return proc.returncode < 0


def ort_run(path, feeds, output, batch=16, level=None, layout=None):
    """`level`: an onnxruntime GraphOptimizationLevel name; default ORT_ENABLE_ALL,
    but ORT_DISABLE_ALL for FP8 files: onnxruntime 1.32's optimizers mishandle
    float8 Q/DQ (its Clip -> QuantizeLinear fusion throws on a float8 zero
    point; with ORT_ENABLE_ALL the outputs of PP-OCR's files drift far from
    ONNX's semantics, bench/ACCURACY.md "FP8 E4M3"). `layout`: meta.json's
    "batch_axis" and "constants" (make_real_suite.ort_feed): inputs whose
    samples are stored first but live on another axis, inputs pinned to a
    value."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if level is None:
        level = "ORT_DISABLE_ALL" if has_float8(path) else "ORT_ENABLE_ALL"
    opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    n = len(next(iter(feeds.values())))
    outs = []
    for i in range(0, n, batch):
        feed = ort_feed({k: v for k, v in feeds.items() if k in names}, i, i + batch, layout)
        # A pinned input that decided an If is no longer an input of sparq's files (folded).
        feed = {k: v for k, v in feed.items() if k in names}
        outs.append(sess.run([output], feed)[0])
    return np.concatenate(outs)


def sqnr_db(ref, out):
    ref, out = ref.astype(np.float64), out.astype(np.float64)
    noise = np.sum((ref - out) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref ** 2) / noise))


def task_metrics(meta, ref, out):
    """The task metrics of `out` against the FP32 outputs `ref` (dict; the
    primary one first)."""
    if not np.all(np.isfinite(out)):
        bad = int(np.sum(~np.isfinite(out)))
        return {"error": f"{bad} of {out.size} outputs are NaN/Inf"}
    task = meta["task"]
    r = {}
    if task == "classifier":
        r["top-1 agreement %"] = 100 * M.top1_agreement(ref, out)
        r["top-5 overlap %"] = 100 * M.top_k_overlap(ref, out, 5)
    elif task == "text_embedding":
        cos = M.row_cosines(ref, out)
        pairs = [p for p in meta["pairs"] if p[0] < len(out) and p[1] < len(out)]
        scores = [p[2] for p in pairs]
        r["cosine (mean)"] = float(np.mean(cos))
        r["cosine (min)"] = float(np.min(cos))
        r["Spearman"] = M.spearman(M.pair_similarities(out, pairs), scores)
        r["Spearman - FP32"] = r["Spearman"] - M.spearman(M.pair_similarities(ref, pairs), scores)
    elif task == "embedding":  # a feature map that later layers read (DeepFilterNet's encoder)
        cos = M.row_cosines(ref, out)
        r["cosine (mean)"] = float(np.mean(cos))
        r["cosine (min)"] = float(np.min(cos))
    elif task == "detector":
        d = meta["decode"]
        m = M.detection_metrics(ref, out, d["score_threshold"], d["nms_iou"])
        r["FP32 boxes matched %"] = 100 * m["box_recall"]
        r["precision %"] = 100 * m["box_precision"]
        r["score drift"] = m["score_drift"]
        r["FP32 boxes"] = m["fp32_boxes"]
    elif task == "ctc_recognizer":
        r["CER vs FP32 %"] = 100 * M.character_error_rate(M.ctc_greedy_decode(ref, meta["blank"]),
                                                          M.ctc_greedy_decode(out, meta["blank"]))
    elif task == "dense_map":
        r["map IoU %"] = 100 * M.binary_map_iou(ref, out, meta["threshold"])
    elif task == "vad":
        r["decisions agree %"] = 100 * M.decision_agreement(ref, out, meta["threshold"])
        r["mean abs change of p"] = float(np.mean(np.abs(ref.astype(np.float64) - out)))
        r["max abs change of p"] = float(np.max(np.abs(ref.astype(np.float64) - out)))
    r["SQNR dB"] = sqnr_db(ref, out)
    return r


# ---------------------------------------------------------------------------
# Variants.

def recipe_constants(constants):
    """data.constants lines for meta.json's {"name": [value, dtype]}."""
    if not constants:
        return ""
    return "  constants:\n" + "".join(f"    {k}: {v[0]}\n" for k, v in constants.items())


def map_threshold_line(metric, map_threshold):
    """evaluate.threshold of metric map_iou: meta.json's threshold (the one the suite measures at)."""
    return f"  threshold: {map_threshold}\n" if metric == "map_iou" and map_threshold is not None else ""


def calibration_samples_line(paths):
    """data.calibration_samples: 0 (all) when the calibration split holds more
    than sparq's default cap (512), which would otherwise take only its first
    512; nothing otherwise, so the recipes of the earlier rows keep their text."""
    n = paths.get("calib_samples", 0)
    return "  calibration_samples: 0\n" if n > 512 else ""


def whole_default_recipe(model, paths, out_dir, metric, constants=None, evaluate_lines="", map_threshold=None):
    """What a new user writes: the model, the data (calibration and the
    evaluation split, which the gate and fallback then read), and the
    task's metric; no quantize section, so sparq searches, gates and falls
    back with its defaults. Embeddings take mean_cosine (its default gate:
    0.99). A value metric (sqnr) needs a floor: the one sparq's error
    message suggests (min_sqnr_db: 30). `evaluate_lines`: more evaluate
    keys (the detector's NMS IoU as the suite decodes)."""
    metric = "mean_cosine" if metric == "cosine" else metric
    gate = "  gate:\n    min_sqnr_db: 30\n" if metric == "sqnr" else ""
    return ("version: 1\n"
            f"model: {model}\n"
            "data:\n"
            f"  calibration: {paths['calib']}\n"
            f"  evaluation: {paths['eval']}\n"
            "  batch_size: 8\n" + recipe_constants(constants) +
            f"output:\n  dir: {out_dir}\n  overwrite: true\n"
            f"evaluate:\n  metric: {metric}\n" + map_threshold_line(metric, map_threshold) + evaluate_lines + gate +
            "report:\n  markdown: ''\n  junit: ''\n")


def sparq_recipe(model, paths, out_dir, quant, prune, metric, gate=None, constants=None, evaluate_lines="",
                 output=None, map_threshold=None):
    """`gate`: (metric, gate key, value) of the fallback variant, gated on
    the calibration split; None: fallback off, no gate, 2 evaluation samples.
    `constants`: meta.json's pinned inputs (data.constants)."""
    if quant == "whole":
        return whole_default_recipe(model, paths, out_dir, metric, constants,
                                    evaluate_lines + (f"  output: {output}\n" if output else ""), map_threshold)
    text = ("version: 1\n"
            f"model: {model}\n"
            "data:\n"
            f"  calibration: {paths['calib']}\n"
            f"  evaluation: {paths['calib'] if gate else paths.get('prune_eval', paths['eval_small']) if prune else paths['eval_small']}\n"
            "  batch_size: 8\n" + calibration_samples_line(paths) + recipe_constants(constants))
    if prune:  # True / "2:4": 2:4; "uniform<P>" / "auto<P>": unstructured P% with that allocation
        distill = prune is not True and prune.endswith("d")  # "...d": progressive, distilled between steps
        prune = prune[:-1] if distill else prune
        obs = prune is not True and prune.endswith("o")  # "...o": prune.recovery_method obs (SparseGPT-style)
        prune = prune[:-1] if obs else prune
        recovery = "true" if not distill or DISTILL["recovery"] else "false"
        text += f"prune:\n  enabled: true\n  recovery: {recovery}\n"
        if obs:
            text += "  recovery_method: obs\n"
        if prune is True or prune in ("2:4", "2:4b"):
            text += "  structure: \"2:4\"\n"
            if prune == "2:4b":  # then block reconstruction, the defaults (prune.reconstruction)
                text += "  reconstruction: {method: block}\n"
        else:
            allocation = "auto" if prune.startswith("auto") else "uniform"
            scan_recovery = prune.endswith("r")  # auto<P>r: the scan re-fits each layer (sensitivity.recovery)
            text += (f"  structure: unstructured\n  sparsity: {int(prune[len(allocation):].rstrip('r')) / 100}\n"
                     f"  allocation: {allocation}\n" +
                     ("  sensitivity: {recovery: true}\n" if scan_recovery else ""))
        text += "".join(f"  {l.strip()}\n" for l in PRUNE_EXTRA if l.strip())  # --prune-extra
        if distill:  # tools/retrain_distill.py after each step, the dense model its teacher
            command = [sys.executable, os.path.join(REPO, "tools", "retrain_distill.py"), "--teacher", model,
                       "{model_in}", "{masks}", "{model_out}", "--data", "{data}", "--step", "{step}"]
            command += DISTILL["args"]
            text += (f"  schedule: linear\n  steps: {DISTILL['steps']}\n"
                     f"  retrain:\n    command: {json.dumps(command)}\n    timeout: 36000\n" +
                     (f"    data: {DISTILL['data'].replace('<model>', os.path.basename(os.path.dirname(model)))}\n"
                      if DISTILL["data"] else ""))
    if quant == "fp16":
        text += "quantize:\n  precision: fp16\n  fallback:\n    enabled: false\n"
    elif quant == "default":  # no calibration keys: quantize.search chooses (sparq/search.h)
        text += "quantize:\n  precision: int8\n  fallback:\n    enabled: false\n"
    elif quant == "dynamic":  # activations quantized at run time (MatMul/Gemm), as ORT's quantize_dynamic
        text += "quantize:\n  precision: int8\n  mode: dynamic\n  per_channel: true\n  fallback:\n    enabled: false\n"
    else:  # a calibration method, then "+bc" (quantize.bias_correction) or "+" lines of the quantize block
        method, _, extra = quant.partition("+")
        lines = ["bias_correction: true"] if extra == "bc" else [l for l in extra.split(";") if l]
        method, _, asym = method.partition("/")  # "max/asym": uint8 activations with a zero point
        method, _, pct = method.partition(":")  # "percentile:99.9999": that percentile
        precision = next((l for l in lines if l.startswith("precision:")), "precision: int8")  # "precision: fp8"
        lines = [l for l in lines if l != precision]
        text += ("quantize:\n  " + precision + "\n  per_channel: true\n" + "".join("  " + l + "\n" for l in lines) +
                 f"  calibration:\n    method: {method}\n" + (f"    percentile: {pct}\n" if pct else "") +
                 f"    symmetric: {'false' if asym == 'asym' else 'true'}\n"
                 f"  fallback:\n    enabled: {'true' if gate else 'false'}\n")
    metric, gate_key, gate_value = gate or (metric, "max_drop", 1000000)
    text += (f"output:\n  dir: {out_dir}\n  format: {'fp16' if quant == 'fp16' else 'qdq'}\n  overwrite: true\n"
             f"evaluate:\n  metric: {metric}\n" + map_threshold_line(metric, map_threshold) +
             (f"  output: {output}\n" if output else "") +
             f"  gate:\n    {gate_key}: {gate_value}\n"
             "report:\n  markdown: ''\n  junit: ''\n")
    return text


def run_sparq(sparq, model, paths, work, label, quant, prune, metric, gate=None, constants=None, evaluate_lines="",
              output=None, map_threshold=None):
    out_dir = os.path.join(work, re.sub(r"[^\w.-]", "", label.replace(" ", "_")))
    recipe_path = out_dir + ".yaml"
    with open(recipe_path, "w") as f:
        f.write(sparq_recipe(model, paths, out_dir, quant, prune, metric, gate, constants, evaluate_lines, output,
                             map_threshold))
    m = measure([sparq, "run", recipe_path], out_dir + ".log")
    m["command"] = f"sparq run {os.path.basename(recipe_path)}"
    written = [f for f in os.listdir(out_dir) if f.endswith(".onnx")] if os.path.isdir(out_dir) else []
    if m["rc"] not in (0, 1) or not written:
        m["error"] = f"sparq exited {m['rc']}: " + " ".join(tail(m["log"], 3).split())[-300:]
        return m
    with open(os.path.join(out_dir, "report.json")) as f:
        report = json.load(f)
    seconds = report.get("seconds", {})
    m["time_s"] = m["wall_s"] - sum(v for k, v in seconds.items() if k.startswith("evaluate"))
    m["model"] = os.path.join(out_dir, written[0])
    if prune:
        m["note"] = sparsity_note(m["model"])
    elif quant in ("default", "whole"):
        m["note"] = search_note(report, quant == "whole")
    return m


def search_note(report, whole):
    """What a default recipe chose (report.json): the search's candidate;
    with `whole` (fallback and gate on) also the layers the fallback moved
    and the gate's verdict on the evaluation split."""
    parts = []
    chosen = [c for c in report.get("search") or [] if c.get("chosen")]
    if chosen:
        c = chosen[0]
        parts.append(f"search chose {c['candidate']} (held-out {c['metric']} {fmt(c.get('held_out_score'))}, "
                     f"{sum(1 for x in report['search'] if x.get('tried'))} candidates tried)")
    if whole:
        moved = [f for f in report.get("fallback") or [] if f.get("kept")]
        to = "/".join(sorted({f["to"] for f in moved}))
        parts.append(f"fallback moved {len(moved)} layer(s)" + (f" to {to}" if to else ""))
        gate = report.get("gate") or {}
        if gate.get("checks"):
            parts.append(("sparq's gate PASS: " if gate.get("passed") else "sparq's gate FAIL (exit 1): ") +
                         "; ".join(c["text"] for c in gate["checks"]))
    return "; ".join(parts)


INTEGER_OPS = ("QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "QLinearConv",
               "QLinearMatMul", "MatMulNBits")


def int8_op_count(path):
    """Nodes of the main graph that compute in integers (activation Q/DQ,
    integer MatMul/Conv): 0 means the file is still a float model (every
    quantizable op inside an If branch, or none that the mode quantizes)."""
    import onnx

    return sum(1 for n in onnx.load(path).graph.node if n.op_type in INTEGER_OPS)


def sparsity_note(path):
    """Share of zero weights among the Conv/Gemm/MatMul weight initializers."""
    import onnx
    from onnx import numpy_helper

    g = onnx.load(path).graph
    inits = {i.name: i for i in g.initializer}
    producers = {o: n for n in g.node for o in n.output}
    zeros = total = 0
    for n in g.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul") or len(n.input) < 2:
            continue
        name = n.input[1]
        if name not in inits and name in producers and producers[name].op_type == "DequantizeLinear":
            name = producers[name].input[0]
        if name in inits:
            w = numpy_helper.to_array(inits[name])
            zeros += int(np.sum(w == 0))
            total += w.size
    return f"{100 * zeros / max(total, 1):.1f}% of weights zero"


def run_ort(model, paths, work, label, mode, method, calib_n):
    out = os.path.join(work, "ort_" + label.replace(" ", "_").replace("+", "pre") + ".onnx")
    result_path = out + ".json"
    cmd = [sys.executable, os.path.abspath(__file__), "--ort-worker", mode, method, model, paths["calib"], out,
           result_path]
    m = measure(cmd, out + ".log", 16 * 2 ** 30)
    if mode == "static":
        m["command"] = (f"quantize_static(model, out, reader({calib_n} samples, batch 8), "
                        f"quant_format=QDQ, per_channel=True, calibrate_method=CalibrationMethod.{method})")
    else:
        m["command"] = "quantize_dynamic(model, out, weight_type=QInt8)"
    if m["rc"] != 0:
        text = tail(m["log"], 6)
        m["error"] = ("out of memory" if "MemoryError" in text or "bad_alloc" in text else f"exit {m['rc']}") + \
            ": " + " ".join(text.split())[-300:]
        return m
    with open(result_path) as f:
        m.update(json.load(f))
    m["model"] = out
    return m


def ort_worker(mode, method, model, calib_path, out, result_path):
    """Runs in its own process: quantize_static / quantize_dynamic, timed."""
    os.chdir(os.path.dirname(os.path.abspath(out)))  # quant_pre_process leaves temporary files in the cwd
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)

    with np.load(calib_path) as f:
        data = {k: f[k] for k in f.files}
    n = len(next(iter(data.values())))
    layout_path = os.path.join(os.path.dirname(os.path.abspath(calib_path)), "layout.json")
    layout = {}
    if os.path.isfile(layout_path):
        with open(layout_path) as f:
            layout = json.load(f)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.start = 0

        def get_next(self):
            if self.start >= n:
                return None
            feed = ort_feed(data, self.start, self.start + 8, layout)
            self.start += 8
            return feed

    start, cpu_start = time.perf_counter(), time.process_time()
    if mode == "static":
        quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        calibrate_method=getattr(CalibrationMethod, method))
    elif mode == "dynamic":
        quantize_dynamic(model, out, weight_type=QuantType.QInt8)
    elif mode == "preprocess":
        from onnxruntime.quantization.shape_inference import quant_pre_process
        quant_pre_process(model, out)
    with open(result_path, "w") as f:
        json.dump({"time_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu_start}, f)
    return 0


# ---------------------------------------------------------------------------
# One model.

def sparq_metric_for(task):
    """sparq's label-free metric for the task: what the search scores
    candidates by on held-out calibration batches, and what a user's recipe
    would name (recipes/README.md)."""
    return {"classifier": "agreement", "text_embedding": "cosine", "embedding": "cosine", "detector": "box_recall",
            "ctc_recognizer": "ctc_accuracy"}.get(task, "sqnr")  # vad, dense_map: sqnr


def sparq_metric_of(args, meta):
    """sparq_metric_for(task), but a dense map's with --dense-map-metric map_iou:
    the thresholded map IoU at meta.json's threshold (evaluate.threshold)."""
    if meta["task"] == "dense_map" and args.dense_map_metric == "map_iou":
        return "map_iou"
    return sparq_metric_for(meta["task"])


def run_model(args, name, save):
    """Runs every variant on one model; `save(result)` is called after each
    variant with the rows so far (marked partial until the last)."""
    model_dir = os.path.join(args.suite, name)
    with open(os.path.join(model_dir, "meta.json")) as f:
        meta = json.load(f)
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    model = os.path.join(model_dir, "model.onnx")
    # The output the suite measures, named to sparq (evaluate.output) when the
    # model has several: what a user of such a model would write.
    import onnx
    graph_outputs = [o.name for o in onnx.load(model, load_external_data=False).graph.output]
    primary_output = meta["output"] if len(graph_outputs) > 1 and meta.get("output") in graph_outputs else None
    n_eval = args.eval if meta["task"] != "text_embedding" else max(args.eval, len(meta["sentences"]))
    paths, calib, evals = write_splits(model_dir, work, args.calib, n_eval, args.calib_augment,
                                       args.calib_file.replace("<model>", name) if args.calib_file else "")
    n_calib = len(next(iter(calib.values())))
    n_eval = len(next(iter(evals.values())))
    print(f"== {name}: {n_calib} calibration, {n_eval} evaluation samples", flush=True)
    layout = {k: meta[k] for k in ("batch_axis", "constants") if k in meta}
    with open(os.path.join(work, "layout.json"), "w") as f:  # read by the ORT worker's calibration reader
        json.dump(layout, f)
    ref = ort_run(model, evals, meta["output"], layout=layout)
    rows = [{"variant": "FP32", "size_mib": os.path.getsize(model) / 2 ** 20,
             "metrics": task_metrics(meta, ref, ref)}]
    result = {"name": name, "meta": {k: meta[k] for k in ("task", "source", "preprocess", "data", "metric")},
              "calib": n_calib, "eval": n_eval, "rows": rows,
              "command": "python3 bench/accuracy_suite.py " + " ".join(sys.argv[1:])}

    variants = [(f"sparq int8 {m}", "sparq", (m, False)) for m in SPARQ_METHODS if m in args.sparq_methods]
    variants += [(f"sparq int8 {m} + bias correction", "sparq", (m + "+bc", False)) for m in args.bias_correction if m]
    # quantize.rounding adaround (sparq/adaround.h), alone and with bias correction
    variants += [(f"sparq int8 {m} + adaround", "sparq", (m + "+rounding: adaround", False)) for m in args.adaround if m]
    variants += [(f"sparq int8 {m} + adaround + bias correction", "sparq",
                  (m + "+rounding: adaround;bias_correction: true", False)) for m in args.adaround if m]
    variants += [("sparq int8 " + label, "sparq", (spec, False)) for label, spec in TASK_VARIANTS.get(meta["task"], ())]
    variants.append(("sparq int8 default recipe (search)", "sparq", ("default", False)))
    variants.append(("sparq default recipe, whole (search, gate, fallback)", "sparq", ("whole", False)))
    for v in args.variant:  # LABEL=METHOD+line;line
        label, spec = v.split("=", 1)
        variants.append(("sparq int8 " + label, "sparq", (spec, False)))
    if meta["task"] in FALLBACK_GATES:
        variants += [(f"sparq int8 {m} + fallback", "sparq", (m, False, FALLBACK_GATES[meta["task"]]))
                     for m in args.fallback_methods if m]
        variants += [(f"sparq int8 {m} + bias correction + fallback", "sparq", (m + "+bc", False, FALLBACK_GATES[meta["task"]]))
                     for m in args.bias_correction if m]
    variants += [(f"sparq fp8 {m}", "sparq", (m + "+precision: fp8", False)) for m in args.fp8_methods if m]
    variants.append(("sparq int8 dynamic", "sparq", ("dynamic", False)))
    variants.append(("sparq fp16", "sparq", ("fp16", False)))
    for p in args.prune_variants:
        q = p[:-1] if p.endswith("d") else p
        obs = q.endswith("o")
        q = q[:-1] if obs else q
        label = "2:4" if q == "2:4" else "2:4, block reconstruction" if q == "2:4b" else (
            f"{q[4:].rstrip('r')}% auto" + (", scan with recovery" if q.endswith("r") else "")
            if q.startswith("auto") else f"{q[7:]}% uniform")
        if obs:
            label += ", OBS"
        if p.endswith("d"):
            label += f", {DISTILL['steps']} steps distilled"
        variants.append((f"sparq {label} + int8 {args.prune_method}", "sparq", (args.prune_method, p)))
    pre = os.path.join(work, "model_pre.onnx")
    for method in ORT_METHODS:
        variants.append((f"ORT static {method}", "ort", ("static", method, model)))
    variants.append(("ORT pre-process", "pre", None))
    for method in ORT_METHODS:
        variants.append((f"ORT static {method} + pre-process", "ort", ("static", method, pre)))
    variants.append(("ORT dynamic", "ort", ("dynamic", "-", model)))

    pre_error = None
    wanted = [v for v in variants if not args.only or any(s in v[0] for s in args.only.split(","))]
    needs_pre = any(v[1] == "ort" and v[2][2] == pre for v in wanted)
    for label, tool, spec in variants:
        if tool == "pre":
            if not needs_pre:
                continue
            print(f"   {label} ...", flush=True)
            r = run_ort(model, paths, work, label, "preprocess", "-", n_calib)
            if "error" in r:
                pre_error = r["error"]
                print(f"      failed: {pre_error}", flush=True)
            else:
                os.replace(r["model"], pre)
                print(f"      {r['time_s']:.1f} s", flush=True)
            continue
        if (label, tool, spec) not in wanted:
            continue
        print(f"   {label} ...", flush=True)
        if tool == "sparq":
            r = run_sparq(args.sparq, model, paths, work, label, spec[0], spec[1], sparq_metric_of(args, meta),
                          spec[2] if len(spec) > 2 else None, meta.get("constants"),
                          f"  box_nms_iou: {meta['decode']['nms_iou']}\n" if "decode" in meta else "",
                          primary_output, meta.get("threshold"))
        else:
            if spec[2] == pre and pre_error:
                rows.append({"variant": label, "error": "quant_pre_process failed: " + pre_error})
                continue
            r = run_ort(spec[2], paths, work, label, spec[0], spec[1], n_calib)
        row = {"variant": label, "time_s": r.get("time_s"), "peak_rss_mib": r.get("peak_rss_mib"),
               "command": r.get("command"), "note": r.get("note", "")}
        if "error" in r:
            row["error"] = r["error"]
        else:
            row["size_mib"] = os.path.getsize(r["model"]) / 2 ** 20
            row["int8_ops"] = int8_op_count(r["model"])
            if row["int8_ops"] == 0 and label != "sparq fp16":
                row["note"] = "; ".join(x for x in ("nothing quantized: no integer op in the file", row["note"]) if x)
            level = None
            if has_float16(r["model"]) and ort_crashes_loading(r["model"]):
                level = "ORT_ENABLE_BASIC"
                row["note"] = "; ".join(x for x in ("onnxruntime crashes (a signal) loading this file at "
                                                    "ORT_ENABLE_ALL: run at ORT_ENABLE_BASIC", row["note"]) if x)
            try:
                out = ort_run(r["model"], evals, meta["output"], level=level, layout=layout)
                mets = task_metrics(meta, ref, out)
                if "error" in mets:
                    row["error"] = mets["error"]
                else:
                    row["metrics"] = mets
            except Exception as e:  # a model onnxruntime cannot load or run
                row["error"] = "onnxruntime cannot run it: " + " ".join(str(e).split())[:300]
        print(f"      {row.get('metrics', row.get('error'))}, {row.get('time_s') or 0:.1f} s, "
              f"{row.get('peak_rss_mib') or 0:.0f} MiB", flush=True)
        rows.append(row)
        save(dict(result, partial=True))
    return result


# ---------------------------------------------------------------------------
# Report.

def fmt(v):
    if v is None:
        return ""
    if isinstance(v, int):
        return str(v)
    if abs(v) >= 100 or v == 0:
        return f"{v:.1f}"
    return f"{v:.4f}" if abs(v) < 2 else f"{v:.2f}"


def fmt1(v, digits=1):
    return "" if v is None else f"{v:.{digits}f}"


def markdown(results, info):
    lines = ["# Accuracy on real pretrained models", "",
             "Written by `bench/accuracy_suite.py` (do not edit by hand). The suite is built by "
             "`tools/make_real_suite.py` from PyPI wheels that carry pretrained weights; the data are real "
             "photos (scikit-image / scikit-learn samples with crops, flips and scales), real sentences "
             "(tools/real_suite_data/) and text rendered from them; calibration and evaluation splits are "
             "disjoint.", "",
             f"- Machine: {info['machine']} (shared with other jobs: timings are indicative)",
             f"- Date: {info['date']}; sparq at {info['git']}; onnxruntime {info['ort']}, torch {info['torch']}",
             f"- Commands: `{info['make']}` (the suite), then `bench/accuracy_suite.py` as given per model",
             "- Metrics: every written model runs in onnxruntime (CPU) on the evaluation split and is compared "
             "with the FP32 model there (tools/real_suite_metrics.py). Classifier: top-1 agreement and top-5 "
             "overlap with FP32. Text: cosine of the pooled sentence embeddings with FP32, Spearman of the pair "
             "cosine similarities against graded pair scores (paraphrase 5, same topic 2, unrelated 0) and its "
             "change from FP32. Detector: YOLOv8 decoding (score >= 0.25, class-agnostic NMS at 0.45), FP32 boxes "
             "matched at IoU 0.5 by the same class, precision, mean |score drift| of the matches. Recognizer: "
             "character error rate of CTC greedy decoding against FP32's reading. Dense map: IoU of the maps "
             "binarized at meta.json's threshold (0.3). VAD: share of speech / no-speech decisions (probability "
             ">= 0.5) equal to FP32's, mean and max |probability change|. SQNR: of the output against FP32.",
             "- Time: sparq = `sparq run` wall time minus its evaluation stages (load, prune, calibrate, quantize, "
             "write); ORT = the quantize_static / quantize_dynamic call in a worker process. Peak RSS: of the "
             "process (GNU time %M; the ORT worker includes Python and onnxruntime). Size: the .onnx file.",
             "- sparq INT8: QDQ, per-channel symmetric int8 weights, symmetric int8 activations, fallback off. "
             "ORT static: QDQ, per_channel=True, its default QInt8 activations (with a zero point) and weights; "
             "`+ pre-process` quantizes the output of `quant_pre_process` (symbolic shape inference + ORT "
             "graph optimization).",
             ""]
    for res in results:
        meta = res["meta"]
        metric_names = []
        for row in res["rows"]:
            for k in row.get("metrics", {}):
                if k not in metric_names:
                    metric_names.append(k)
        partial = ["", "**Partial**: the run was stopped before the remaining variants (time)."] \
            if res.get("partial") else []
        lines += [f"## {res['name']} ({meta['task']})", "",
                  f"- Source: " + "; ".join(f"{k}: {v}" for k, v in meta["source"].items()),
                  f"- Input: {meta['preprocess']}",
                  f"- Data: {meta['data']}; {res['calib']} calibration and {res['eval']} evaluation samples",
                  f"- Command: `{res.get('command', info['command'])}`",
                  "",
                  "| variant | " + " | ".join(metric_names) + " | size (MiB) | time (s) | peak RSS (MiB) | note |",
                  "|---|" + "---:|" * (len(metric_names) + 3) + "---|"]
        for row in res["rows"]:
            mets = row.get("metrics", {})
            note = row.get("error", "") and "**failed**: " + short_error(row["error"])
            note = "; ".join(x for x in (row.get("note", ""), note) if x)
            lines.append(f"| {row['variant']} | " + " | ".join(fmt(mets.get(k)) for k in metric_names) +
                         f" | {fmt1(row.get('size_mib'))} | {fmt1(row.get('time_s'))} | "
                         f"{fmt1(row.get('peak_rss_mib'), 0)} | {note.replace('|', '/')} |")
        best = best_of(res)
        if best:
            lines += ["", best]
        lines += partial
        lines.append("")
    lines += ["## Notes", ""]
    lines += [f"- {n}" for n in NOTES]
    lines += ["", "## Commands of the variants", ""]
    seen = set()
    for res in results:
        for row in res["rows"]:
            c = row.get("command")
            key = (row["variant"].split(" + pre")[0], c and c.split("(")[0])
            if c and row["variant"] not in seen:
                seen.add(row["variant"])
                lines.append(f"- {row['variant']}: `{c}`")
    lines.append("")
    lines.append("The sparq recipes and logs of the last run are in the work folder (`--work`).")
    return "\n".join(lines) + "\n"


def short_error(text):
    """The exception line of a Python traceback tail, else the text."""
    found = re.findall(r"(\w*(?:Error|Exception): .*?)(?= File \"|$)", text)
    return found[-1] if found else text


def best_of(res):
    """One line: the best sparq INT8 variant against the best ORT variant on the primary metric."""
    rows = [r for r in res["rows"] if "metrics" in r and r["variant"] != "FP32" and r.get("int8_ops") != 0]
    if not rows:
        return "No variant quantized anything (no integer op in any written file)."
    key = next(iter(rows[0]["metrics"]))
    lower_better = key.startswith("CER")
    sign = -1 if lower_better else 1
    sparq = [r for r in rows if r["variant"].startswith("sparq int8")]
    ort = [r for r in rows if r["variant"].startswith("ORT")]
    if not sparq or not ort:
        return ""
    bs = max(sparq, key=lambda r: sign * r["metrics"][key])
    bo = max(ort, key=lambda r: sign * r["metrics"][key])
    verdict = "at least as accurate" if sign * bs["metrics"][key] >= sign * bo["metrics"][key] else "BEHIND"
    line = (f"Best sparq INT8: {bs['variant']} ({key} {fmt(bs['metrics'][key])}); best ORT: {bo['variant']} "
            f"({fmt(bo['metrics'][key])}): sparq is {verdict}.")
    whole = [r for r in rows if r["variant"].startswith("sparq default recipe, whole")]
    if whole:
        w = whole[0]["metrics"][key]
        default = next((r for r in res["rows"] if r["variant"] == "ORT static MinMax"), {})
        d = fmt(default["metrics"][key]) if "metrics" in default else "failed"
        ahead = "at least as accurate as" if sign * w >= sign * bo["metrics"][key] else "BEHIND"
        line += (f" Default recipe (whole): {key} {fmt(w)}; onnxruntime's default (quantize_static, MinMax): {d}; "
                 f"the default recipe is {ahead} onnxruntime's best.")
    return line


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sparq", help="the sparq CLI binary")
    ap.add_argument("--suite", default=os.path.join(REPO, "build", "models", "real"),
                    help="tools/make_real_suite.py's output folder")
    ap.add_argument("--models", default="efficientnet_lite0,minilm_l6,yolov8n_det,ppocr_rec,ppocr_det")
    ap.add_argument("--calib", type=int, default=32, help="calibration samples (at most)")
    ap.add_argument("--calib-augment", default="", choices=("", "flip", "pack"),
                    help="add samples to the calibration split (after --calib takes its first N): flip (images "
                         "mirrored left-right), pack (text: the sentences packed into full sequences without "
                         "padding); both for pruning and INT8 calibration")
    ap.add_argument("--calib-file", default="",
                    help="the calibration split's .npz instead of the suite's calib.npz (<model> is replaced by the "
                         "model's name), e.g. tools/make_text_calib.py's sentences for minilm_l6; --calib takes its "
                         "first N. --prune-eval still reads the suite's calib.npz. Never the evaluation split")
    ap.add_argument("--eval", type=int, default=64, help="evaluation samples (text: all the sentences)")
    ap.add_argument("--sparq-methods", default=",".join(SPARQ_METHODS))
    ap.add_argument("--bias-correction", default="max",
                    help="calibration methods (comma) of extra INT8 variants with quantize.bias_correction on")
    ap.add_argument("--adaround", default="",
                    help="calibration methods (comma) of extra INT8 variants with quantize.rounding adaround "
                         "(alone and with bias correction)")
    ap.add_argument("--fallback-methods", default="kl",
                    help="calibration methods (comma) of the '+ fallback' variants (tasks with a fallback gate)")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL=METHOD+line;line: an extra INT8 variant 'sparq int8 LABEL', calibrated with METHOD "
                         "(METHOD/asym: uint8 activations), with these lines in its quantize block")
    ap.add_argument("--fp8-methods", default="",
                    help="calibration methods (comma) of FP8 E4M3 variants 'sparq fp8 METHOD' (quantize.precision fp8)")
    ap.add_argument("--prune-method", default="percentile", help="calibration of the pruned INT8 variant")
    ap.add_argument("--prune-variants", default="2:4",
                    help="pruned variants (comma): 2:4, 2:4b (2:4 with block reconstruction after the least "
                         "squares: prune.reconstruction), uniform<P> (unstructured, P%% in every pruned layer), "
                         "auto<P> (unstructured, P%% of the pruned layers' weights, allocation: auto), "
                         "auto<P>r (the same, the scan re-fitting each layer: sensitivity.recovery); a 'd' suffix "
                         "(2:4d, uniform50d): progressive (schedule linear, --distill-steps) with "
                         "tools/retrain_distill.py as prune.retrain after each step, the dense model its teacher; an 'o' suffix "
                         "before it (2:4o, uniform50o, auto50o, 2:4od): prune.recovery_method obs (SparseGPT-style "
                         "mask and update)")
    ap.add_argument("--prune-extra", default="",
                    help="lines (';'-separated) added to the prune block of every pruned variant, e.g. "
                         "\"schedule: linear;steps: 2\" (progressive, each step recovered before the next)")
    ap.add_argument("--prune-eval", type=int, default=0,
                    help="pruned variants only: the recipe's evaluation data (each step's evaluation and "
                         "allocation: auto's sensitivity scan) is the first N calibration samples instead of "
                         "2 evaluation samples (the suite's own scores stay on --eval)")
    ap.add_argument("--distill-steps", type=int, default=3, help="pruning steps of the 'd' variants (default 3)")
    ap.add_argument("--distill-args", default="",
                    help="extra arguments of tools/retrain_distill.py in the 'd' variants (one string, split on spaces)")
    ap.add_argument("--distill-no-recovery", action="store_true",
                    help="the 'd' variants without the least-squares recovery before each distillation")
    ap.add_argument("--distill-data", default="",
                    help="the 'd' variants' training data (retrain.data; <model> is replaced by the model's name); "
                         "default: the variant's calibration samples. Never the evaluation split")
    ap.add_argument("--dense-map-metric", default="sqnr", choices=("sqnr", "map_iou"),
                    help="sparq's evaluate.metric for dense maps (search, gate, fallback): sqnr (min_sqnr_db 30 in the "
                         "whole default recipe) or map_iou at meta.json's threshold (evaluate.threshold)")
    ap.add_argument("--only", default="", help="run only variants whose label contains one of these (comma)")
    ap.add_argument("--work", default=os.path.join(REPO, "build", "accuracy_suite"))
    ap.add_argument("--md", default=os.path.join(REPO, "bench", "ACCURACY.md"))
    ap.add_argument("--append", action="store_true",
                    help="keep the other models' results of the work folder's results.json (run models one by one)")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite --md from the work folder's results.json (of an earlier or running run)")
    ap.add_argument("--ort-worker", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    PRUNE_EXTRA[:] = args.prune_extra.split(";")
    PRUNE_EVAL["samples"] = args.prune_eval
    DISTILL.update(steps=args.distill_steps, args=args.distill_args.split(), data=args.distill_data,
                   recovery=not args.distill_no_recovery)
    if args.ort_worker:
        return ort_worker(*args.ort_worker)
    if args.render:
        with open(os.path.join(os.path.abspath(args.work), "results.json")) as f:
            return write_md(args, json.load(f), argv)
    if not args.sparq:
        ap.error("--sparq is required")
    args.sparq = os.path.abspath(args.sparq)
    args.suite = os.path.abspath(args.suite)
    args.work = os.path.abspath(args.work)
    args.sparq_methods = args.sparq_methods.split(",")
    args.bias_correction = args.bias_correction.split(",")
    args.adaround = args.adaround.split(",")
    args.fallback_methods = args.fallback_methods.split(",")
    args.fp8_methods = [m for m in args.fp8_methods.split(",") if m]
    args.prune_variants = [p for p in args.prune_variants.split(",") if p]
    missing = [m for m in args.models.split(",") if not os.path.isfile(os.path.join(args.suite, m, "meta.json"))]
    if missing:
        ap.error(f"not built in {args.suite}: {missing} (run tools/make_real_suite.py first)")
    results_path = os.path.join(args.work, "results.json")
    results = []
    if args.append and os.path.isfile(results_path):
        with open(results_path) as f:
            results = json.load(f)

    def save(result):
        for i, r in enumerate(results):
            if r["name"] == result["name"]:
                results[i] = result
                break
        else:
            results.append(result)
        with open(results_path, "w") as f:
            json.dump(results, f, indent=1, default=str)

    for name in args.models.split(","):
        save(run_model(args, name, save))
    return write_md(args, results, argv)


def write_md(args, results, argv):
    import onnxruntime
    import torch
    info = {"machine": machine(), "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
            "git": git_head(REPO),
            "ort": onnxruntime.__version__, "torch": torch.__version__,
            "make": "python3 tools/make_real_suite.py",
            "command": "python3 bench/accuracy_suite.py " + " ".join(
                a for a in (argv if argv is not None else sys.argv[1:]) if a != "--render")}
    text = markdown(results, info)
    with open(args.md, "w") as f:
        f.write(text)
    print(f"wrote {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
