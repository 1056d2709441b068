#!/usr/bin/env python3
"""Turns kernels_bench JSON output into the Markdown tables of bench/KERNELS.md.

  OMP_NUM_THREADS=1 build/bin/kernels_bench --benchmark_min_time=0.2 --benchmark_repetitions=3 \\
      --benchmark_report_aggregates_only=true --benchmark_format=json > kernels.json
  python3 bench/kernels_table.py kernels.json [--speedups bench/kernel_speedups.csv]

With --speedups it also writes the kernel speed table (sparq/kernel_table.h)
that the executor compiles in (which pruned INT8 layers run sparse) and that
`prune.structure: auto` reads (prune.kernel_table): per sparse structure and
precision, the median over the layers of its speed-up over the dense kernel
of that precision (see SPEEDUPS), at the sparsity the benchmark uses.

Table 1: median dense-equivalent GOPS (2*M*N*K per call) per layer and kernel.
Table 2: speed-ups (ratios of those GOPS).
"""
import json
import re
import statistics
import sys

KERNELS = ["f32_ref", "f32_dense", "f32_onednn", "s8_onednn", "s8_dense", "s8_conv", "f32_bsr4x4", "s8_bsr4x4",
           "s8_bsr4x4_50", "f32_nm24", "s8_nm24", "s8_nm48"]
RATIOS = [  # (numerator, denominator)
    ("f32_dense", "f32_onednn"),
    ("s8_dense", "f32_dense"),
    ("s8_dense", "f32_ref"),
    ("s8_dense", "s8_onednn"),
    ("f32_bsr4x4", "f32_ref"),
    ("f32_bsr4x4", "f32_onednn"),
    ("f32_bsr4x4", "f32_dense"),
    ("s8_bsr4x4", "s8_dense"),
    ("s8_bsr4x4", "s8_onednn"),
    ("s8_bsr4x4_50", "s8_dense"),
    ("s8_bsr4x4", "s8_conv"),
    ("s8_bsr4x4_50", "s8_conv"),
    ("s8_nm24", "s8_conv"),
    ("f32_nm24", "f32_onednn"),
    ("s8_nm24", "s8_dense"),
    ("s8_nm48", "s8_dense"),
]

# (structure, precision, sparsity benchmarked, sparse kernel, dense kernel it replaces).
# FP32 is compared with sparq's dense FP32 GEMM (gemm_f32), the kernel a dense layer runs.
SPEEDUPS = [
    ("block4x4", "s8", 0.5, "s8_bsr4x4_50", "s8_dense"),
    ("block4x4", "s8", 0.8, "s8_bsr4x4", "s8_dense"),  # pruned then INT8: the main job
    ("block4x4", "f32", 0.8, "f32_bsr4x4", "f32_dense"),
    ("2:4", "s8", 0.5, "s8_nm24", "s8_dense"),
    ("2:4", "f32", 0.5, "f32_nm24", "f32_dense"),
    ("4:8", "s8", 0.5, "s8_nm48", "s8_dense"),
]

# Rows keyed by a shape class (sparq/kernel_table.h): the median over the
# benchmark layers of that class. A convolution's dense INT8 kernel is conv_s8
# (s8_conv: the layers with that kernel are the convolutions), a MatMul's
# gemm_s8 (s8_dense). 2:4 and 4:8 against conv_s8 lose below K = 2048.
# block4x4's `conv` rows are not written here: the kernel alone beats conv_s8
# from K = 160 on (s8_bsr4x4 / s8_conv), but inside real models the pruned
# convolutions, with their im2col and requantization, lose (median 0.78x at
# 70% zero blocks, 0.80x at 85%): bench/sparse_vs_dense_nodes.py measures
# them, and its medians are those rows.
SHAPE_SPEEDUPS = [
    ("2:4", "s8", 0.5, "s8_nm24", "s8_conv", "conv:k<2048"),
    ("2:4", "s8", 0.5, "s8_nm24", "s8_conv", "conv:k>=2048"),
    ("2:4", "s8", 0.5, "s8_nm24", "s8_dense", "matmul"),
    ("4:8", "s8", 0.5, "s8_nm48", "s8_conv", "conv:k<2048"),
    ("4:8", "s8", 0.5, "s8_nm48", "s8_conv", "conv:k>=2048"),
    ("4:8", "s8", 0.5, "s8_nm48", "s8_dense", "matmul"),
]


def in_shape_class(layer: str, kernels: dict, shape: str) -> bool:
    """Whether the benchmark layer ("name/M.._N.._K..") is in the class."""
    conv = "s8_conv" in kernels
    kind, _, bound = shape.partition(":")
    if (kind == "conv") != conv:
        return False
    if not bound:
        return True
    k = int(re.search(r"_K(\d+)", layer).group(1))
    return k < int(bound[2:]) if bound.startswith("k<") else k >= int(bound[3:])


def write_speedups(rows: dict, out_path: str) -> None:
    lines = ["# Written by bench/kernels_table.py --speedups from kernels_bench (see bench/KERNELS.md):",
             "# median over the benchmark's layers of sparse / dense throughput at the same precision;",
             "# rows with a shape class over that class's layers, against the dense kernel such a layer",
             "# runs (conv_s8 for convolutions: SHAPE_SPEEDUPS in the script); block4x4's conv rows",
             "# come from bench/sparse_vs_dense_nodes.py (add them by hand).",
             "backend,structure,precision,sparsity,speedup,shape"]
    for structure, precision, sparsity, sparse, dense in SPEEDUPS:
        ratios = sorted(ks[sparse][0] / ks[dense][0] for ks in rows.values() if sparse in ks and dense in ks)
        if ratios:
            lines.append(f"cpu,{structure},{precision},{sparsity},{statistics.median(ratios):.2f},any")
    for structure, precision, sparsity, sparse, dense, shape in SHAPE_SPEEDUPS:
        ratios = sorted(ks[sparse][0] / ks[dense][0] for layer, ks in rows.items()
                        if sparse in ks and dense in ks and in_shape_class(layer, ks, shape))
        if ratios:
            lines.append(f"cpu,{structure},{precision},{sparsity},{statistics.median(ratios):.2f},{shape}")
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(path, speedups_path=None):
    with open(path) as f:
        data = json.load(f)
    rows = {}  # layer -> kernel -> (gops, label, cv)
    cvs = {}
    for b in data["benchmarks"]:
        name = b.get("run_name", b["name"])
        layer, kernel = name.rsplit("/", 1)
        agg = b.get("aggregate_name")
        if agg == "cv":
            cvs[(layer, kernel)] = b["real_time"]
        if b.get("run_type") == "aggregate" and agg != "median":
            continue
        rows.setdefault(layer, {})[kernel] = (b["GOPS"], b.get("label", ""))
    kernels = [k for k in KERNELS if any(k in ks for ks in rows.values())]
    print("| layer (M x N x K) | " + " | ".join(kernels) + " |")
    print("|---|" + "---:|" * len(kernels))
    for layer, ks in rows.items():
        cells = []
        for k in kernels:
            cells.append(f"{ks[k][0]:.0f}" if k in ks else "-")
        print(f"| {layer} | " + " | ".join(cells) + " |")
    print()
    ratios = [r for r in RATIOS if r[0] in kernels and r[1] in kernels]
    print("| layer | " + " | ".join(f"{a} / {b}" for a, b in ratios) + " |")
    print("|---|" + "---:|" * len(ratios))
    for layer, ks in rows.items():
        cells = [f"{ks[a][0] / ks[b][0]:.2f}" if a in ks and b in ks else "-" for a, b in ratios]
        print(f"| {layer.split('/M')[0]} | " + " | ".join(cells) + " |")
    if cvs:
        print()
        print(f"Largest coefficient of variation over the repetitions: {max(cvs.values()) * 100:.1f}%")
    print()
    print("Kernels that ran: " + ", ".join(sorted({f'`{v[1].split()[0]}`' for ks in rows.values() for v in ks.values()})))


    if speedups_path:
        write_speedups(rows, speedups_path)


if __name__ == "__main__":
    args = sys.argv[1:]
    out = None
    if "--speedups" in args:
        i = args.index("--speedups")
        out = args[i + 1]
        del args[i:i + 2]
    main(args[0], out)
