#!/usr/bin/env python3
"""A model over 2 GB through sparq, end to end, with each process's peak RSS.

Builds a stack of `--layers` MatMul [B, K] x [K, K] float32 layers (Add of a
bias, Relu between; K = `--width`) whose weights live in one external data
file beside the model (10 x 8192^2 x 4 bytes = 2.7 GB by default), written
layer by layer so this script never holds more than one weight. Then runs,
each in its own process, timing it and reading its peak RSS (os.wait4):

  sparq run recipe.yaml        calibrate (max) -> INT8 QDQ, per-channel weights
                               -> eval vs FP32 (cosine gate) -> write with
                               external data
  sparq calibrate              the calibration step alone
  sparq eval int8 --reference  the evaluation step alone (--save-outputs)
  onnxruntime                  the written INT8 model on the same inputs,
                               compared with sparq's outputs

and prints one JSON object (and a Markdown table with --markdown).

  python bench/big_model.py --dir /work/big --sparq build/bin/sparq [--keep]

The files go to --dir (several GB: never the repository); they are deleted
at the end unless --keep. Run it on an otherwise idle machine: peak RSS
counts the page cache of mapped weights that the process touched.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np


def build_model(d, layers, width, samples, seed):
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    data_name = "big.onnx.data"
    inits, nodes = [], []
    offset = 0
    with open(os.path.join(d, data_name), "wb") as f:
        x = "x"
        for i in range(layers):
            w = (rng.standard_normal((width, width), dtype=np.float32) * np.float32(np.sqrt(2.0 / width)))
            b = (rng.standard_normal(width, dtype=np.float32) * np.float32(0.01))
            for name, arr in ((f"w{i}", w), (f"b{i}", b)):
                pad = (-offset) % 4096  # page-aligned offsets, as onnx's own writer uses
                f.write(b"\0" * pad)
                offset += pad
                raw = arr.tobytes()
                f.write(raw)
                t = TensorProto()
                t.name = name
                t.data_type = TensorProto.FLOAT
                t.dims.extend(arr.shape)
                t.data_location = TensorProto.EXTERNAL
                for k, v in (("location", data_name), ("offset", str(offset)), ("length", str(len(raw)))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
                offset += len(raw)
                inits.append(t)
            del w, b
            nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"mm{i}"], name=f"mm{i}"))
            nodes.append(helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"add{i}"], name=f"add{i}"))
            out = "y" if i == layers - 1 else f"relu{i}"
            if i == layers - 1:
                nodes.append(helper.make_node("Identity", [f"add{i}"], ["y"], name="out"))
            else:
                nodes.append(helper.make_node("Relu", [f"add{i}"], [out], name=f"relu{i}"))
            x = out
    graph = helper.make_graph(
        nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, os.path.join(d, "big.onnx"))  # small: the weights are external
    calib = rng.standard_normal((samples, width), dtype=np.float32)
    evals = rng.standard_normal((samples, width), dtype=np.float32)
    np.savez(os.path.join(d, "calib.npz"), x=calib)
    np.savez(os.path.join(d, "eval.npz"), x=evals)
    return offset


RECIPE = """version: 1
name: big_model
model: big.onnx
data:
  calibration: calib.npz
  evaluation: eval.npz
  batch_size: {batch}
quantize:
{quantize}
output:
  dir: out
  model: big.{precision}.onnx
  external_data: true
  overwrite: true
evaluate:
  metric: cosine
  threads: {threads}
  gate:
    max_drop: {max_drop}
report:
  json: report.json
"""


def recipe_text(batch, threads, precision="int8"):
    """The recipe: INT8 (max calibration, per channel) or INT4 weight-only RTN
    (block 32, MatMulNBits), which keeps a cosine near 0.97 on these random
    weights: its gate is looser."""
    quantize = ("  precision: int8\n  per_channel: true\n  calibration:\n    method: max\n  fallback:\n    enabled: false"
                if precision == "int8" else "  precision: int4\n  int4: {block_size: 32, method: rtn}")
    return RECIPE.format(batch=batch, threads=threads, quantize=quantize, precision=precision,
                         max_drop=0.01 if precision == "int8" else 0.05)


def run_measured(argv, cwd, env=None):
    """Runs argv; returns (rc, seconds, peak RSS MiB, stdout, stderr)."""
    start = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Read the pipes before waiting so a chatty child cannot block.
    out, err = p.stdout.read(), p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    secs = time.monotonic() - start
    return p.returncode, secs, usage.ru_maxrss / 1024.0, out.decode(errors="replace"), err.decode(errors="replace")


ORT_SCRIPT = r"""
import json, resource, sys, time
import numpy as np, onnxruntime as ort
model, inputs, outputs = sys.argv[1:4]
t0 = time.monotonic()
so = ort.SessionOptions()
so.intra_op_num_threads = int(sys.argv[4])
s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
x = np.load(inputs)["x"]
ys = [s.run(None, {"x": x[i:i + 8]})[0] for i in range(0, len(x), 8)]
np.save(outputs, np.concatenate(ys))
print(json.dumps({"seconds": time.monotonic() - t0}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="work folder (several GB; created)")
    ap.add_argument("--sparq", required=True, help="the sparq binary")
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--samples", type=int, default=32, help="calibration and evaluation samples each")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", default="run,calibrate,eval,ort", help="comma-separated subset")
    ap.add_argument("--keep", action="store_true", help="keep the files in --dir")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--precision", default="int8", choices=["int8", "int4"],
                    help="int8 (max calibration, per channel) or int4 (weight-only RTN, MatMulNBits, block 32)")
    a = ap.parse_args()

    os.makedirs(a.dir, exist_ok=True)
    sparq = os.path.abspath(a.sparq)
    steps = set(a.steps.split(","))
    res = {"precision": a.precision, "layers": a.layers, "width": a.width, "samples": a.samples, "batch": a.batch, "steps": {}}
    t0 = time.monotonic()
    res["weight_bytes"] = build_model(a.dir, a.layers, a.width, a.samples, a.seed)
    res["build_seconds"] = round(time.monotonic() - t0, 1)
    with open(os.path.join(a.dir, "recipe.yaml"), "w") as f:
        f.write(recipe_text(a.batch, a.threads, a.precision))

    def step(name, argv):
        rc, secs, rss, out, err = run_measured(argv, a.dir)
        res["steps"][name] = {"rc": rc, "seconds": round(secs, 1), "peak_rss_mib": round(rss)}
        if rc != 0:
            res["steps"][name]["error"] = (err or out)[-2000:]
        print(f"{name}: rc={rc} {secs:.1f} s, peak RSS {rss:.0f} MiB", file=sys.stderr)
        return rc, out

    try:
        if "run" in steps:
            rc, _ = step("run", [sparq, "run", "recipe.yaml"])
            rep = os.path.join(a.dir, "out", "report.json")
            if os.path.exists(rep):
                with open(rep) as f:
                    r = json.load(f)
                res["steps"]["run"]["report"] = {"cosine": r["gate"]["output"], "passed": r["gate"]["passed"],
                                                 "size": r["size"], "seconds": r["seconds"],
                                                 "peak_rss_mib": r.get("peak_rss_mib")}
            out_dir = os.path.join(a.dir, "out")
            res["written_bytes"] = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir)
                                       if n.startswith(f"big.{a.precision}.onnx"))
        if "calibrate" in steps:
            rc, out = step("calibrate", [sparq, "calibrate", "big.onnx", "--data", "calib.npz", "--method", "max",
                                         "--batch", str(a.batch), "-o", "scales.json", "--json"])
            if rc == 0:
                try:
                    res["steps"]["calibrate"]["report"] = {"peak_rss_mib": json.loads(out).get("peak_rss_mib")}
                except ValueError:
                    pass
        int8 = os.path.join("out", f"big.{a.precision}.onnx")  # the quantized model
        have_int8 = os.path.exists(os.path.join(a.dir, int8))
        if "eval" in steps and have_int8:
            rc, out = step("eval", [sparq, "eval", int8, "--inputs", "eval.npz", "--reference", "big.onnx",
                                    "--batch", str(a.batch), "--save-outputs", "sparq_out.npz", "--json"])
            if rc == 0:
                try:
                    e = json.loads(out)
                    res["steps"]["eval"]["report"] = {"cosine": e["reference"]["outputs"][0]["cosine"],
                                                      "sqnr_db": e["reference"]["outputs"][0]["sqnr_db"],
                                                      "peak_rss_mib": e.get("peak_rss_mib")}
                except (ValueError, KeyError, IndexError):
                    pass
        if "ort" in steps and have_int8:
            py = sys.executable
            rc, out = step("ort", [py, "-c", ORT_SCRIPT, int8, "eval.npz", "ort_out.npy", str(a.threads)])
            so = os.path.join(a.dir, "sparq_out.npz")
            if rc == 0 and os.path.exists(so):
                ys = np.load(so)
                y_sparq = ys[ys.files[0]].astype(np.float64).reshape(-1)
                y_ort = np.load(os.path.join(a.dir, "ort_out.npy")).astype(np.float64).reshape(-1)
                cos = float(y_sparq @ y_ort / (np.linalg.norm(y_sparq) * np.linalg.norm(y_ort)))
                res["ort_vs_sparq"] = {"cosine": cos, "max_abs_diff": float(np.abs(y_sparq - y_ort).max()),
                                       "max_abs": float(np.abs(y_ort).max())}
    finally:
        if not a.keep:
            shutil.rmtree(a.dir, ignore_errors=True)
    print(json.dumps(res, indent=1))
    if a.markdown:
        print("\n| step | rc | seconds | peak RSS (MiB) |\n|---|---|---|---|")
        for k, v in res["steps"].items():
            print(f"| {k} | {v['rc']} | {v['seconds']} | {v['peak_rss_mib']} |")


if __name__ == "__main__":
    main()
