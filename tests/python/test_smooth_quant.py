"""quantize.smooth + quantize_outputs: false (issue 24): the static INT8 QDQ
file of a small transformer-like block passes onnx.checker, runs in
onnxruntime with sparq's outputs, keeps Q/DQ on MatMul inputs only (TensorRT's
explicit-quantization placement) and has no dynamic ops.
"""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

HIDDEN, INNER, TOKENS = 16, 32, 6


def block_model(path):
    """x -> LayerNorm (outlier gamma) -> {MatMul+bias -> Erf-GELU -> MatMul, residual Add} -> LayerNorm."""
    rng = np.random.default_rng(7)
    gamma = rng.uniform(0.5, 1.5, HIDDEN).astype(np.float32)
    gamma[[2, 9]] = [25.0, -18.0]
    inits = {
        "gamma": gamma, "beta": rng.uniform(-0.1, 0.1, HIDDEN).astype(np.float32),
        "w1": rng.uniform(-0.3, 0.3, (HIDDEN, INNER)).astype(np.float32),
        "b1": rng.uniform(-0.1, 0.1, INNER).astype(np.float32),
        "w2": rng.uniform(-0.3, 0.3, (INNER, HIDDEN)).astype(np.float32),
        "b2": rng.uniform(-0.1, 0.1, HIDDEN).astype(np.float32),
        "g2": np.ones(HIDDEN, np.float32), "z2": np.zeros(HIDDEN, np.float32),
        "half": np.array(0.5, np.float32), "one": np.array(1.0, np.float32),
        "rsqrt2": np.array(1 / np.sqrt(2), np.float32),
    }
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], name="ln", axis=-1),
        helper.make_node("MatMul", ["ln", "w1"], ["m1"], name="fc1"),
        helper.make_node("Add", ["m1", "b1"], ["h"], name="fc1_bias"),
        helper.make_node("Mul", ["h", "rsqrt2"], ["hs"], name="gelu_scale"),
        helper.make_node("Erf", ["hs"], ["e"], name="gelu_erf"),
        helper.make_node("Add", ["e", "one"], ["e1"], name="gelu_add"),
        helper.make_node("Mul", ["h", "e1"], ["he"], name="gelu_mul"),
        helper.make_node("Mul", ["he", "half"], ["g"], name="gelu_half"),
        helper.make_node("MatMul", ["g", "w2"], ["m2"], name="fc2"),
        helper.make_node("Add", ["m2", "b2"], ["o"], name="fc2_bias"),
        helper.make_node("Add", ["o", "ln"], ["r"], name="residual"),
        helper.make_node("LayerNormalization", ["r", "g2", "z2"], ["y"], name="ln2", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", TOKENS, HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", TOKENS, HIDDEN])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def ort_run(path, x):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.fixture(scope="module")
def smoothed(sparq, tmp_path_factory):
    work = tmp_path_factory.mktemp("smooth")
    model = str(work / "block.onnx")
    block_model(model)
    rng = np.random.default_rng(11)
    np.savez(work / "calib.npz", x=rng.standard_normal((32, TOKENS, HIDDEN)).astype(np.float32))
    np.savez(work / "eval.npz", x=rng.standard_normal((16, TOKENS, HIDDEN)).astype(np.float32))
    recipe = work / "r.yaml"
    recipe.write_text(
        f"version: 1\nmodel: {model}\n"
        f"data: {{calibration: {work / 'calib.npz'}, evaluation: {work / 'eval.npz'}, batch_size: 8}}\n"
        "quantize:\n  calibration: {method: max}\n  quantize_outputs: false\n"
        "  smooth: {alpha: auto, alphas: [0.5, 0.8], min_outlier_ratio: 4}\n  fallback: {enabled: false}\n"
        f"output: {{dir: {work / 'out'}, overwrite: true}}\n"
        "evaluate: {metric: sqnr, gate: {max_drop: 1000000}}\nreport: {markdown: '', junit: ''}\n")
    proc = sparq.run("run", recipe)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = [f for f in os.listdir(work / "out") if f.endswith(".onnx")]
    assert len(out) == 1, out
    return {"fp32": model, "int8": str(work / "out" / out[0]), "log": proc.stdout + proc.stderr, "work": work,
            "x": np.load(work / "eval.npz")["x"]}


def test_smoothed_static_int8_passes_checker_and_places_qdq_on_matmul_inputs(smoothed):
    assert "smooth: alpha" in smoothed["log"] and " 0 activation(s) smoothed" not in smoothed["log"]
    m = onnx.load(smoothed["int8"])
    onnx.checker.check_model(m, full_check=True)
    ops = [n.op_type for n in m.graph.node]
    assert not {"DynamicQuantizeLinear", "MatMulInteger"} & set(ops)
    producers = {o: n for n in m.graph.node for o in n.output}
    inits = {i.name for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "MatMul":  # both inputs dequantized: activation and weight
            assert all(producers[i].op_type == "DequantizeLinear" for i in n.input), n.name
        if n.op_type == "QuantizeLinear":  # every Q is read by a DQ only (no dangling Q/DQ)
            readers = [r for r in m.graph.node if n.output[0] in r.input]
            assert readers and all(r.op_type == "DequantizeLinear" for r in readers), n.name
            if n.input[0] not in inits:
                assert producers[n.input[0]].op_type != "MatMul"  # layer outputs stay float
        if n.op_type == "Add" and n.name == "residual":  # left float, not half-quantized
            assert all(producers[i].op_type != "DequantizeLinear" for i in n.input)
    # The activation scales are per tensor.
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear" and n.input[0] not in inits:
            scale = next(i for i in m.graph.initializer if i.name == n.input[1])
            assert numpy_helper.to_array(scale).size == 1


def test_smoothed_static_int8_matches_sparq_in_onnxruntime(sparq, smoothed):
    x = smoothed["x"]
    ours = sparq.eval(smoothed["int8"], {"x": x}, smoothed["work"], tag="int8")
    got = ort_run(smoothed["int8"], x)
    want = next(iter(ours.values()))
    # Same int8 values, float rounding apart; a rounding tie may move one step.
    assert np.abs(got - want).max() <= 0.05 * np.abs(want).max()
    ref = ort_run(smoothed["fp32"], x)
    cos = (got * ref).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(ref, axis=-1)
    assert cos.mean() > 0.99
