"""INT4 weight-only (issue 26): onnxruntime's MatMulNBits files run in sparq
with onnxruntime's outputs, and the files `sparq run` writes with
`precision: int4` (MatMulNBits and opset-21 blocked DequantizeLinear) pass
onnx.checker and run in onnxruntime with sparq's outputs. sparq's RTN gives
onnxruntime's MatMulNBitsQuantizer codes, scales and zero points.
"""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

K, HIDDEN, OUT, TOKENS = 72, 48, 9, 5  # K not a multiple of the block (16/32); N odd


def mlp_model(path):
    """x [n, T, K] -> MatMul(W1 [K, H]) -> Relu -> Gemm-free MatMul(W2 [H, OUT]) -> y; and a transB Gemm on x[0]."""
    rng = np.random.default_rng(3)
    inits = {
        "w1": rng.uniform(-0.4, 0.4, (K, HIDDEN)).astype(np.float32),
        "w2": rng.uniform(-0.4, 0.4, (HIDDEN, OUT)).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", TOKENS, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", TOKENS, OUT])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def ort_run(path, x):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def ort_quantize(src, dst, block_size, symmetric):
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    q = MatMulNBitsQuantizer(onnx.load(src), block_size=block_size, is_symmetric=symmetric)
    q.process()
    q.model.save_model_to_file(dst)


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-12))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    w = tmp_path_factory.mktemp("int4")
    mlp_model(str(w / "mlp.onnx"))
    rng = np.random.default_rng(5)
    np.savez(w / "eval.npz", x=rng.standard_normal((8, TOKENS, K)).astype(np.float32))
    return w


@pytest.mark.parametrize("block_size,symmetric", [(16, False), (32, False), (32, True)])
def test_onnxruntime_matmulnbits_file_runs_in_sparq(sparq_eval, work, block_size, symmetric):
    path = str(work / f"ort_q4_{block_size}_{symmetric}.onnx")
    ort_quantize(str(work / "mlp.onnx"), path, block_size, symmetric)
    assert any(n.op_type == "MatMulNBits" for n in onnx.load(path).graph.node)
    x = np.load(work / "eval.npz")["x"]
    want = ort_run(path, x)
    got = sparq_eval.eval(path, {"x": x}, work, tag=f"ortq{block_size}{symmetric}")
    y = next(iter(got.values()))
    # The same weights; only the summation order differs (onnxruntime's MLAS blocks).
    assert rel_err(want, y) < 1e-4, rel_err(want, y)


def run_recipe(sparq, work, fmt, block_size, symmetric):
    out = work / f"out_{fmt}_{block_size}_{symmetric}"
    recipe = work / f"r_{fmt}_{block_size}_{symmetric}.yaml"
    recipe.write_text(
        f"version: 1\nmodel: {work / 'mlp.onnx'}\n"
        f"data: {{evaluation: {work / 'eval.npz'}, batch_size: 4}}\n"
        f"quantize:\n  precision: int4\n  int4: {{block_size: {block_size}, symmetric: {str(symmetric).lower()}, "
        f"format: {fmt}}}\n"
        f"output: {{dir: {out}, overwrite: true}}\n"
        "evaluate: {metric: cosine, gate: {min_cosine: 0.99}}\nreport: {markdown: '', junit: ''}\n")
    proc = sparq.run("run", recipe)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = [f for f in os.listdir(out) if f.endswith(".onnx")]
    assert len(files) == 1, files
    return str(out / files[0])


@pytest.mark.parametrize("fmt", ["matmulnbits", "qdq"])
@pytest.mark.parametrize("block_size,symmetric", [(16, False), (32, True)])
def test_sparq_int4_file_passes_checker_and_runs_in_onnxruntime(sparq_eval, work, fmt, block_size, symmetric):
    path = run_recipe(sparq_eval, work, fmt, block_size, symmetric)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=fmt == "qdq")  # full_check: shape inference knows no contrib ops
    ops = [n.op_type for n in model.graph.node]
    if fmt == "matmulnbits":
        assert ops.count("MatMulNBits") == 2, ops
    else:
        assert ops.count("DequantizeLinear") == 2, ops
        assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) == 21
    x = np.load(work / "eval.npz")["x"]
    want = ort_run(path, x)
    got = next(iter(sparq_eval.eval(path, {"x": x}, work, tag=f"sq{fmt}{block_size}").values()))
    assert rel_err(want, got) < 1e-4, rel_err(want, got)
    # And it is close to FP32.
    ref = ort_run(str(work / "mlp.onnx"), x)
    cos = float(np.sum(ref * got) / np.sqrt(np.sum(ref * ref) * np.sum(got * got)))
    assert cos > 0.99, cos


@pytest.mark.parametrize("block_size,symmetric", [(16, False), (32, False), (32, True)])
def test_sparq_rtn_matches_onnxruntime_quantizer(sparq, work, block_size, symmetric):
    """The same codes, scales and zero points as MatMulNBitsQuantizer (RTN)."""
    ours = onnx.load(run_recipe(sparq, work, "matmulnbits", block_size, symmetric))
    path = str(work / f"ort_q4_cmp_{block_size}_{symmetric}.onnx")
    ort_quantize(str(work / "mlp.onnx"), path, block_size, symmetric)
    theirs = onnx.load(path)

    def tensors(m):
        inits = {t.name: numpy_helper.to_array(t).reshape(-1) for t in m.graph.initializer}
        return [[inits[n.input[1]], inits[n.input[2]],
                 inits[n.input[3]] if len(n.input) > 3 and n.input[3] else None]
                for n in m.graph.node if n.op_type == "MatMulNBits"]

    pairs = list(zip(tensors(ours), tensors(theirs)))
    assert len(pairs) == 2
    for a, b in pairs:
        np.testing.assert_array_equal(a[0], b[0])           # packed codes
        np.testing.assert_allclose(a[1], b[1], rtol=1e-6)   # scales
        if a[2] is None:                                     # symmetric: no zero points means 8
            assert b[2] is None or np.all(b[2] == 0x88), b[2]
        else:
            np.testing.assert_array_equal(a[2], b[2])       # packed zero points
