"""CI slice of the real-model suite for the YOLOv8n detector
(tools/make_real_suite.py's yolov8n_det): the detector recipe of
recipes/README.md (max calibration, uint8 activations, the first four
convolutions in FP16) gated on sparq's own `box_recall`, and that metric
equal to the numpy definition the benchmark uses (tools/real_suite_metrics.py)
on the same outputs.

Skips (does not fail) when nudenet (the weights) or scikit-image (the
photos) is not installed.
"""
import json
import os

import numpy as np
import pytest

from conftest import load_npz, make_real_suite_model

pytest.importorskip("nudenet", reason="nudenet is not installed (it ships the YOLOv8n weights)")
pytest.importorskip("skimage", reason="scikit-image is not installed (its sample photos are the data)")

import real_suite_metrics as M  # noqa: E402  (tools/, on sys.path through conftest)

MODEL = "yolov8n_det"
CALIB, EVAL = 16, 32
# The suite decodes with class-agnostic NMS at IoU 0.45 (meta.json "decode").
NMS_IOU = 0.45
FOUR_CONVS = r"/model\.0/conv/Conv|/model\.1/conv/Conv|/model\.2/cv1/conv/Conv|/model\.2/cv2/conv/Conv"
# FP32 boxes matched: 95-100% on the suite's 200 photos (bench/ACCURACY.md);
# the collapse this guards against (onnxruntime's static INT8) finds almost none.
MIN_BOX_RECALL = 0.75


@pytest.fixture(scope="module")
def suite_model(tmp_path_factory):
    return make_real_suite_model(tmp_path_factory, MODEL, CALIB, EVAL)


def test_int8_detector_keeps_the_fp32_boxes(sparq, suite_model, tmp_path):
    out_dir = tmp_path / "int8"
    recipe = tmp_path / "int8.yaml"
    recipe.write_text("version: 1\n"
                      f"model: {os.path.join(suite_model, 'model.onnx')}\n"
                      "data:\n"
                      f"  calibration: {os.path.join(suite_model, 'calib.npz')}\n"
                      f"  evaluation: {os.path.join(suite_model, 'eval.npz')}\n"
                      "  batch_size: 8\n"
                      "quantize:\n  precision: int8\n"
                      "  calibration:\n    method: max\n    symmetric: false\n"
                      f"  layers:\n    - match: '{FOUR_CONVS}'\n      precision: fp16\n"
                      "  fallback:\n    enabled: false\n"
                      f"output:\n  dir: {out_dir}\n  overwrite: true\n"
                      f"evaluate:\n  metric: box_recall\n  box_nms_iou: {NMS_IOU}\n  threads: 2\n"
                      "  gate:\n    max_drop: 100\n"
                      "report:\n  markdown: ''\n  junit: ''\n")
    proc = sparq.run("run", recipe, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out_dir / "report.json") as f:
        gate = json.load(f)["gate"]
    assert gate["metric"] == "box_recall"
    assert gate["output"] >= MIN_BOX_RECALL, gate

    # sparq's box metrics equal the numpy definition on sparq's own outputs.
    model = os.path.join(suite_model, "model.onnx")
    written = [p for p in os.listdir(out_dir) if p.endswith(".onnx")][0]
    data = os.path.join(suite_model, "eval.npz")

    def outputs(path, *extra):
        saved = tmp_path / (os.path.basename(path) + ".out.npz")
        proc = sparq.run("eval", path, "--inputs", data, "--json", "--save-outputs", saved, "--batch", 8,
                         "--threads", 2, *extra)
        assert proc.returncode == 0, proc.stderr
        out = load_npz(saved)
        return json.loads(proc.stdout), out[next(iter(out))]

    _, ref = outputs(model)
    rep, out = outputs(str(out_dir / written), "--reference", model, "--boxes", "--box-nms-iou", NMS_IOU)
    boxes = rep["reference"]["boxes"]
    want = M.detection_metrics(ref, out, 0.25, NMS_IOU)
    assert boxes["reference_boxes"] == want["fp32_boxes"]
    assert boxes["box_recall"] == pytest.approx(want["box_recall"])
    assert boxes["box_precision"] == pytest.approx(want["box_precision"])
    assert boxes["score_drift"] == pytest.approx(want["score_drift"], abs=1e-6)
    scores_ref, scores_out = ref[:, 4:].astype(np.float64), out[:, 4:].astype(np.float64)
    want_sqnr = 10 * np.log10(np.sum(scores_ref ** 2) / np.sum((scores_ref - scores_out) ** 2))
    assert boxes["class_score_sqnr_db"] == pytest.approx(want_sqnr, abs=1e-3)
