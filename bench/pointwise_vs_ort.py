#!/usr/bin/env python3
"""onnxruntime's speed on EfficientNet-Lite0's 1x1 convolutions, one node each.

The onnxruntime side of the effnet_lite0 rows of bench/kernels_bench.cc: a
one-node Conv model per shape (batch 1, NCHW, bias, random weights), run on
one intra-op thread; GOPS = 2 * positions * out_channels * in_channels per
run over the process CPU time (the machine may be shared). onnxruntime fuses
no neighbours here, so this is its convolution alone (NCHWc reorders of the
input and output included, as inside a model they would mostly be shared).

  python3 bench/pointwise_vs_ort.py [--seconds 0.5]
"""
import argparse
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# name, positions (h = w = sqrt), out channels, in channels: as in kernels_bench.cc.
SHAPES = [
    ("b1_expand_112", 112, 96, 16),
    ("b2_expand_56", 56, 144, 24),
    ("b2_project_56", 56, 24, 144),
    ("b4_expand_28", 28, 240, 40),
    ("b4_project_28", 28, 40, 240),
    ("b7_expand_14", 14, 480, 80),
    ("b7_project_14", 14, 80, 480),
    ("b10_expand_14", 14, 672, 112),
    ("b10_project_14", 14, 112, 672),
    ("b13_expand_7", 7, 1152, 192),
    ("b13_project_7", 7, 192, 1152),
    ("head_7", 7, 1280, 320),
]


def one_conv(side, n, k, rng):
    w = numpy_helper.from_array(rng.uniform(-1, 1, (n, k, 1, 1)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.uniform(-1, 1, (n,)).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1])
    graph = helper.make_graph([node], "pointwise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k, side, side])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n, side, side])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.5, help="CPU seconds per shape (default 0.5)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    print(f"onnxruntime {ort.__version__}, 1 thread")
    print(f"{'shape':<16} {'M':>6} {'N':>5} {'K':>5} {'us/run':>9} {'GOPS':>7}")
    for name, side, n, k in SHAPES:
        sess = ort.InferenceSession(one_conv(side, n, k, rng).SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        x = {"x": rng.uniform(-1, 1, (1, k, side, side)).astype(np.float32)}
        for _ in range(20):
            sess.run(None, x)
        runs, t0 = 0, time.process_time()
        while time.process_time() - t0 < args.seconds:
            for _ in range(20):
                sess.run(None, x)
            runs += 20
        per_run = (time.process_time() - t0) / runs
        m = side * side
        print(f"{name:<16} {m:>6} {n:>5} {k:>5} {per_run * 1e6:>9.1f} {2.0 * m * n * k / per_run * 1e-9:>7.1f}")


if __name__ == "__main__":
    main()
