"""tools/retrain_distill.py, the distillation for prune.retrain (issue 25).

Through `sparq run` on the digits CNN (seconds): 2 progressive steps of 50%
unstructured pruning, each followed by the tool (teacher: the dense model).
The tool must keep the pruned weights at 0 itself (sparq re-zeroes none), move
the kept ones, and write the same graph with the same initializer names,
types and shapes. Directly: its interpreter gives onnxruntime's outputs, and
a step on masks written by hand keeps them and the graph.
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from conftest import (DIGITS, SOURCE_DIR, WEIGHTED_OPS, load_npz, only_written_model, weighted_initializers,
                      write_digits_retrain_recipe)

TOOL = os.path.join(SOURCE_DIR, "tools", "retrain_distill.py")


def graph_signature(model):
    nodes = [(n.op_type, tuple(n.input), tuple(n.output), n.SerializeToString().__len__()) for n in model.graph.node]
    inits = sorted((t.name, t.data_type, tuple(t.dims)) for t in model.graph.initializer)
    io = ([i.SerializeToString() for i in model.graph.input], [o.SerializeToString() for o in model.graph.output])
    return nodes, inits, io


def test_distill_through_sparq_run_keeps_masks_and_graph(sparq, tmp_path):
    recipe = tmp_path / "distill.yaml"
    out = tmp_path / "out"
    cmd = [sys.executable, TOOL, "--teacher", f"{DIGITS}/digits_cnn.onnx", "{model_in}", "{masks}", "{model_out}",
           "--data", "{data}", "--step", "{step}", "--iterations", "6", "--eval-every", "3", "--batch", "4",
           "--lr", "1e-3"]
    write_digits_retrain_recipe(recipe, cmd, out, timeout=300)
    proc = sparq.run("run", str(recipe))
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "retrain step 2/2 | step 2: wrote the checkpoint" in log, log

    report = json.loads((out / "report.json").read_text())
    steps = report["prune"]["steps"]
    assert len(steps) == 2
    for st in steps:
        assert st["retrain"]["rezeroed"] == 0, st  # the tool held the masks itself

    model = onnx.load(only_written_model(out))
    dense_model = onnx.load(f"{DIGITS}/digits_cnn.onnx")
    assert graph_signature(model) == graph_signature(dense_model)
    dense = {t.name: numpy_helper.to_array(t) for t in dense_model.graph.initializer}
    weights = weighted_initializers(model)
    moved = 0
    for t in model.graph.initializer:
        w = numpy_helper.to_array(t)
        if t.name in weights:
            assert abs(np.mean(w == 0) - 0.5) < 0.02, t.name
        moved += int(not np.array_equal(w, dense[t.name]))
    assert moved >= len(weights)  # trained: every pruned weight, and biases, changed


def test_interpreter_matches_onnxruntime_and_a_step_holds_hand_masks(tmp_path):
    import torch
    from onnx_torch import OnnxModule

    model = onnx.load(f"{DIGITS}/digits_cnn.onnx")
    inputs = load_npz(f"{DIGITS}/eval.npz")
    name = model.graph.input[0].name
    x = inputs[name][:8]
    ref = ort.InferenceSession(f"{DIGITS}/digits_cnn.onnx", providers=["CPUExecutionProvider"]).run(None, {name: x})[0]
    with torch.no_grad():
        got = OnnxModule(model)({name: torch.from_numpy(x)})[0][model.graph.output[0].name].numpy()
    assert np.max(np.abs(got - ref)) <= 1e-4 * np.max(np.abs(ref))

    # masks by hand: every other weight of each weighted layer pruned
    inits = {t.name: t for t in model.graph.initializer}
    masks = {}
    for n in model.graph.node:
        if n.op_type in WEIGHTED_OPS:
            w = numpy_helper.to_array(inits[n.input[1]])
            m = (np.arange(w.size).reshape(w.shape) % 2).astype(np.uint8)
            masks[n.input[1]] = m
            inits[n.input[1]].CopyFrom(numpy_helper.from_array(w * m, n.input[1]))
    model_in, masks_path, model_out = tmp_path / "in.onnx", tmp_path / "masks.npz", tmp_path / "out.onnx"
    onnx.save(model, str(model_in))
    np.savez(masks_path, **masks)
    proc = subprocess.run([sys.executable, TOOL, "--teacher", f"{DIGITS}/digits_cnn.onnx", str(model_in),
                           str(masks_path), str(model_out), "--data", f"{DIGITS}/calib.npz", "--iterations", "4",
                           "--eval-every", "2", "--holdout", "0", "--lr", "1e-3"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    trained = onnx.load(str(model_out))
    assert graph_signature(trained) == graph_signature(model)
    for t in trained.graph.initializer:
        if t.name in masks:
            w = numpy_helper.to_array(t)
            assert np.all(w[masks[t.name] == 0] == 0), t.name
            assert not np.array_equal(w, numpy_helper.to_array(inits[t.name])), t.name

    # bad input: a mask for a weight the model does not have is exit 2 with the name
    np.savez(masks_path, **{"no_such_weight": np.ones(3, np.uint8)})
    proc = subprocess.run([sys.executable, TOOL, "--teacher", f"{DIGITS}/digits_cnn.onnx", str(model_in),
                           str(masks_path), str(model_out), "--data", f"{DIGITS}/calib.npz"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "no_such_weight" in proc.stderr, proc.stdout + proc.stderr


def test_warmup_rises_linearly_then_decays_and_zero_warmup_is_the_plain_cosine():
    import math
    sys.path.insert(0, os.path.join(SOURCE_DIR, "tools"))
    import retrain_distill as R
    a = R.parse_args(["in", "m", "out", "--teacher", "t", "--data", "d", "--iterations", "10", "--lr", "1.0",
                      "--warmup", "0.2"])
    lrs = [R.learning_rate(a, i) for i in range(10)]
    assert lrs[:3] == [0.5, 1.0, 1.0]  # 2 warm-up iterations, then the cosine from its top
    assert all(x > y for x, y in zip(lrs[2:], lrs[3:]))
    plain = R.parse_args(["in", "m", "out", "--teacher", "t", "--data", "d", "--iterations", "10", "--lr", "1.0"])
    assert [R.learning_rate(plain, i) for i in range(10)] == [0.5 * (1 + math.cos(math.pi * i / 10)) for i in range(10)]
    assert R.main(["in", "m", "out", "--teacher", "t", "--data", "d", "--warmup", "1.5"]) == 2


def test_flip_augmentation_only_mirrors_images():
    sys.path.insert(0, os.path.join(SOURCE_DIR, "tools"))
    import retrain_distill as R
    x = np.random.default_rng(0).random((16, 3, 4, 5)).astype(np.float32)
    ids = np.arange(32).reshape(16, 2)
    a = R.parse_args(["in", "m", "out", "--teacher", "t", "--data", "d", "--augment", "flip"])
    out = R.augment({"img": x, "input_ids": ids}, {}, a, np.random.default_rng(1))
    np.testing.assert_array_equal(out["input_ids"].numpy(), ids)
    y = out["img"].numpy()
    flipped = [bool(np.array_equal(y[i], x[i][..., ::-1])) for i in range(16)]
    kept = [bool(np.array_equal(y[i], x[i])) for i in range(16)]
    assert all(f or k for f, k in zip(flipped, kept)) and any(flipped) and any(kept)
