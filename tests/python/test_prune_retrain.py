"""prune.retrain runs the user's training between pruning steps (issue 25).

The "training" is a small Python script (numpy + onnx) that checks the masks
sparq wrote (one uint8 0/1 array per pruned weight, in the weight's shape,
zeros where the weight is zero), adds noise to every weight, pruned or not,
and writes model_out. sparq must re-apply the masks, evaluate, report each
retrained step with the count of weights set back to 0, and write a model
that passes onnx.checker and runs in onnxruntime as in sparq. A failing
command, or one that changes a weight's shape, is exit 2 with no model
written.
"""
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from conftest import DIGITS, load_npz, only_written_model, weighted_initializers, write_digits_retrain_recipe

TRAIN = r'''
import sys
import numpy as np
import onnx
from onnx import numpy_helper

model_in, masks, model_out, step, mode = sys.argv[1:6]
m = onnx.load(model_in)
z = np.load(masks)
inits = {t.name: t for t in m.graph.initializer}
rng = np.random.default_rng(int(step))
for name in z.files:
    mask, t = z[name], inits[name]
    w = numpy_helper.to_array(t)
    assert mask.dtype == np.uint8 and mask.shape == w.shape, (name, mask.shape, w.shape)
    assert np.array_equal(mask == 0, w == 0), name
    w = (w + 1e-3 * rng.standard_normal(w.shape)).astype(np.float32)  # pruned weights move too
    if mode == "reshape":
        w = w[..., :1]
    t.CopyFrom(numpy_helper.from_array(w, name))
onnx.save(m, model_out)
print(f"trained step {step}: {len(z.files)} weights")
'''


def write_recipe(tmp_path, command):
    (tmp_path / "train.py").write_text(TRAIN)
    return write_digits_retrain_recipe(tmp_path / "retrain.yaml", command, tmp_path / "out", timeout=120)


def command(mode):
    return [sys.executable, "train.py", "{model_in}", "{masks}", "{model_out}", "{step}", mode]


def test_retrain_command_runs_between_steps_and_masks_are_applied_again(sparq, tmp_path):
    recipe = write_recipe(tmp_path, command("noise"))
    proc = sparq.run("run", str(recipe))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = proc.stdout + proc.stderr
    assert "retrain step 2/2 | trained step 2" in log, log  # the command's output is logged

    report = json.loads((tmp_path / "out" / "report.json").read_text())
    steps = report["prune"]["steps"]
    assert len(steps) == 2
    for st in steps:
        assert st["retrain"] is not None and st["retrain"]["rezeroed"] > 0, st
        assert st["accepted"]
    assert "re-zeroed" in report["prune"]["summary"]

    path = only_written_model(tmp_path / "out")
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    dense = {t.name: numpy_helper.to_array(t) for t in onnx.load(f"{DIGITS}/digits_cnn.onnx").graph.initializer}
    weights = weighted_initializers(model)
    for t in model.graph.initializer:
        if t.name not in weights:
            continue
        w = numpy_helper.to_array(t)
        assert abs(np.mean(w == 0) - 0.5) < 0.02, t.name  # the masks held through the noise
        kept = w != 0
        assert not np.array_equal(w[kept], dense[t.name][kept]), t.name  # the training's change is kept

    inputs = load_npz(f"{DIGITS}/eval.npz")
    ort_out = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    sparq_out = list(sparq.eval(path, inputs, tmp_path).values())[0]
    err = np.max(np.abs(ort_out - sparq_out)) / np.max(np.abs(ort_out))
    assert err < 1e-4, err


def test_retrain_failures_exit_2_and_write_no_model(sparq, tmp_path):
    cases = {
        "fails": ([sys.executable, "-c", "import sys; print('boom'); sys.exit(4)"], "exited with status 4"),
        "reshape": (command("reshape"), "in the retrained model"),
        "silent": ([sys.executable, "-c", "pass"], "did not write {model_out}"),
    }
    for name, (cmd, expected) in cases.items():
        case_dir = tmp_path / name
        case_dir.mkdir()
        recipe = write_recipe(case_dir, cmd)
        proc = sparq.run("run", str(recipe))
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2, (name, out)
        assert "retrain step 1/2" in out and expected in out, (name, out)
        out_dir = case_dir / "out"
        assert not out_dir.exists() or not [f for f in os.listdir(out_dir) if f.endswith(".onnx")], name
