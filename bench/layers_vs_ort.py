#!/usr/bin/env python3
"""sparq against onnxruntime layer by layer: one model, 1 thread, batch 1.

sparq's per-node times come from `sparq eval --trace`, onnxruntime's from its
profiler, both on the same file and samples. Per node the table gives the
MINIMUM over the runs of each side's time: both are wall times, and on a
machine shared with other work the minimum is the closest to an uncontended
run (medians still carry the other processes). onnxruntime names a fused node
after its output (`X_output_0_nchwc`) or, for a Conv fused with its
activation, after the activation node; both are mapped back to the Conv.
sparq's FusedConv includes the fused activation (SiLU, Clip), onnxruntime's
Conv includes Relu / Clip but not SiLU (its QuickGelu node).

  python3 bench/layers_vs_ort.py --sparq build/bin/sparq MODEL.onnx DATA.npz [--runs 16] [--op Conv]

sparq's PointwiseDepthwise (a 1x1 Conv into a depthwise one) is compared with
the sum of onnxruntime's two nodes. Rows are sorted by sparq's loss (sparq - onnxruntime) with each layer's shape
(input channels, output channels, window, groups, input plane).
"""
import argparse
import collections
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
import onnxruntime as ort


def sparq_node_times(sparq, model, data, runs):
    trace = tempfile.mktemp(suffix=".json")
    subprocess.run([sparq, "eval", model, "--inputs", data, "--batch", "1", "--threads", "1", "--limit", str(runs),
                    "--trace", trace], check=True, capture_output=True)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    os.remove(trace)
    times, ops = collections.defaultdict(list), {}
    for e in events:
        if e.get("ph") == "X":
            times[e["name"]].append(e["dur"] / 1e3)
            ops[e["name"]] = e["cat"]
    return times, ops


def ort_node_times(model, data, runs, pointwise):
    """Per node times; pointwise[depthwise Conv] = the Conv that feeds it."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.gettempdir(), "layers_vs_ort")
    session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    arrays = np.load(data)
    names = [i.name for i in session.get_inputs()]
    for j in range(runs):
        session.run(None, {n: arrays[k][j:j + 1] for n, k in zip(names, arrays.files)})
    path = session.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    times, shapes = collections.defaultdict(list), {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][:-len("_kernel_time")]
        for suffix in ("_output_0_nchwc", "_nchwc", "_output_0"):
            if name.endswith(suffix):
                name = name[:-len(suffix)]
                break
        times[name].append(e["dur"] / 1e3)
        shapes[name] = [list(v.values())[0] for v in e["args"].get("input_type_shape", [])]
    # A Conv fused with its activation is named after the activation node.
    graph = onnx.load(model, load_external_data=False).graph
    producer = {o: n for n in graph.node for o in n.output}
    for n in graph.node:
        if n.op_type in ("Clip", "Relu", "Sigmoid", "Mul", "HardSigmoid") and n.input and n.input[0] in producer:
            src = producer[n.input[0]]
            if src.op_type == "Conv" and n.name in times and src.name not in times:
                times[src.name], shapes[src.name] = times[n.name], shapes[n.name]
    # sparq's PointwiseDepthwise is named after the depthwise Conv: add the
    # 1x1 Conv that feeds it (through its activation and a Pad) to onnxruntime's time.
    for n in graph.node:
        if n.op_type != "Conv" or n.name not in times or not n.input or n.input[0] not in producer:
            continue
        src = producer[n.input[0]]
        while src.op_type in ("Clip", "Relu", "Pad") and src.input[0] in producer:  # Pads fold into the Conv
            src = producer[src.input[0]]
        if src.op_type == "Conv" and src.name in times:
            pointwise[n.name] = src.name
    return times, shapes


def describe(shape):
    if len(shape) >= 2 and len(shape[0]) == 4 and len(shape[1]) == 4:
        x, w = shape[0], shape[1]
        groups = x[1] // w[1] if w[1] else 0
        return f"Cin {x[1]} Cout {w[0]} k{w[2]}x{w[3]} group {groups} in {x[2]}x{x[3]}"
    return " x ".join(str(s) for s in shape[:2])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("data", help=".npz keyed by input name (samples along the first axis)")
    p.add_argument("--sparq", default="build/bin/sparq")
    p.add_argument("--runs", type=int, default=16)
    p.add_argument("--op", default="Conv", help="sparq op types containing this (Conv: Conv and FusedConv)")
    args = p.parse_args()
    sq, sq_ops = sparq_node_times(args.sparq, args.model, args.data, args.runs)
    pointwise = {}
    ot, shapes = ort_node_times(args.model, args.data, args.runs, pointwise)
    rows = []
    for name, v in sq.items():
        fused = sq_ops[name] == "PointwiseDepthwise" and name in pointwise
        if args.op not in sq_ops[name] and not (fused and args.op == "Conv"):
            continue
        mine, theirs = min(v), (min(ot[name]) if name in ot else float("nan"))
        if fused:  # both of onnxruntime's nodes
            theirs += min(ot[pointwise[name]])
            name = f"{pointwise[name]} + {name}"
        rows.append((mine - theirs if name in ot else float("-inf"), name, mine, theirs, describe(shapes.get(name, []))))
    rows.sort(key=lambda r: -r[0])
    total_s, total_o = sum(r[2] for r in rows), sum(r[3] for r in rows if r[3] == r[3])
    print(f"{len(rows)} {args.op} nodes: sparq {total_s:.2f} ms, onnxruntime {total_o:.2f} ms (sums of per-node minima)")
    print(f"{'node':44s} {'sparq':>7s} {'ORT':>7s} {'loss':>7s}  shape")
    for loss, name, mine, theirs, desc in rows:
        print(f"{name[-44:]:44s} {mine:7.3f} {theirs:7.3f} {mine - theirs:7.3f}  {desc}")


if __name__ == "__main__":
    main()
