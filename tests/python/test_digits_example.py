"""The bundled example (examples/digits, made by tools/train_digits.py): its
files are consistent, and sparq reproduces onnxruntime's logits and accuracy."""
import os

import numpy as np
import onnx
import pytest

from conftest import SOURCE_DIR, load_npz
import find_divergence

DIGITS_DIR = os.path.join(SOURCE_DIR, "examples", "digits")
MODEL = os.path.join(DIGITS_DIR, "digits_cnn.onnx")
MAX_RELATIVE_ERROR = 1e-4
TARGET_ACCURACY = 0.95


@pytest.fixture(scope="module")
def eval_split():
    if not os.path.isfile(MODEL):
        pytest.fail(f"{MODEL} is missing; run: python3 tools/train_digits.py", pytrace=False)
    images = load_npz(os.path.join(DIGITS_DIR, "eval.npz"))["input"]
    labels = np.load(os.path.join(DIGITS_DIR, "eval_labels.npy"))
    return images, labels


def test_example_files_are_consistent(eval_split):
    images, labels = eval_split
    model = onnx.load(MODEL)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["input"]
    assert [o.name for o in model.graph.output] == ["logits"]
    assert os.path.getsize(MODEL) < 200 * 1024
    assert images.dtype == np.float32 and images.shape == (512, 1, 8, 8)
    assert 0.0 <= images.min() and images.max() <= 1.0
    assert labels.dtype == np.int64 and labels.shape == (512,)
    assert set(np.unique(labels)) == set(range(10))
    calib = load_npz(os.path.join(DIGITS_DIR, "calib.npz"))["input"]
    assert calib.dtype == np.float32 and calib.shape == (256, 1, 8, 8)


def test_onnxruntime_accuracy(eval_split):
    images, labels = eval_split
    logits = find_divergence.run_onnxruntime(MODEL, {"input": images})["logits"]
    accuracy = float((logits.argmax(1) == labels).mean())
    assert accuracy >= TARGET_ACCURACY


def test_sparq_matches_onnxruntime(sparq_eval, eval_split, tmp_path):
    images, labels = eval_split
    want = find_divergence.run_onnxruntime(MODEL, {"input": images})["logits"]
    got = sparq_eval.eval(MODEL, {"input": images}, tmp_path)
    assert list(got) == ["logits"]
    assert got["logits"].shape == want.shape and got["logits"].dtype == want.dtype
    err = find_divergence.relative_error(got["logits"], want)
    assert err < MAX_RELATIVE_ERROR, f"logits differ by {err:.3g} relative to max|ort|"
    assert np.array_equal(got["logits"].argmax(1), want.argmax(1)), "a predicted class differs"
