"""`sparq compare` against the same statistics computed with numpy on
onnxruntime's intermediate values: the digits CNN vs its QDQ copy, both run by
onnxruntime without graph optimizations (the QDQ graph as its float graph, as
sparq compare runs it), every matched tensor made a graph output."""
import json
import os

import numpy as np
import pytest

from conftest import SOURCE_DIR
from test_run_gate import quickstart_copy

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

DIGITS = os.path.join(SOURCE_DIR, "examples", "digits")
SAMPLES = 64


def run_with_values(path, names, feed):
    """Runs the model at `path` with onnxruntime and returns {name: array} for `names`."""
    model = onnx.load(path)
    have = {o.name for o in model.graph.output}
    for name in names:
        if name not in have:
            model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    values = session.run(list(names), feed)
    return dict(zip(names, values))


def test_compare_matches_numpy_on_onnxruntime_values(sparq, tmp_path):
    out_dir = str(tmp_path / "out")
    proc = sparq.run("run", quickstart_copy(tmp_path, out_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fp32 = os.path.join(DIGITS, "digits_cnn.onnx")
    int8 = os.path.join(out_dir, "digits_cnn.sparq.onnx")
    proc = sparq.run("compare", fp32, int8, "--inputs", os.path.join(DIGITS, "eval.npz"), "--limit", SAMPLES,
                     "--batch", 16, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    tensors = report["tensors"]
    assert report["samples"] == SAMPLES and report["unmatched"] == []
    assert any(t["match"] == "dequantized" for t in tensors)

    data = np.load(os.path.join(DIGITS, "eval.npz"))
    feed = {"input": data["input"][:SAMPLES].astype(np.float32)}
    ref = run_with_values(fp32, [t["name"] for t in tensors], feed)
    cand = run_with_values(int8, [t["candidate_name"] for t in tensors], feed)
    for t in tensors:
        r = ref[t["name"]].astype(np.float64).ravel()
        c = cand[t["candidate_name"]].astype(np.float64).ravel()
        assert r.size == t["elements"], t["name"]
        err = r - c
        if not err.any():
            assert t["identical"], t["name"]
            continue
        sqnr = 10 * np.log10(np.sum(r * r) / np.sum(err * err))
        cosine = np.dot(r, c) / (np.linalg.norm(r) * np.linalg.norm(c))
        # Float sums in another order may move a value across a rounding
        # boundary of the quantizer: a few elements off by one step.
        assert t["sqnr_db"] == pytest.approx(sqnr, abs=0.05), t["name"]
        assert t["cosine"] == pytest.approx(cosine, abs=1e-5), t["name"]
    sqnrs = [t["sqnr_db"] for t in tensors if t["sqnr_db"] is not None]
    assert sqnrs == sorted(sqnrs)
