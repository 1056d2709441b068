"""sparq's executor against onnxruntime on torch-exported models.

Each model of tools/make_test_models.py runs at batch 1 and batch 2 through
`sparq eval` and through onnxruntime's CPU provider; every output must agree
to max|sparq - ort| / max|ort| < 1e-4. On a mismatch the failure message
names the node where the outputs start to differ (tools/find_divergence.py).
"""
import os

import numpy as np
import pytest

from conftest import load_npz
import find_divergence

# Relative to the largest magnitude of onnxruntime's output (float32 models;
# sparq and onnxruntime may sum in different orders).
MAX_RELATIVE_ERROR = 1e-4

MODELS = ("resnet18", "mobilenet_v2", "tiny_encoder")


@pytest.fixture(scope="module")
def ort_outputs():
    """Memoized onnxruntime outputs, keyed by (model, batch)."""
    cache = {}

    def get(model_path, name, batch, inputs):
        if (name, batch) not in cache:
            cache[(name, batch)] = find_divergence.run_onnxruntime(model_path, inputs)
        return cache[(name, batch)]

    return get


def sample_inputs(models_dir, name, batch):
    """The first `batch` samples of the model's stored inputs (batch 2)."""
    stored = load_npz(os.path.join(models_dir, name + ".npz"))
    return {k: np.ascontiguousarray(v[:batch]) for k, v in stored.items()}


def divergence_report(sparq, model_path, inputs, tmp_path) -> str:
    try:
        rows = find_divergence.find_divergence(model_path, inputs, sparq.path, MAX_RELATIVE_ERROR,
                                               work_dir=str(tmp_path))
        return find_divergence.summarize(rows, show=5)
    except Exception as e:  # the report only adds detail to a failure
        return f"(no per-node report: {e})"


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", MODELS)
def test_matches_onnxruntime(sparq_eval, models_dir, ort_outputs, tmp_path, name, batch):
    model_path = os.path.join(models_dir, name + ".onnx")
    inputs = sample_inputs(models_dir, name, batch)
    want = ort_outputs(model_path, name, batch, inputs)
    got = sparq_eval.eval(model_path, inputs, tmp_path)

    assert sorted(got) == sorted(want), "sparq's saved outputs are not keyed by the model's output names"
    problems = []
    for out_name, w in want.items():
        g = got[out_name]
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"{out_name}: sparq gave {g.dtype}{list(g.shape)}, onnxruntime {w.dtype}{list(w.shape)}")
            continue
        err = find_divergence.relative_error(g, w)
        if not err < MAX_RELATIVE_ERROR:
            problems.append(f"{out_name}: max|sparq - ort| / max|ort| = {err:.3g} (limit {MAX_RELATIVE_ERROR})")
    if problems:
        report = divergence_report(sparq_eval, model_path, inputs, tmp_path)
        pytest.fail(f"{name} batch {batch}:\n  " + "\n  ".join(problems) + "\n" + report, pytrace=False)


@pytest.mark.parametrize("name", ["tiny_encoder", "mobilenet_v2"])
def test_same_result_for_any_thread_count(sparq_eval, models_dir, tmp_path, name):
    """Each output element is computed in a fixed order, so one thread and
    several give identical bits."""
    model_path = os.path.join(models_dir, name + ".onnx")
    inputs = sample_inputs(models_dir, name, 2)
    one = sparq_eval.eval(model_path, inputs, tmp_path, threads=1, tag="one")
    several = sparq_eval.eval(model_path, inputs, tmp_path, threads=3, tag="several")
    for out_name in one:
        assert np.array_equal(one[out_name], several[out_name]), \
            f"{name} output {out_name} differs between --threads 1 and --threads 3"


def test_missing_inputs_file_is_an_error(sparq_eval, models_dir, tmp_path):
    missing = tmp_path / "no_such_inputs.npz"
    proc = sparq_eval.run("eval", os.path.join(models_dir, "tiny_encoder.onnx"), "--inputs", missing,
                          "--save-outputs", tmp_path / "out.npz")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no_such_inputs.npz" in proc.stdout + proc.stderr, "the message should name the missing file"
    assert not (tmp_path / "out.npz").exists()


def test_inputs_without_a_model_input_is_an_error(sparq_eval, models_dir, tmp_path):
    # Two arrays: a single array of any name may feed a single-input model.
    inputs_path = tmp_path / "wrong_keys.npz"
    np.savez(inputs_path, input_idz=np.zeros((1, 32), np.int64), mask=np.ones((1, 32), np.int64))
    proc = sparq_eval.run("eval", os.path.join(models_dir, "tiny_encoder.onnx"), "--inputs", inputs_path,
                          "--save-outputs", tmp_path / "out.npz")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "input_ids" in proc.stdout + proc.stderr, "the message should name the missing model input"
