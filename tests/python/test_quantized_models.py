"""Models written by `sparq run` are valid ONNX that onnxruntime runs and
that computes what sparq's own executor computes.

For each model and output form (INT8 QDQ with KL calibration, INT8
QOperator, FP16, mixed INT8/FP16) a recipe in a temporary folder writes the
model, then:

  * onnx.checker.check_model(full_check=True) accepts it;
  * node by node, on equal inputs, onnxruntime without graph optimizations
    (ORT_DISABLE_ALL) computes what `sparq eval` computes: float32 within
    1e-5 of max|ort|, int8 and float16 equal but for rare rounding ties
    (tools/quant_compare.py; it also says why whole-model runs are not
    compared that tightly);
  * the final outputs of whole-model runs, onnxruntime without optimizations
    and with all of them (ORT_ENABLE_ALL: QDQ becomes QLinearConv/QGemm,
    integer kernels), differ from sparq's less than the compressed model
    differs from FP32 (bounds below);
  * report.json's agreement numbers are those of the saved outputs.

Models: the bundled digits CNN (examples/digits, with labels), tiny_encoder
(int64 tokens, two float outputs, no labels) and resnet18 (QDQ only, 32
calibration samples: the reference executor calibrates it in seconds).
"""
import json
import os

import numpy as np
import onnx
import pytest

from conftest import SOURCE_DIR, load_npz
import quant_compare

DIGITS_DIR = os.path.join(SOURCE_DIR, "examples", "digits")

# Whole-model runs, onnxruntime against sparq, for the same compressed model.
# A step flipped at a rounding tie spreads through the later layers, and
# onnxruntime skips float16 roundings the model specifies (see
# tools/quant_compare.py), so the two differ like two draws of the
# quantization noise. They must not differ more than that:
#   SQNR(ort vs sparq) >= MIN_SQNR_DB, lowered to SQNR(sparq vs FP32) - 3 dB
#     for a model that is itself noisier than that: the INT8 models here are
#     35-40 dB from FP32 and the two executors 36-98 dB apart; a wrong scale
#     or zero point would be far below the quantization noise;
#   top-1 disagreement (rows over the last axis of output 0) at most
#     max(1%, 1.5 x the disagreement of sparq's compressed model with FP32):
#     only rows whose two best scores are closer than the noise can flip, and
#     random-weight models (tiny_encoder's 1000-way token logits) have many.
MIN_SQNR_DB = {"qdq": 30.0, "qoperator": 30.0, "mixed": 30.0, "fp16": 50.0, "dynamic": 30.0}
SQNR_MARGIN_DB = 3.0
MAX_DISAGREEMENT = 0.01
DISAGREEMENT_FACTOR = 1.5
# The requirement for FP16 against FP32 on the digits evaluation split.
MIN_FP16_TOP1_AGREEMENT_PERCENT = 99.9

FORMATS = ("qdq", "qoperator", "fp16", "mixed")
# quantize.mode dynamic (DynamicQuantizeLinear + MatMulInteger) applies to
# MatMul/Gemm: the transformer only.
CASES = [("digits", f) for f in FORMATS] + [("tiny_encoder", f) for f in FORMATS + ("dynamic",)] + \
    [("resnet18", "qdq")]


def _recipe(model: str, data: dict, fmt: str, out_dir: str) -> str:
    """A recipe writing `fmt` into out_dir; the gate never fails (this file
    tests the written model, test_run_gate.py tests the gate) and fallback
    is off so the model is the plain quantization."""
    precision = {"qdq": "int8", "qoperator": "int8", "fp16": "fp16", "mixed": "mixed", "dynamic": "int8"}[fmt]
    output_format = {"qdq": "qdq", "qoperator": "qoperator", "fp16": "fp16", "mixed": "qdq", "dynamic": "qdq"}[fmt]
    lines = [
        "version: 1",
        f"name: {os.path.basename(out_dir)}",
        f"model: {model}",
        "data:",
        f"  evaluation: {data['evaluation']}",
        # Dynamic quantization takes each activation's range over the whole
        # batch, so the report's evaluation runs the one batch that `sparq
        # eval` runs below (all samples), for the outputs to be the same.
        f"  batch_size: {64 if fmt == 'dynamic' else data['batch_size']}",
    ]
    if precision != "fp16":
        lines += [f"  calibration: {data['calibration']}", "  calibration_samples: 0"]
    if data.get("labels"):
        lines.append(f"  labels: {data['labels']}")
    lines += [
        "quantize:",
        f"  precision: {precision}",
        f"  mode: {'dynamic' if fmt == 'dynamic' else 'static'}",
        "  calibration:",
        "    method: kl",
        "  fallback:",
        "    enabled: false",
        "output:",
        f"  dir: {out_dir}",
        f"  format: {output_format}",
        "evaluate:",
        f"  metric: {data['metric']}",
        "  threads: 2",
        "  gate:",
        "    max_drop: 100",
    ]
    return "\n".join(lines) + "\n"


def _model_data(name: str, models_dir, work_dir) -> dict:
    """Model path and data files for one test model."""
    if name == "digits":
        return {"model": os.path.join(DIGITS_DIR, "digits_cnn.onnx"),
                "calibration": os.path.join(DIGITS_DIR, "calib.npz"),
                "evaluation": os.path.join(DIGITS_DIR, "eval.npz"),
                "labels": os.path.join(DIGITS_DIR, "eval_labels.npy"),
                "metric": "top1", "batch_size": 64}
    rng = np.random.default_rng(7)
    if name == "tiny_encoder":
        # Token ids over the whole vocabulary (1000), 32 per sample.
        calib = {"input_ids": rng.integers(0, 1000, (64, 32)).astype(np.int64)}
        evaluation = {"input_ids": rng.integers(0, 1000, (64, 32)).astype(np.int64)}
        metric, batch = "agreement", 16
    else:  # resnet18: random normal images, as after mean/std normalization
        calib = {"input": rng.standard_normal((32, 3, 224, 224)).astype(np.float32)}
        evaluation = {"input": rng.standard_normal((2, 3, 224, 224)).astype(np.float32)}
        metric, batch = "sqnr", 8
    paths = {}
    for tag, arrays in (("calibration", calib), ("evaluation", evaluation)):
        paths[tag] = os.path.join(str(work_dir), f"{name}_{tag}.npz")
        np.savez(paths[tag], **arrays)
    return {"model": os.path.join(models_dir, name + ".onnx"), "metric": metric, "batch_size": batch, **paths}


@pytest.fixture(scope="module")
def compressed(sparq, models_dir, tmp_path_factory):
    """compressed(name, fmt) -> dict(path, report, data, inputs): runs `sparq
    run` once per (model, format) and memoizes it."""
    work = tmp_path_factory.mktemp("quantized")
    cache = {}
    data_cache = {}

    def get(name: str, fmt: str) -> dict:
        if (name, fmt) in cache:
            return cache[(name, fmt)]
        if name not in data_cache:
            data_cache[name] = _model_data(name, models_dir, work)
        data = data_cache[name]
        out_dir = os.path.join(str(work), f"{name}_{fmt}")
        recipe_path = os.path.join(str(work), f"{name}_{fmt}.yaml")
        with open(recipe_path, "w") as f:
            f.write(_recipe(data["model"], data, fmt, out_dir))
        proc = sparq.run("run", recipe_path)
        if proc.returncode != 0:
            pytest.fail(f"sparq run {name} {fmt} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}",
                        pytrace=False)
        stem = os.path.splitext(os.path.basename(data["model"]))[0]
        path = os.path.join(out_dir, stem + ".sparq.onnx")
        assert os.path.isfile(path), f"sparq run {name} {fmt} exited 0 without writing {path}"
        with open(os.path.join(out_dir, "report.json")) as f:
            report = json.load(f)
        cache[(name, fmt)] = {"path": path, "report": report, "data": data,
                              "inputs": load_npz(data["evaluation"]), "dir": out_dir}
        return cache[(name, fmt)]

    return get


@pytest.fixture(scope="module")
def sparq_outputs(sparq_eval, tmp_path_factory):
    """sparq_outputs(model_path, inputs) -> `sparq eval --save-outputs`, memoized."""
    work = tmp_path_factory.mktemp("sparq_outputs")
    cache = {}

    def get(path: str, inputs: dict) -> dict:
        if path not in cache:
            cache[path] = sparq_eval.eval(path, inputs, work, tag=f"m{len(cache)}")
        return cache[path]

    return get


@pytest.mark.parametrize("name,fmt", CASES)
def test_passes_onnx_checker(compressed, name, fmt):
    c = compressed(name, fmt)
    onnx.checker.check_model(onnx.load(c["path"]), full_check=True)


@pytest.mark.parametrize("name,fmt", CASES)
def test_nodes_match_sparq_without_optimizations(sparq_eval, compressed, tmp_path, name, fmt):
    """Every node, alone in onnxruntime (ORT_DISABLE_ALL) on the inputs sparq
    gave it, computes sparq's output: same float ops, same rounding."""
    c = compressed(name, fmt)
    rows = quant_compare.compare_nodes(c["path"], c["inputs"], sparq_eval.path, work_dir=str(tmp_path))
    assert len(rows) >= 9, f"only {len(rows)} node outputs were compared"
    assert all(r["ok"] for r in rows), f"{name} {fmt}:\n{quant_compare.summarize(rows)}"


@pytest.mark.parametrize("optimize", [False, True], ids=["ort_disable_all", "ort_enable_all"])
@pytest.mark.parametrize("name,fmt", CASES)
def test_outputs_close_to_sparq(compressed, sparq_outputs, name, fmt, optimize):
    """Whole-model runs: onnxruntime's outputs are within the quantization
    noise of sparq's."""
    c = compressed(name, fmt)
    want = sparq_outputs(c["path"], c["inputs"])
    fp32 = sparq_outputs(c["data"]["model"], c["inputs"])
    got = quant_compare.run_onnxruntime(c["path"], c["inputs"], optimize=optimize)
    assert sorted(got) == sorted(want)
    first = onnx.load(c["data"]["model"], load_external_data=False).graph.output[0].name
    problems = []
    for out_name, w in want.items():
        g = got[out_name]
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"{out_name}: onnxruntime {g.dtype}{list(g.shape)}, sparq {w.dtype}{list(w.shape)}")
            continue
        noise_db = quant_compare.sqnr_db(fp32[out_name], w)
        min_db = min(MIN_SQNR_DB[fmt], noise_db - SQNR_MARGIN_DB)
        sqnr = quant_compare.sqnr_db(w, g)
        if not sqnr >= min_db:
            problems.append(f"{out_name}: SQNR of onnxruntime vs sparq {sqnr:.1f} dB < {min_db:.1f} dB "
                            f"(sparq's model vs FP32: {noise_db:.1f} dB)")
        if out_name == first:
            quantized = 1.0 - quant_compare.top1_agreement(fp32[out_name], w)
            limit = max(MAX_DISAGREEMENT, DISAGREEMENT_FACTOR * quantized)
            disagreement = 1.0 - quant_compare.top1_agreement(w, g)
            if not disagreement <= limit:
                problems.append(f"{out_name}: top-1 of onnxruntime and sparq differ in {100 * disagreement:.2f}% "
                                f"of rows > {100 * limit:.2f}% (sparq's model vs FP32: {100 * quantized:.2f}%)")
    assert not problems, f"{name} {fmt} ({'ORT_ENABLE_ALL' if optimize else 'ORT_DISABLE_ALL'}):\n  " + \
        "\n  ".join(problems)


@pytest.mark.parametrize("name,fmt", CASES)
def test_report_agreement_matches_outputs(compressed, sparq_outputs, name, fmt):
    """report.json's top-1 agreement (a fraction of rows: argmax over the
    last axis of output 0) and SQNR equal those of the saved outputs."""
    c = compressed(name, fmt)
    fp32 = sparq_outputs(c["data"]["model"], c["inputs"])
    out = sparq_outputs(c["path"], c["inputs"])
    first = onnx.load(c["data"]["model"], load_external_data=False).graph.output[0].name
    want_agreement = quant_compare.top1_agreement(fp32[first], out[first])
    want_sqnr = quant_compare.sqnr_db(fp32[first], out[first])
    agreement = c["report"]["agreement"]
    assert 0.0 <= agreement["top1_agreement"] <= 1.0, \
        f"{name} {fmt}: report.json top1_agreement {agreement['top1_agreement']} is not a fraction " \
        f"(the outputs give {want_agreement:.4f} of {fp32[first].size // fp32[first].shape[-1]} rows)"
    assert agreement["top1_agreement"] == pytest.approx(want_agreement, abs=1e-6)
    assert agreement["sqnr_db"] == pytest.approx(want_sqnr, abs=0.01)
    assert agreement["samples"] == len(next(iter(c["inputs"].values())))


def test_fp16_top1_agreement_on_digits(compressed):
    """The issue's bound: FP16 keeps >= 99.9% of the FP32 model's top-1
    decisions on the digits evaluation split (in sparq's report, and when
    onnxruntime runs both models)."""
    c = compressed("digits", "fp16")
    report = c["report"]
    assert report["agreement"]["samples"] == 512
    assert 100 * report["agreement"]["top1_agreement"] >= MIN_FP16_TOP1_AGREEMENT_PERCENT
    assert report["gate"]["passed"] and report["gate"]["drop"] <= 0.001  # a fraction: 0.1 points
    fp32 = quant_compare.run_onnxruntime(c["data"]["model"], c["inputs"], optimize=True)["logits"]
    fp16 = quant_compare.run_onnxruntime(c["path"], c["inputs"], optimize=True)["logits"]
    assert 100.0 * quant_compare.top1_agreement(fp32, fp16) >= MIN_FP16_TOP1_AGREEMENT_PERCENT


@pytest.mark.parametrize("fmt", ["qdq", "qoperator", "mixed"])
def test_int8_keeps_digits_accuracy(compressed, fmt):
    """The INT8 forms keep the digits CNN's accuracy within 1 point, in
    sparq's report and when onnxruntime (with its integer kernels) runs them."""
    c = compressed("digits", fmt)
    gate = c["report"]["gate"]
    assert gate["metric"] == "top1" and gate["fp32"] - gate["output"] <= 0.01  # fractions: 1 point
    labels = np.load(c["data"]["labels"])
    logits = quant_compare.run_onnxruntime(c["path"], c["inputs"], optimize=True)["logits"]
    accuracy = 100.0 * float(np.mean(logits.argmax(1) == labels))
    assert accuracy >= 100 * gate["fp32"] - 1.0
