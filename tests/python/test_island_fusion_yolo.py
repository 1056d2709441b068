"""YOLOv8n INT8 of the speed suite (bench/e2e_real_models.py --suite writes
build/models/speed): `sparq eval --verbose` runs every C2f block on integers
(runtime/passes/island_fusion.cc), with no float SiLU, QuantizeLinear or
DequantizeLinear left in them, and gives the same outputs with 1 and 2 threads.

Skips (does not fail) when the speed suite has not been built; SPARQ_SPEED_MODELS
names another folder of it.
"""
import os
import re

import numpy as np
import pytest

from conftest import load_npz

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPEED = os.environ.get("SPARQ_SPEED_MODELS", os.path.join(REPO, "build", "models", "speed"))
MODEL = os.path.join(SPEED, "yolov8n_det.int8.onnx")
DATA = os.path.join(SPEED, "data", "yolov8n_det_eval.npz")
# The C2f blocks of YOLOv8n (backbone 2/4/6/8, neck 12/15/18/21).
C2F = re.compile(r"^/model\.(2|4|6|8|12|15|18|21)/")
FLOAT_OPS = {"Silu", "Sigmoid", "Mul", "Add", "QuantizeLinear", "DequantizeLinear"}

pytestmark = pytest.mark.skipif(not (os.path.isfile(MODEL) and os.path.isfile(DATA)),
                                reason=f"the speed suite's {MODEL} is not built")


def kernels(sparq, *extra):
    """(node, op) pairs of the `--verbose` kernel table (node, op, kernel, backend)."""
    proc = sparq.run("eval", MODEL, "--inputs", DATA, "--limit", 1, "--batch", 1, "--verbose", *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = proc.stdout.split("Kernels", 1)[1]
    rows = [line.split() for line in table.splitlines()[2:]]
    return [(r[0], r[1]) for r in rows if len(r) == 4]


def test_c2f_blocks_run_on_integers(sparq_eval):
    rows = kernels(sparq_eval, "--threads", 1)
    c2f = [(node, op) for node, op in rows if C2F.match(node)]
    assert c2f, "no C2f node in the kernel table"
    floats = [(node, op) for node, op in c2f if op in FLOAT_OPS]
    assert not floats, floats
    ops = {op for _, op in c2f}
    assert {"QLinearAdd", "ConcatLut", "Split"} <= ops, ops


def test_one_and_two_threads_give_the_same_outputs(sparq_eval, tmp_path):
    outputs = []
    for threads in (1, 2):
        path = tmp_path / f"t{threads}.npz"
        proc = sparq_eval.run("eval", MODEL, "--inputs", DATA, "--limit", 4, "--batch", 1, "--threads", threads,
                              "--save-outputs", path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        outputs.append(load_npz(path))
    for name, value in outputs[0].items():
        np.testing.assert_array_equal(value, outputs[1][name], err_msg=name)
