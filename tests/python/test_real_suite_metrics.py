"""tools/real_suite_metrics.py on hand-made numbers (no model needed): the
cases of tests/evaluate/metrics_test.cc (sparq's C++ task metrics), so both
implementations keep one definition, plus the detector's box matching."""
import numpy as np
import pytest

import real_suite_metrics as M  # tools/, on sys.path through conftest


def test_top_k_overlap_matches_the_cpp_cases():
    ref = np.array([[0, 1, 2, 3], [9, 8, 1, 0]], np.float32)
    out = np.array([[0, 2, 1, 3], [8, 9, 1, 0]], np.float32)
    assert M.top_k_overlap(ref, out, 2) == pytest.approx((0.5 + 1.0) / 2)
    assert M.top_k_overlap(ref, out, 1) == pytest.approx(0.5)
    flat = np.ones((1, 3), np.float32)
    assert M.top_k_overlap(flat, flat, 2) == 1.0


def test_row_cosines_matches_the_cpp_cases():
    ref = np.array([[1, 0], [1, 1], [0, 0]], np.float32)
    out = np.array([[0, 1], [2, 2], [0, 0]], np.float32)
    np.testing.assert_allclose(M.row_cosines(ref, out), [0.0, 1.0, 1.0], atol=1e-15)


def test_ctc_decode_and_cer_match_the_cpp_cases():
    steps = [1, 1, 0, 1, 2, 2]
    probs = np.eye(3, dtype=np.float32)[steps][None]
    assert M.ctc_greedy_decode(probs) == [[1, 1, 2]]
    assert M.edit_distance([1, 2, 3, 4], [2, 1, 3, 5]) == 3
    assert M.edit_distance([], [4, 5]) == 2
    one = np.array([[[0, 1], [0, 1]]], np.float32)
    blank = np.array([[[1, 0], [1, 0]]], np.float32)
    ref = M.ctc_greedy_decode(np.concatenate([one, one]))
    out = M.ctc_greedy_decode(np.concatenate([one, blank]))
    assert M.character_error_rate(ref, out) == 0.5


def test_spearman_ranks_ties_by_average():
    assert M.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert M.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    np.testing.assert_allclose(M.ranks([5, 1, 5, 3]), [3.5, 1.0, 3.5, 2.0])
    assert np.isnan(M.spearman([1, 1, 1], [1, 2, 3]))


def test_yolov8_boxes_match_at_iou_half():
    # One image, 2 classes, 3 anchors: (cx, cy, w, h, score0, score1).
    pred = np.array([[50, 52, 200],   # cx
                     [50, 50, 200],   # cy
                     [20, 20, 10],    # w
                     [20, 20, 10],    # h
                     [0.9, 0.8, 0.1],  # class 0
                     [0.0, 0.0, 0.6]],  # class 1
                    np.float32)
    boxes = M.decode_yolov8(pred, 0.25, 0.45)
    # Anchor 1 overlaps anchor 0 (IoU 0.82) and is suppressed.
    assert [(round(b[4], 2), b[5]) for b in boxes] == [(0.9, 0), (0.6, 1)]
    shifted = pred.copy()
    shifted[0, 0] += 15  # the first box moves: IoU 0.14 with FP32's
    shifted[4, 1] = 0.0  # and its neighbour, which would match, is gone
    m = M.detection_metrics(pred[None], shifted[None])
    assert m["fp32_boxes"] == 2
    assert m["box_recall"] == pytest.approx(0.5)
    assert m["box_precision"] == pytest.approx(0.5)
    assert m["score_drift"] == pytest.approx(0.0, abs=1e-6)  # the class-1 box kept its score


def yolo_output(a0_cx, a0_score, a2_score):
    """The [6, 4] output of tests/evaluate/metrics_test.cc's YoloOutput."""
    return np.array([[a0_cx, 11, 50, 80], [10, 10, 50, 80], [10, 10, 20, 10], [10, 10, 20, 10],
                     [a0_score, 0.1, 0.2, 0.24], [0.1, 0.8, a2_score, 0.1]], np.float32)


def test_box_metrics_match_the_cpp_cases():
    """sparq's box_recall (ReferenceMetricsMatchBoxesOverBatches): the same
    numbers from the numpy definition, at Ultralytics' NMS IoU 0.7."""
    pred = yolo_output(10, 0.9, 0.3)
    assert [(round(b[4], 2), b[5]) for b in M.decode_yolov8(pred, 0.25, 0.7)] == [(0.9, 0), (0.3, 1)]
    assert len(M.decode_yolov8(pred, 0.25, 0.9)) == 3
    ref = np.stack([pred, pred])
    out = np.stack([yolo_output(10.5, 0.85, 0.24), pred])
    m = M.detection_metrics(ref, out, 0.25, 0.7)
    assert m["box_recall"] == pytest.approx(0.75)
    assert m["box_precision"] == pytest.approx(1.0)
    assert m["score_drift"] == pytest.approx(0.05 / 3, abs=1e-7)


def test_decision_agreement_counts_the_threshold_as_above():
    ref = np.array([[0.1], [0.5], [0.9], [0.49]], np.float32)
    out = np.array([[0.2], [0.49], [0.5], [0.51]], np.float32)
    assert M.decision_agreement(ref, out, 0.5) == pytest.approx(0.5)
    assert M.decision_agreement(ref, ref) == 1.0
