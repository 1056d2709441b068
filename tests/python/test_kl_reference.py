"""`sparq calibrate --method kl` against an independent numpy implementation of
TensorRT's entropy calibration, as sparq documents it (calibrate/histogram.cc,
KlThreshold; include/sparq/calibrate.h):

  1. histogram of |x| over [0, R) in 2048 equal bins, R the smallest power
     of two above max|x| (sparq's grid, whatever the batching: it starts
     at such a power of two and doubles);
  2. bin 0 (the exact zeros of ReLU outputs and padding) is replaced by
     min(bin 0, bin 1) when bin 1 is populated;
  3. for each candidate i in 128..2048:
       P = the first i bins, with the outliers (all bins from i on) added to
           P[i-1];
       Q = the first i bins merged into 128 levels (i // 128 bins per level,
           the last level takes the remainder) and expanded back evenly over
           the nonzero bins of each level;
       both normalized, then smoothed (zeros get eps = 1e-4, nonzero entries
       give up eps * zeros / nonzeros; a candidate where an entry would be
       <= 0 is skipped);
       KL(P || Q) = sum p log(p / q);
     a candidate is eligible only when its expected squared error (values
     beyond t = i * bin_width clip to t, the rest round to a step of
     t / 127; each bin counts as its center) is no worse than that of t =
     the upper edge of the last nonzero bin (max): the guard that keeps KL
     from clipping a sparse long tail far below its range (issue 15);
  4. threshold = i * bin_width of the first eligible i with the smallest KL,
     at most absmax.

The thresholds must agree within one histogram bin: (a) on synthetic data
through one-node models (the thresholds of the model input and of the node's
output), (b) on the digits CNN's activations, taken from onnxruntime.
"""
import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import SOURCE_DIR, load_npz

BINS = 2048
QUANT_LEVELS = 128
EPS = 1e-4
DIGITS_DIR = os.path.join(SOURCE_DIR, "examples", "digits")


# ---------------------------------------------------------------------------
# The reference implementation.

def abs_histogram(x: np.ndarray, bins: int = BINS):
    """(counts, range, absmax) of |x| over [0, range) in `bins` bins, range
    the smallest power of two above absmax, binned as |x| * (bins / range)
    truncated."""
    a = np.abs(x.astype(np.float32)).ravel()
    absmax = float(a.max()) if a.size else 0.0
    if absmax == 0.0:
        counts = np.zeros(bins, np.int64)
        counts[0] = a.size
        return counts, 0.0, 0.0
    grid = float(2.0 ** (np.frexp(absmax)[1]))  # absmax = m * 2^e, m in [0.5, 1): 2^e > absmax
    index = np.floor(a.astype(np.float64) * (bins / grid)).astype(np.int64)
    return np.bincount(index, minlength=bins).astype(np.int64), grid, absmax


def _smooth(p: np.ndarray):
    """Zeros get EPS, nonzeros give up that mass; None when an entry would be <= 0."""
    zeros = p == 0
    n_zeros = int(zeros.sum())
    n_nonzeros = p.size - n_zeros
    if n_nonzeros == 0:
        return None
    out = np.where(zeros, EPS, p - EPS * n_zeros / n_nonzeros)
    return None if np.any(out <= 0) else out


def squared_error(counts: np.ndarray, bin_width: float, t: float, quant_levels: int = QUANT_LEVELS) -> float:
    """Expected squared error of clipping |x| at t and rounding to t / (levels - 1)."""
    s = t / (quant_levels - 1)
    x = (np.arange(counts.size) + 0.5) * bin_width
    xq = np.where(x >= t, t, s * np.rint(x / s))
    return float(np.sum(counts.astype(np.float64) * (x - xq) ** 2))


def kl_threshold(counts: np.ndarray, grid: float, quant_levels: int = QUANT_LEVELS, absmax: float = None) -> float:
    """TensorRT-style entropy calibration threshold from an |x| histogram
    over [0, grid); at most absmax (default: grid)."""
    bins = counts.size
    absmax = grid if absmax is None else absmax
    if grid == 0.0 or counts.sum() == 0:
        return 0.0
    hist = counts.astype(np.float64)
    if hist[1] > 0:
        hist[0] = min(hist[0], hist[1])
    width = grid / bins
    last = int(np.nonzero(counts)[0].max())
    max_error = squared_error(counts, width, (last + 1) * width, quant_levels)
    best_kl, best_i = np.inf, bins
    for i in range(quant_levels, bins + 1):
        if i < bins and squared_error(counts, width, i * width, quant_levels) > max_error:
            continue
        p = hist[:i].copy()
        p[i - 1] += hist[i:].sum()
        kept = hist[:i]
        per_level = i // quant_levels
        level = np.minimum(np.arange(i) // per_level, quant_levels - 1)
        level_sum = np.bincount(level, weights=kept, minlength=quant_levels)
        level_nonzero = np.bincount(level, weights=(kept != 0).astype(np.float64), minlength=quant_levels)
        q = np.zeros(i)
        nz = kept != 0
        q[nz] = level_sum[level[nz]] / level_nonzero[level[nz]]
        if p.sum() <= 0 or q.sum() <= 0:
            continue
        p = _smooth(p / p.sum())
        q = _smooth(q / q.sum())
        if p is None or q is None:
            continue
        kl = float(np.sum(p * np.log(p / q)))
        if kl < best_kl:
            best_kl, best_i = kl, i
    return min(best_i * width, absmax)


def reference_threshold(x: np.ndarray):
    """(threshold, bin width) of the numpy reference for the values x."""
    counts, grid, absmax = abs_histogram(x)
    return kl_threshold(counts, grid, absmax=absmax), grid / BINS


# ---------------------------------------------------------------------------
# Helpers.

def calibrate(sparq, model_path, data_path, out_path, samples: int) -> dict:
    """`sparq calibrate --method kl` with every sample in one batch."""
    proc = sparq.run("calibrate", model_path, "--data", data_path, "--method", "kl", "-o", out_path,
                     "--batch", samples, "--bins", BINS)
    assert proc.returncode == 0, f"sparq calibrate exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    with open(out_path) as f:
        table = json.load(f)
    assert table["method"] == "kl" and table["bins"] == BINS and table["samples"] == samples
    return table["tensors"]


def one_node_model(op_type: str, path: str) -> None:
    """x[N, F] -> op -> y, opset 17, dynamic batch."""
    node = helper.make_node(op_type, ["x"], ["y"], name=op_type.lower())
    graph = helper.make_graph([node], op_type.lower(),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4096])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4096])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def synthetic(kind: str) -> np.ndarray:
    """[64, 4096] float32 samples of a distribution."""
    rng = np.random.default_rng(sum(map(ord, kind)))  # a fixed seed per distribution
    shape = (64, 4096)
    if kind == "gaussian":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "laplace_outliers":
        x = rng.laplace(0.0, 1.0, shape)
        flat = x.reshape(-1)
        hits = rng.choice(flat.size, 40, replace=False)  # 40 of 262144 values 20-60x the scale
        flat[hits] = rng.uniform(20.0, 60.0, hits.size) * rng.choice([-1.0, 1.0], hits.size)
        return x.astype(np.float32)
    if kind == "relu_gaussian":
        return np.maximum(rng.standard_normal(shape) * 2.0 + 0.5, 0.0).astype(np.float32)
    if kind == "uniform":
        return rng.uniform(-3.0, 3.0, shape).astype(np.float32)
    if kind == "pixels":  # discrete values in steps of 1/16, like the digits images: bin 1 empty
        return (rng.integers(0, 17, shape) / 16.0).astype(np.float32)
    if kind == "bimodal":
        centers = rng.choice([-4.0, 4.0], shape)
        return (centers + 0.3 * rng.standard_normal(shape)).astype(np.float32)
    raise ValueError(kind)


DISTRIBUTIONS = ("gaussian", "laplace_outliers", "relu_gaussian", "uniform", "pixels", "bimodal")


def assert_within_one_bin(name: str, got: float, want: float, bin_width: float):
    assert abs(got - want) <= bin_width * (1 + 1e-6), (
        f"{name}: sparq threshold {got:.7g}, numpy reference {want:.7g}: differ by "
        f"{abs(got - want) / bin_width:.2f} bins (bin width {bin_width:.4g})")


# ---------------------------------------------------------------------------
# Tests.

def test_reference_on_a_known_case():
    """The reference itself: a uniform histogram keeps everything (no bin
    is an outlier worth clipping), a long sparse tail is clipped."""
    counts = np.full(BINS, 100, np.int64)
    assert kl_threshold(counts, 1.0) == pytest.approx(1.0)
    tail = np.zeros(BINS, np.int64)
    tail[:256] = 10000
    tail[2047] = 1
    assert kl_threshold(tail, 1.0) < 0.2


@pytest.mark.parametrize("kind", DISTRIBUTIONS)
@pytest.mark.parametrize("op_type", ["Identity", "Relu"])
def test_matches_reference_on_synthetic_data(sparq, tmp_path, op_type, kind):
    model_path = str(tmp_path / f"{op_type}.onnx")
    one_node_model(op_type, model_path)
    x = synthetic(kind)
    data_path = str(tmp_path / "data.npz")
    np.savez(data_path, x=x)
    tensors = calibrate(sparq, model_path, data_path, str(tmp_path / "scales.json"), len(x))
    y = x if op_type == "Identity" else np.maximum(x, 0.0)
    for name, values in (("x", x), ("y", y)):
        assert name in tensors, f"no range for {name} in sparq's table: {sorted(tensors)}"
        want, bin_width = reference_threshold(values)
        t = tensors[name]
        assert t["abs_max"] == pytest.approx(float(np.abs(values).max()), rel=1e-6)
        assert_within_one_bin(f"{op_type} {kind} {name}", t["threshold"], want, bin_width)
        assert t["scale"] == pytest.approx(t["threshold"] / 127.0, rel=1e-6)
        assert t["zero_point"] == 0 and t["signed"]


def test_matches_reference_on_digits_activations(sparq, tmp_path):
    """Every activation of the digits CNN over its 256 calibration samples:
    onnxruntime gives the values, numpy the threshold."""
    import onnxruntime as ort

    model_path = os.path.join(DIGITS_DIR, "digits_cnn.onnx")
    data_path = os.path.join(DIGITS_DIR, "calib.npz")
    images = load_npz(data_path)["input"]
    tensors = calibrate(sparq, model_path, data_path, str(tmp_path / "scales.json"), len(images))

    # All float node outputs become graph outputs of a copy of the model.
    model = onnx.load(model_path)
    existing = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in existing:
                model.graph.output.add().name = name
    exposed = str(tmp_path / "exposed.onnx")
    onnx.save(model, exposed)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(exposed, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    activations = dict(zip(names, session.run(names, {"input": images})))
    activations["input"] = images

    compared = []
    for name, values in activations.items():
        if values.dtype != np.float32:
            continue
        assert name in tensors, f"sparq's table has no range for activation {name!r}"
        t = tensors[name]
        assert t["abs_max"] == pytest.approx(float(np.abs(values).max()), rel=1e-5), name
        assert t["min"] == pytest.approx(float(values.min()), rel=1e-5, abs=1e-6), name
        assert t["max"] == pytest.approx(float(values.max()), rel=1e-5, abs=1e-6), name
        want, bin_width = reference_threshold(values)
        assert_within_one_bin(name, t["threshold"], want, bin_width)
        compared.append(name)
    # input, 2 Conv, 2 Relu, MaxPool, Flatten, Gemm
    assert len(compared) == 8, compared
