"""Channel pruning really shrinks a model (acceptance of the pruning issue).

`sparq run` prunes 30% of the output channels of the resnet18-shaped test
model (tools/make_test_models.py) and rewrites the consumers. The written
model must be smaller on disk and in multiply-accumulates, roughly by
(1 - 0.3)^2 for a layer whose inputs and outputs both lose channels, pass
onnx.checker, and run in onnxruntime with the outputs of sparq's executor.
"""
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper, shape_inference

from conftest import load_npz

SPARSITY = 0.3


def conv_gemm_macs(path: str) -> int:
    """Multiply-accumulates of the Conv and Gemm nodes for one sample."""
    model = shape_inference.infer_shapes(onnx.load(path))
    shapes = {}
    for vi in list(model.graph.value_info) + list(model.graph.output) + list(model.graph.input):
        dims = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]  # batch 1
        shapes[vi.name] = dims
    weights = {t.name: tuple(t.dims) for t in model.graph.initializer}
    macs = 0
    for node in model.graph.node:
        if node.op_type not in ("Conv", "Gemm") or node.input[1] not in weights:
            continue
        w = weights[node.input[1]]
        out = shapes[node.output[0]]
        per_output = int(np.prod(w[1:])) if node.op_type == "Conv" else w[1]
        macs += int(np.prod(out)) * per_output
    return macs


def test_thirty_percent_channel_pruning_shrinks_resnet18(sparq, models_dir, tmp_path):
    model = os.path.join(models_dir, "resnet18.onnx")
    data = os.path.join(models_dir, "resnet18.npz")
    recipe = tmp_path / "channel30.yaml"
    recipe.write_text(f"""version: 1
name: resnet18_channel30
model: {model}
data:
  calibration: {data}
  evaluation: {data}
prune:
  enabled: true
  structure: channel
  sparsity: {SPARSITY}
  recovery: false
quantize:
  enabled: false
evaluate:
  metric: sqnr
  gate: {{max_drop: 100}}
output:
  dir: {tmp_path / "out"}
""")
    proc = sparq.run("run", str(recipe))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pruned = str(tmp_path / "out" / "resnet18.sparq.onnx")
    onnx.checker.check_model(onnx.load(pruned), full_check=True)

    size_ratio = os.path.getsize(pruned) / os.path.getsize(model)
    mac_ratio = conv_gemm_macs(pruned) / conv_gemm_macs(model)
    # The stem conv and the classifier stay dense (skip_first_last) and so does
    # layer1's residual group (tied to the stem), so the ratio is a little
    # above (1 - 0.3)^2 = 0.49.
    assert 0.45 < size_ratio < 0.6, size_ratio
    assert 0.45 < mac_ratio < 0.65, mac_ratio
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["prune"]["steps"][0]["sparsity"] >= SPARSITY - 0.01

    inputs = load_npz(data)
    session = ort.InferenceSession(pruned, providers=["CPUExecutionProvider"])
    ort_out = session.run(None, inputs)[0]
    sparq_out = list(sparq.eval(pruned, inputs, tmp_path).values())[0]
    assert ort_out.shape == sparq_out.shape
    err = np.max(np.abs(ort_out - sparq_out)) / np.max(np.abs(ort_out))
    assert err < 1e-4, err
