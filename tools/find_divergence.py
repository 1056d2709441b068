#!/usr/bin/env python3
"""Finds the first node where sparq's output departs from onnxruntime's.

Every node output of the model becomes a graph output (tensors renamed to
"t<N>" so that they are safe .npz keys), both onnxruntime and `sparq eval`
run that model on the same inputs, and each tensor is compared in the graph's
node order by its error relative to onnxruntime's largest magnitude:

    err = max|sparq - ort| / max|ort|

The report names each node whose output exceeds the threshold while all of
its inputs were within it: the place where the divergence starts, rather than
the later nodes that only carry it on.

Usage: python3 tools/find_divergence.py MODEL.onnx INPUTS.npz [--sparq BIN]
           [--threshold 1e-4] [--threads N] [--show N]
SPARQ_BIN is used when --sparq is not given.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max|got - want| / max|want| (absolute error when want is all zeros);
    inf when the shapes differ, NaN placement differs, or values are missing."""
    if got is None or got.shape != want.shape:
        return float("inf")
    if got.size == 0:
        return 0.0
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        return 0.0 if np.array_equal(got, want) else float("inf")
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return float("inf")
    finite = ~np.isnan(want)
    diff = np.abs(got[finite] - want[finite])
    if diff.size == 0:
        return 0.0
    scale = float(np.max(np.abs(want[finite])))
    err = float(np.max(diff))
    return err / scale if scale > 0 else err


def expose_all_tensors(model, keep=None):
    """Returns (model copy whose graph outputs are its original outputs and
    the node outputs for which keep(type_proto or None) is true (default
    is_per_sample_float: float tensors of rank >= 1), all renamed "t<N>" (safe
    .npz keys), and a dict from new name to original name)."""
    keep = keep or is_per_sample_float
    import onnx

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    if any(a.type == onnx.AttributeProto.GRAPH or a.type == onnx.AttributeProto.GRAPHS
           for n in graph.node for a in n.attribute):
        # Subgraphs may read outer tensors by name; renaming would break them.
        raise ValueError("models with control flow (If/Loop/Scan) are not supported")
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
        types = {vi.name: vi.type for vi in list(inferred.value_info) + list(inferred.output)}
    except Exception:  # inference failing only means outputs carry no types
        types = {}

    rename = {}
    for node in graph.node:
        for i, name in enumerate(node.output):
            if name:
                rename[name] = f"t{len(rename)}"
                node.output[i] = rename[name]
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]

    original_outputs = {o.name for o in graph.output}
    del graph.output[:]
    del graph.value_info[:]
    for old, new in rename.items():
        if old not in original_outputs and not keep(types.get(old)):
            continue
        vi = graph.output.add()
        vi.name = new
        if old in types:
            vi.type.CopyFrom(types[old])
    return model, {new: old for old, new in rename.items()}


def is_per_sample_float(type_proto) -> bool:
    """Whether a tensor is worth exposing: floating point with rank >= 1 (or
    of unknown type). `sparq eval` concatenates outputs along their first axis
    and refuses scalars; integer shape arithmetic (Shape, Gather, Concat) is
    checked through the float tensors that depend on it."""
    import onnx

    if type_proto is None or not type_proto.HasField("tensor_type"):
        return True
    t = type_proto.tensor_type
    floating = t.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                               onnx.TensorProto.BFLOAT16)
    return floating and (not t.HasField("shape") or len(t.shape.dim) >= 1)


def run_onnxruntime(model_path: str, inputs: dict, optimize: bool = False) -> dict:
    """Runs onnxruntime's CPU provider; graph optimizations off by default so
    that every node is computed as written."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_BASIC if optimize
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    feeds = {i.name: inputs[i.name] for i in session.get_inputs()}
    return dict(zip(names, session.run(names, feeds)))


def run_sparq(sparq_bin: str, model_path: str, inputs_path: str, out_path: str,
              threads: int = 0, batch: int = 0, timeout: float = 600) -> dict:
    """Runs `sparq eval` (all samples as one run when `batch` is their count);
    raises RuntimeError with sparq's messages on failure."""
    cmd = [sparq_bin, "eval", model_path, "--inputs", inputs_path, "--save-outputs", out_path]
    if batch:
        cmd += ["--batch", str(batch)]
    if threads:
        cmd += ["--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    with np.load(out_path) as f:
        return {k: f[k] for k in f.files}


def find_divergence(model_path: str, inputs: dict, sparq_bin: str, threshold: float = 1e-4,
                    threads: int = 0, work_dir: str = None) -> list:
    """Returns one dict per compared tensor, in node order: node (name),
    op_type, output (original tensor name), err, origin (True when this
    output exceeds the threshold and none of the node's inputs did)."""
    import onnx

    model = onnx.load(model_path)
    exposed, original_names = expose_all_tensors(model)
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        exposed_path = os.path.join(tmp, "exposed.onnx")
        onnx.save(exposed, exposed_path)
        inputs_path = os.path.join(tmp, "inputs.npz")
        np.savez(inputs_path, **inputs)
        want = run_onnxruntime(exposed_path, inputs)
        # One run over all samples: outputs such as Shape's are not per sample
        # and must not be concatenated across runs.
        batch = len(next(iter(inputs.values())))
        got = run_sparq(sparq_bin, exposed_path, inputs_path, os.path.join(tmp, "out.npz"), threads, batch)

    bad = set()  # tensors (new names) over the threshold
    rows = []
    for node in exposed.graph.node:
        inputs_bad = any(name in bad for name in node.input)
        for name in node.output:
            if not name or name not in want:
                continue
            err = relative_error(got.get(name), want[name])
            over = not err <= threshold
            if over:
                bad.add(name)
            rows.append({"node": node.name, "op_type": node.op_type, "output": original_names[name],
                         "err": err, "over": over, "origin": over and not inputs_bad,
                         "shape": tuple(want[name].shape)})
    return rows


def summarize(rows: list, show: int = 10) -> str:
    """A few lines for a test failure message or the terminal."""
    origins = [r for r in rows if r["origin"]]
    over = [r for r in rows if r["over"]]
    lines = [f"{len(over)} of {len(rows)} tensors over the threshold; divergence starts at "
             f"{len(origins)} node(s):"]
    for r in origins[:show]:
        lines.append(f"  {r['op_type']:<20} node {r['node']!r} output {r['output']!r} "
                     f"shape {r['shape']}: err {r['err']:.3g}")
    worst = sorted(rows, key=lambda r: -r["err"])[:show]
    lines.append("largest errors:")
    for r in worst:
        lines.append(f"  {r['op_type']:<20} node {r['node']!r}: err {r['err']:.3g}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("inputs", help=".npz keyed by the model's input names")
    parser.add_argument("--sparq", default=os.environ.get("SPARQ_BIN"), help="sparq binary (default $SPARQ_BIN)")
    parser.add_argument("--threshold", type=float, default=1e-4)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--show", type=int, default=10, help="how many nodes to list")
    parser.add_argument("--all", action="store_true", help="print every tensor's error")
    args = parser.parse_args(argv)
    if not args.sparq:
        parser.error("give --sparq or set SPARQ_BIN")
    with np.load(args.inputs) as f:
        inputs = {k: f[k] for k in f.files}
    rows = find_divergence(args.model, inputs, args.sparq, args.threshold, args.threads)
    if args.all:
        for r in rows:
            print(f"{r['err']:10.3g} {'*' if r['over'] else ' '} {r['op_type']:<20} {r['node']}")
    print(summarize(rows, args.show))
    return 1 if any(r["over"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
