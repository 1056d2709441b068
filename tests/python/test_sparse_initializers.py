"""Pruned weights stored as ONNX sparse_initializer (output.sparse_initializers).

`sparq run` prunes the digits CNN to 80% unstructured sparsity and writes
the FP32 model with its sparse weights as sparse initializers: the file must
shrink, pass onnx.checker (structural check), and run in onnxruntime with
sparq's outputs.
"""
import os

import numpy as np
import onnx
import onnxruntime as ort

from conftest import load_npz

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DIGITS = os.path.join(REPO, "examples", "digits")


def test_sparse_initializers_shrink_the_file_and_load_in_onnxruntime(sparq, tmp_path):
    def run(name, sparse):
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(f"""version: 1
name: {name}
model: {DIGITS}/digits_cnn.onnx
data:
  calibration: {DIGITS}/calib.npz
  evaluation: {DIGITS}/eval.npz
  labels: {DIGITS}/eval_labels.npy
prune:
  enabled: true
  structure: unstructured
  sparsity: 0.8
  skip_first_last: false
quantize:
  enabled: false
evaluate:
  gate: {{max_drop: 100}}
output:
  dir: {tmp_path / name}
  sparse_initializers: {str(sparse).lower()}
""")
        proc = sparq.run("run", str(recipe))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return str(tmp_path / name / "digits_cnn.sparq.onnx")

    dense_path, sparse_path = run("dense", False), run("sparse", True)
    model = onnx.load(sparse_path)
    # The structural check only: ONNX's shape inference (full_check) types a
    # sparse initializer as sparse_tensor(float), which Conv/Gemm inputs do not
    # accept, so it rejects every sparse_initializer that feeds a dense op.
    onnx.checker.check_model(model)
    assert len(model.graph.sparse_initializer) >= 2  # /3/Conv and /8/Gemm at 80%
    assert os.path.getsize(sparse_path) < 0.75 * os.path.getsize(dense_path)

    inputs = {k: v[:64] for k, v in load_npz(os.path.join(DIGITS, "eval.npz")).items()}
    session = ort.InferenceSession(sparse_path, providers=["CPUExecutionProvider"])
    ort_out = session.run(None, inputs)[0]
    sparq_sparse = list(sparq.eval(sparse_path, inputs, tmp_path, tag="sparse").values())[0]
    sparq_dense = list(sparq.eval(dense_path, inputs, tmp_path, tag="dense").values())[0]
    np.testing.assert_array_equal(sparq_sparse, sparq_dense)  # the same weights, bit for bit
    err = np.max(np.abs(ort_out - sparq_sparse)) / np.max(np.abs(ort_out))
    assert err < 1e-5, err
