"""Task metrics of the real-model suite, in numpy, against the FP32 model.

Used by bench/accuracy_suite.py and tests/python/test_real_suite.py. Three
of them are also in sparq itself (include/sparq/metrics.h, recipe
`evaluate.metric`): top_k_overlap (`top5_overlap`), row_cosines averaged
(`mean_cosine`) and character_error_rate of ctc_greedy_decode
(`ctc_accuracy` = 100 - CER %); the CI slice checks that sparq and these give
the same numbers. The rest need more than two outputs (graded sentence
pairs for Spearman; YOLOv8 decoding thresholds for box matching) and stay
here.
"""
import numpy as np


# ---------------------------------------------------------------- classifiers

def top_k(scores, k):
    """Indices of the k largest scores per row, stable (ties: lower index)."""
    return np.argsort(-scores, axis=-1, kind="stable")[..., :k]


def top1_agreement(ref, out):
    """Fraction of rows whose argmax equals the reference's."""
    return float(np.mean(np.argmax(ref, -1) == np.argmax(out, -1)))


def top_k_overlap(ref, out, k=5):
    """Mean over rows of |topk(ref) & topk(out)| / k."""
    r, o = top_k(ref.reshape(-1, ref.shape[-1]), k), top_k(out.reshape(-1, out.shape[-1]), k)
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(r, o)]))


# ---------------------------------------------------------------- embeddings

def row_cosines(ref, out):
    """Cosine of each row (last axis flattened per sample) of out with ref;
    1 when both rows are zero, 0 when only one is."""
    r = ref.reshape(len(ref), -1).astype(np.float64)
    o = out.reshape(len(out), -1).astype(np.float64)
    nr, no = np.linalg.norm(r, axis=1), np.linalg.norm(o, axis=1)
    dot = np.sum(r * o, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = dot / (nr * no)
    cos = np.where((nr == 0) & (no == 0), 1.0, np.where((nr == 0) | (no == 0), 0.0, cos))
    return cos


def ranks(x):
    """Ranks from 1, ties get their average rank."""
    x = np.asarray(x, np.float64)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x), np.float64)
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        r[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return r


def spearman(x, y):
    """Spearman's rank correlation (Pearson of average ranks); NaN when
    either side is constant or there are fewer than 2 values."""
    if len(x) < 2:
        return float("nan")
    rx, ry = ranks(x), ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    den = np.sqrt(np.sum(rx * rx) * np.sum(ry * ry))
    return float(np.sum(rx * ry) / den) if den > 0 else float("nan")


def pair_similarities(emb, pairs):
    """Cosine of the embeddings of each (a, b, score) pair."""
    a = emb[[p[0] for p in pairs]].astype(np.float64)
    b = emb[[p[1] for p in pairs]].astype(np.float64)
    return np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


# ---------------------------------------------------------------- detector

def decode_yolov8(pred, score_threshold, nms_iou):
    """Boxes of one YOLOv8 output [4 + C, A] (cx, cy, w, h, class scores):
    anchors whose best class score >= score_threshold, then class-agnostic
    greedy NMS at nms_iou in descending score (ties: lower anchor first).
    Returns [(x1, y1, x2, y2, score, cls)]."""
    pred = np.asarray(pred, np.float64)
    scores = pred[4:]
    cls = np.argmax(scores, 0)
    best = scores[cls, np.arange(scores.shape[1])]
    keep = np.nonzero(best >= score_threshold)[0]
    order = keep[np.argsort(-best[keep], kind="stable")]
    boxes = []
    for i in order:
        cx, cy, w, h = pred[:4, i]
        box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, best[i], int(cls[i]))
        if all(iou(box, b) <= nms_iou for b in boxes):
            boxes.append(box)
    return boxes


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def match_boxes(ref, out, iou_threshold=0.5):
    """Greedy matching of out's boxes to ref's: each ref box in descending
    score takes the unmatched out box of its class with the highest IoU,
    when that IoU >= iou_threshold. Returns (matched, |ref|, |out|, sum of
    |score drift| over the matches)."""
    used = [False] * len(out)
    matched, drift = 0, 0.0
    for r in sorted(ref, key=lambda b: -b[4]):
        best, best_iou = -1, iou_threshold
        for j, o in enumerate(out):
            if used[j] or o[5] != r[5]:
                continue
            v = iou(r, o)
            if v >= best_iou and (best < 0 or v > best_iou):
                best, best_iou = j, v
        if best >= 0:
            used[best] = True
            matched += 1
            drift += abs(out[best][4] - r[4])
    return matched, len(ref), len(out), drift


def detection_metrics(ref, out, score_threshold=0.25, nms_iou=0.45):
    """Over a batch of YOLOv8 outputs [N, 4 + C, A]: recall of the FP32 boxes
    at IoU 0.5 (1 when FP32 has none), precision, mean |score drift| of the
    matches, and the FP32 box count."""
    m = nr = no = 0
    drift = 0.0
    for r, o in zip(ref, out):
        a, b, c, d = match_boxes(decode_yolov8(r, score_threshold, nms_iou), decode_yolov8(o, score_threshold, nms_iou))
        m, nr, no, drift = m + a, nr + b, no + c, drift + d
    return {"box_recall": m / nr if nr else 1.0, "box_precision": m / no if no else 1.0,
            "score_drift": drift / m if m else 0.0, "fp32_boxes": nr}


# ---------------------------------------------------------------- CTC recognizer

def ctc_greedy_decode(probs, blank=0):
    """Per row of [N, T, C]: argmax per step (first on ties), repeats merged,
    blanks dropped."""
    seqs = []
    for row in np.argmax(probs, -1):
        seq, prev = [], -1
        for c in row:
            if c != prev and c != blank:
                seq.append(int(c))
            prev = c
        seqs.append(seq)
    return seqs


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def character_error_rate(ref_seqs, out_seqs):
    """Sum of edit distances over the sum of reference lengths (0 when both
    are empty, edits count when only the references are)."""
    edits = sum(edit_distance(r, o) for r, o in zip(ref_seqs, out_seqs))
    total = sum(len(r) for r in ref_seqs)
    return edits / total if total else float(edits > 0)


# ---------------------------------------------------------------- detectors of events (VAD)

def decision_agreement(ref, out, threshold=0.5):
    """Fraction of values on the same side of threshold as the reference's
    (a value equal to it counts as above): a voice-activity detector's
    speech / no-speech decisions."""
    return float(np.mean((np.asarray(ref) >= threshold) == (np.asarray(out) >= threshold)))


# ---------------------------------------------------------------- dense maps

def binary_map_iou(ref, out, threshold=0.3):
    """IoU of the two maps binarized at threshold (1 when both are empty)."""
    r, o = ref > threshold, out > threshold
    union = np.sum(r | o)
    return float(np.sum(r & o) / union) if union else 1.0
