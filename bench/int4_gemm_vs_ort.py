#!/usr/bin/env python3
"""INT4 GEMM speed: sparq's MatMulNBits row against onnxruntime's MatMulNBits, same file.

For each shape (K, N) a one-node model is written by onnxruntime's
MatMulNBitsQuantizer (RTN, block 32, zero points: its defaults but the block)
from a random float MatMul, then run with A [batch, K] for batch 1 and 16 on
ONE thread by both: onnxruntime (intra_op_num_threads 1, all graph
optimizations, accuracy_level unset) and `sparq eval --threads 1` (its
per-batch p50 latency from --json, which includes the executor's per-run
overhead of a few microseconds). Times are medians over --runs runs after
warm-up; GFLOP/s = 2 * batch * K * N / time. Both outputs are compared
(max |diff| / max |ort|).

  python3 bench/int4_gemm_vs_ort.py --sparq build/bin/sparq [--runs 200] [--out results.json]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# name, K, N: MiniLM-L6's projections (hidden 384, FFN 1536) and a 7B-LLM-sized square.
SHAPES = [("minilm_qkvo_384x384", 384, 384), ("minilm_ffn1_384x1536", 384, 1536),
          ("minilm_ffn2_1536x384", 1536, 384), ("llm_4096x4096", 4096, 4096)]
BATCHES = [1, 16]


def float_matmul(k, n, rng):
    w = numpy_helper.from_array(rng.uniform(-0.1, 0.1, (k, n)).astype(np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    graph = helper.make_graph([node], "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", n])], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def ort_q4(model, block):
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    q = MatMulNBitsQuantizer(model, block_size=block, is_symmetric=False)
    q.process()
    return q.model.model


def time_ort(path, x, runs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(10):
        y = sess.run(None, {"x": x})[0]
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, {"x": x})
        times.append(time.perf_counter() - t)
    return float(np.median(times)), y


def time_sparq(sparq, path, x, runs, work):
    inputs = os.path.join(work, "x.npz")
    outputs = os.path.join(work, "y.npz")
    np.savez(inputs, x=np.repeat(x[None], runs + 10, axis=0).reshape(-1, x.shape[1]))
    proc = subprocess.run([sparq, "eval", path, "--inputs", inputs, "--batch", str(x.shape[0]), "--threads", "1",
                           "--warmup", "10", "--json", "--verbose", "--save-outputs", outputs], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"sparq eval failed:\n{proc.stdout}{proc.stderr}")
    rep = json.loads(proc.stdout)
    with np.load(outputs) as f:
        y = f[f.files[0]][: x.shape[0]]
    kernel = ",".join(k["kernel"] for k in rep.get("kernels", []) if k.get("op") == "MatMulNBits")
    return rep["latency"]["p50_seconds"], y, kernel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sparq", required=True, help="the sparq CLI binary")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, k, n in SHAPES:
            path = os.path.join(work, f"{name}.onnx")
            onnx.save(ort_q4(float_matmul(k, n, rng), args.block), path)
            for b in BATCHES:
                x = rng.standard_normal((b, k)).astype(np.float32)
                runs = args.runs if k * n < 4096 * 4096 else max(20, args.runs // 4)
                t_ort, y_ort = time_ort(path, x, runs)
                t_sq, y_sq, kernel = time_sparq(args.sparq, path, x, runs, work)
                err = float(np.max(np.abs(y_sq - y_ort)) / max(np.max(np.abs(y_ort)), 1e-12))
                flop = 2.0 * b * k * n
                rows.append({"shape": name, "K": k, "N": n, "batch": b, "ort_ms": t_ort * 1e3, "sparq_ms": t_sq * 1e3,
                             "ort_gflops": flop / t_ort / 1e9, "sparq_gflops": flop / t_sq / 1e9,
                             "sparq_vs_ort": t_ort / t_sq, "rel_diff": err, "sparq_kernel": kernel})
                r = rows[-1]
                print(f"{name:24s} b{b:<3d} ort {r['ort_ms']:8.3f} ms ({r['ort_gflops']:6.1f} GFLOP/s)  "
                      f"sparq {r['sparq_ms']:8.3f} ms ({r['sparq_gflops']:6.1f} GFLOP/s)  "
                      f"sparq/ort speed {r['sparq_vs_ort']:.2f}x  rel diff {err:.1e}  {kernel}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
