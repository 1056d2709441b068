#!/usr/bin/env python3
"""Compares a compressed ONNX model as computed by sparq and by onnxruntime,
node by node, each node on equal inputs.

sparq runs the whole model once and saves every float and 8-bit tensor; then
each node runs alone in onnxruntime (no graph optimizations) on the inputs
sparq gave it. So a difference is that node's own and does not carry on to
the nodes after it. The differences accepted:

  * float32 outputs: within `rtol` (1e-5) of the tensor's largest magnitude
    (sums in another order: Conv, MatMul, Gemm differ by ~1e-7);
  * int8/uint8 outputs (QuantizeLinear, QLinear ops): at most one step, in at
    most MAX_FLIP_FRACTION of the elements (a value on a .5 rounding tie);
  * float16 outputs: at most one float16 ulp at the tensor's largest
    magnitude, in at most MAX_FLIP_FRACTION of the elements.

Why not compare whole-model runs this tightly: a Conv that differs by 1e-7
moves a value across a QuantizeLinear rounding boundary now and then, and the
flipped step then spreads through every later layer (digits QDQ: 2.7e-4 of
max|logits|; tiny_encoder: 1.5e-2). And onnxruntime's CPU provider has few
float16 kernels: it casts around the others to float32 and removes the
Cast(fp32->fp16)->Cast(fp16->fp32) pairs that result, so in a whole-model
run it skips float16 roundings that the model specifies (even of tensors
that are graph outputs). On equal inputs both disappear.

Usage: python3 tools/quant_compare.py MODEL.onnx INPUTS.npz [--sparq BIN]
"""
import argparse
import os
import sys
import tempfile

import numpy as np

import find_divergence

# Largest fraction of a tensor's elements that may round to the neighbouring
# int8 step or float16 value on equal inputs. A flip needs a value within
# ~1e-7 (relative) of a rounding tie: with 256 int8 steps that is a fraction
# of the order of 1e-7 * 256, far below this bound; a wrong scale, zero
# point or rounding mode would touch far more.
MAX_FLIP_FRACTION = 1e-3


def sqnr_db(reference: np.ndarray, output: np.ndarray) -> float:
    """10 log10(sum ref^2 / sum (ref - out)^2); inf when they are equal."""
    ref = reference.astype(np.float64)
    noise = float(np.sum((ref - output.astype(np.float64)) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0.0:
        return float("inf")
    return 10.0 * np.log10(signal / noise) if signal > 0 else float("-inf")


def top1_agreement(reference: np.ndarray, output: np.ndarray) -> float:
    """Fraction of rows (over the last axis) with the same argmax."""
    return float(np.mean(reference.argmax(-1) == output.argmax(-1)))


def run_onnxruntime(model_path: str, inputs: dict, optimize: bool) -> dict:
    """onnxruntime's CPU provider, with ORT_ENABLE_ALL (integer kernels,
    fusions) or ORT_DISABLE_ALL (every node as written)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    options.log_severity_level = 3  # no warnings about hardware-specific optimized graphs
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    feeds = {i.name: inputs[i.name] for i in session.get_inputs()}
    return dict(zip(names, session.run(names, feeds)))


def fp16_ulp(magnitude: float) -> float:
    """The spacing of float16 values at `magnitude`."""
    return float(np.spacing(np.float16(min(abs(magnitude), 65504.0))))


def _sparq_can_save(type_proto) -> bool:
    """Tensors `sparq eval` saves: float or 8-bit integer, rank >= 1 (it
    concatenates outputs along the first axis and refuses scalars)."""
    import onnx

    if type_proto is None or not type_proto.HasField("tensor_type"):
        return True
    t = type_proto.tensor_type
    kinds = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
             onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
    return t.elem_type in kinds and (not t.HasField("shape") or len(t.shape.dim) >= 1)


def _run_single_node(model, node, feeds: dict, initializers: dict) -> dict:
    """Runs one node of `model` alone in onnxruntime (no optimizations)."""
    import onnx
    from onnx import helper, numpy_helper

    graph_inputs, inits, seen = [], [], set()
    for name in node.input:
        if not name or name in seen:
            continue
        seen.add(name)
        if name in initializers:
            inits.append(initializers[name])
        else:
            value = feeds[name]
            graph_inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), list(value.shape)))
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    graph = helper.make_graph([node], "single_node", graph_inputs, outputs, inits)
    single = helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(single.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {g.name: feeds[g.name] for g in graph_inputs})))


def compare_nodes(model_path: str, inputs: dict, sparq_bin: str, work_dir: str = None, rtol: float = 1e-5) -> list:
    """Compares every node of the model in isolation: sparq runs the whole
    model once with every float and 8-bit tensor saved; then each node runs
    alone in onnxruntime (no graph optimizations) on the inputs sparq gave it
    (values sparq cannot save, such as shape arithmetic and scalars, come
    from onnxruntime's own run of the model). Returns one dict per compared
    tensor in node order: node, op_type, output, shape, dtype, err
    (max|diff| / max|ort|), max_abs, ref_max, fraction (of elements beyond
    rtol * max|ort|, or differing at all for integers), ok and why."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(model_path)
    for_ort, original = find_divergence.expose_all_tensors(model, keep=lambda t: True)
    for_sparq, _ = find_divergence.expose_all_tensors(model, keep=_sparq_can_save)
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        ort_path = os.path.join(tmp, "all.onnx")
        onnx.save(for_ort, ort_path)
        ort_values = run_onnxruntime(ort_path, inputs, optimize=False)
        sparq_path = os.path.join(tmp, "exposed.onnx")
        onnx.save(for_sparq, sparq_path)
        inputs_path = os.path.join(tmp, "inputs.npz")
        np.savez(inputs_path, **inputs)
        batch = len(next(iter(inputs.values())))
        sparq_values = find_divergence.run_sparq(sparq_bin, sparq_path, inputs_path, os.path.join(tmp, "out.npz"),
                                                 batch=batch)
    initializers = {i.name: i for i in for_ort.graph.initializer}
    rows = []
    for node in for_ort.graph.node:
        if node.op_type == "Constant" or not any(o in sparq_values for o in node.output):
            continue
        feeds = {}
        for name in node.input:
            if name and name not in initializers:
                feeds[name] = sparq_values[name] if name in sparq_values else (
                    inputs[name] if name in inputs else ort_values[name])
        want = _run_single_node(for_ort, node, feeds, initializers)
        for name in node.output:
            if name not in sparq_values or name not in want:
                continue
            row = {"node": node.name, "op_type": node.op_type, "output": original.get(name, name)}
            row.update(_difference(want[name], sparq_values[name], rtol))
            row["ok"], row["why"] = _judge(for_ort.graph, node, row, rtol)
            rows.append(row)
    return rows


def _difference(want: np.ndarray, got: np.ndarray, rtol: float) -> dict:
    row = {"shape": tuple(want.shape), "dtype": str(want.dtype)}
    if got.shape != want.shape or got.dtype != want.dtype:
        row.update(err=float("inf"), max_abs=float("inf"), ref_max=0.0, fraction=1.0,
                   mismatch=f"sparq gave {got.dtype}{list(got.shape)}")
        return row
    w64, g64 = want.astype(np.float64), got.astype(np.float64)
    diff = np.abs(w64 - g64)
    diff[np.isnan(w64) & np.isnan(g64)] = 0.0
    diff[np.isnan(w64) != np.isnan(g64)] = np.inf
    ref_max = float(np.max(np.abs(np.nan_to_num(w64)))) if want.size else 0.0
    max_abs = float(np.max(diff)) if diff.size else 0.0
    integer = np.issubdtype(want.dtype, np.integer)
    limit = 0.0 if integer else (rtol * ref_max if ref_max > 0 else rtol)
    row.update(max_abs=max_abs, ref_max=ref_max, err=max_abs / ref_max if ref_max > 0 else max_abs,
               fraction=float(np.mean(diff > limit)) if diff.size else 0.0)
    return row


def _judge(graph, node, row, rtol):
    """Whether one node's output difference, on equal inputs, is only rounding."""
    if "mismatch" in row:
        return False, row["mismatch"]
    dtype = row["dtype"]
    if dtype in ("int8", "uint8"):
        # QuantizeLinear or a QLinear op: the same rounding of nearly the same
        # float, except near a .5 tie where x/scale and x*(1/scale) or float
        # and double requantization round apart.
        if row["max_abs"] == 0:
            return True, "equal"
        if row["max_abs"] <= 1 and row["fraction"] <= MAX_FLIP_FRACTION:
            return True, f"rounding flip: 1 step in {100 * row['fraction']:.3g}% of elements"
        return False, (f"differs by up to {row['max_abs']:.0f} steps in {100 * row['fraction']:.3g}% of elements "
                       f"(a rounding flip is 1 step in <= {100 * MAX_FLIP_FRACTION:.3g}%)")
    if dtype == "float16":
        ulps = row["max_abs"] / fp16_ulp(row["ref_max"])
        if ulps <= 1.0 and row["fraction"] <= MAX_FLIP_FRACTION:
            return True, (f"float16 rounding: {ulps:.3g} ulp at max|ort| = {row['ref_max']:.4g}, "
                          f"{100 * row['fraction']:.3g}% of elements")
        return False, (f"differs by {ulps:.3g} float16 ulps at max|ort| = {row['ref_max']:.4g} in "
                       f"{100 * row['fraction']:.3g}% of elements")
    if row["err"] <= rtol:
        return True, f"within {row['err']:.2g} of max|ort|"
    return False, f"differs by {row['err']:.3g} of max|ort| (limit {rtol:g}) on equal inputs"


def summarize(rows: list, show: int = 8) -> str:
    bad = [r for r in rows if not r["ok"]]
    flips = [r for r in rows if r["ok"] and r["fraction"] > 0 and r["dtype"] in ("int8", "uint8", "float16")]
    lines = [f"{len(rows)} node outputs compared on equal inputs: {len(bad)} differ beyond rounding, "
             f"{len(flips)} with int8/float16 rounding flips"]
    for r in bad[:show] + flips[:max(0, show - len(bad))]:
        tag = "ok  " if r["ok"] else "BAD "
        lines.append(f"  {tag}{r['op_type']:<18} {r['node']!r} {r['shape']} {r['dtype']}: {r['why']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("inputs", help=".npz keyed by the model's input names")
    parser.add_argument("--sparq", default=os.environ.get("SPARQ_BIN"), help="sparq binary (default $SPARQ_BIN)")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--show", type=int, default=20)
    args = parser.parse_args(argv)
    if not args.sparq:
        parser.error("give --sparq or set SPARQ_BIN")
    with np.load(args.inputs) as f:
        inputs = {k: f[k] for k in f.files}
    rows = compare_nodes(args.model, inputs, args.sparq, rtol=args.rtol)
    print(summarize(rows, args.show))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
