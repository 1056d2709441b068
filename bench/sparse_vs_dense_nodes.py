#!/usr/bin/env python3
"""Block-sparse INT8 convolutions against dense ones inside real models.

kernels_bench times the sparse kernel alone (bench/KERNELS.md); inside a
model a pruned QLinearConv also pays its im2col and requantization, where
the dense conv_s8 fuses them into its tile. This runs one pruned INT8 model
twice on sparq's executor, every pruned convolution forced sparse and then
forced dense (`sparq eval --kernel-table`), and compares the per-node
minimum times of `--trace` (1 thread). Per pruned convolution it prints
dense / sparse (> 1: sparse is faster) with its shape, and at the end the
median over the layers: the speed table's `conv` rows of block4x4 s8
(bench/kernel_speedups.csv) come from it.

  python3 bench/sparse_vs_dense_nodes.py --sparq build/bin/sparq MODEL.onnx DATA.npz [--runs 8]
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import tempfile

import onnx

HEADER = "backend,structure,precision,sparsity,speedup\n"


def node_times(sparq, model, data, runs, speedup):
    """Per node: (minimum ms over the runs, kernel), with block4x4 s8 at `speedup` in the table."""
    with tempfile.TemporaryDirectory() as tmp:
        table, trace = os.path.join(tmp, "table.csv"), os.path.join(tmp, "trace.json")
        with open(table, "w") as f:
            f.write(HEADER + f"cpu,block4x4,s8,0.5,{speedup}\n")
        subprocess.run([sparq, "eval", model, "--inputs", data, "--limit", str(runs), "--threads", "1", "--trace",
                        trace, "--kernel-table", table], check=True, capture_output=True)
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
    times, kernels = collections.defaultdict(list), {}
    for e in events:
        if e.get("ph") == "X":
            times[e["name"]].append(e["dur"] / 1e3)
            kernels[e["name"]] = str(e.get("args", {}).get("kernel", ""))
    return {n: (min(v), kernels[n]) for n, v in times.items()}


def shapes(model):
    """Convolution name -> (K, N): reduction size and output channels, of a
    QDQ Conv (weights through a DequantizeLinear) or a QLinearConv."""
    graph = onnx.load(model, load_external_data=False).graph
    inits = {i.name: list(i.dims) for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    out = {}
    for n in graph.node:
        w = None
        if n.op_type == "QLinearConv" and len(n.input) > 3:
            w = n.input[3]
        elif n.op_type == "Conv" and len(n.input) > 1:
            w = n.input[1]
            if w in producer and producer[w].op_type == "DequantizeLinear":
                w = producer[w].input[0]
        d = inits.get(w, [])
        if len(d) == 4:
            out[n.name] = (d[1] * d[2] * d[3], d[0])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("data", help=".npz keyed by input name")
    p.add_argument("--sparq", default="build/bin/sparq")
    p.add_argument("--runs", type=int, default=8)
    args = p.parse_args()
    sparse = node_times(args.sparq, args.model, args.data, args.runs, 9.0)
    dense = node_times(args.sparq, args.model, args.data, args.runs, 0.1)
    kn = shapes(args.model)
    rows = []
    for name, (t, kernel) in sparse.items():
        if "spmm" in kernel and name in dense:
            rows.append((dense[name][0] / t, name, dense[name][0], t, kn.get(name)))
    rows.sort()
    print(f"{'dense/sparse':>12s}  {'node':44s} {'dense':>7s} {'sparse':>7s}  K, N")
    for ratio, name, d, s, shape in rows:
        print(f"{ratio:12.2f}  {name[-44:]:44s} {d:7.3f} {s:7.3f}  {shape}")
    if rows:
        ratios = [r[0] for r in rows]
        print(f"{len(rows)} sparse convolutions: median dense/sparse {statistics.median(ratios):.2f}, "
              f"{sum(r > 1 for r in ratios)} faster sparse (best {max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
