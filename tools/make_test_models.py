#!/usr/bin/env python3
"""Exports the ONNX models that sparq's interop tests run, with sample inputs.

Writes into OUT_DIR, per model NAME:
  NAME.onnx       the model (opset 17, dynamic batch dimension)
  NAME.npz        sample inputs keyed by the model's input names (batch 2)
and stamp.json, which records the hash of this script and the torch/onnx
versions. A later run with the same script and versions finds the stamp and
the files and does nothing, so tests can call it on every run.

Models (random weights from fixed seeds, eval mode):
  resnet18        torchvision resnet18, input [N,3,224,224] float32
  mobilenet_v2    torchvision mobilenet_v2, input [N,3,224,224] float32
  tiny_encoder    a 2-layer pre-norm transformer encoder: token + learned
                  positional embedding, multi-head self-attention, LayerNorm,
                  GELU MLP; input_ids [N,32] int64 (vocab 1000, d_model 128);
                  outputs per-token "logits" [N,32,1000] and "pooled" [N,128]

Output is deterministic: the same bytes on every run with the same versions.
Python is used by sparq only for tests and test data; nothing here runs at
sparq's run time.

Usage: python3 tools/make_test_models.py OUT_DIR [--force]
"""
import argparse
import contextlib
import fcntl
import hashlib
import json
import math
import os
import sys
import tempfile
import warnings

import numpy as np

OPSET = 17
SEED = 1234
SAMPLE_BATCH = 2

# Transformer shape (kept small so the reference executor runs it quickly).
VOCAB = 1000
D_MODEL = 128
NUM_HEADS = 4
NUM_LAYERS = 2
MLP_DIM = 512
SEQ_LEN = 32

MODEL_NAMES = ("resnet18", "mobilenet_v2", "tiny_encoder")


def script_hash() -> str:
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def expected_files():
    files = []
    for name in MODEL_NAMES:
        files += [name + ".onnx", name + ".npz"]
    return files


def stamp_contents() -> dict:
    # Package metadata, not imports: checking the stamp stays fast.
    from importlib.metadata import version

    return {
        "script_sha256": script_hash(),
        "torch": version("torch"),
        "torchvision": version("torchvision"),
        "onnx": version("onnx"),
        "opset": OPSET,
        "files": expected_files(),
    }


def is_up_to_date(out_dir: str, stamp: dict) -> bool:
    path = os.path.join(out_dir, "stamp.json")
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return False
    if old != stamp:
        return False
    return all(os.path.isfile(os.path.join(out_dir, f)) for f in stamp["files"])


@contextlib.contextmanager
def locked(out_dir: str):
    """Serializes concurrent runs writing the same folder (e.g. two test runs)."""
    with open(os.path.join(out_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def replace_atomically(out_dir: str, final_name: str, write_fn) -> None:
    """Calls write_fn(tmp_path) and renames the result to final_name, so that
    readers never see a half-written file."""
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix="." + final_name, suffix=".tmp")
    os.close(fd)
    try:
        write_fn(tmp)
        os.chmod(tmp, 0o644)  # mkstemp creates files readable by the owner only
        os.replace(tmp, os.path.join(out_dir, final_name))
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# ---------------------------------------------------------------------------
# Models


def randomize_batchnorm(model, generator) -> None:
    """torchvision initializes BatchNorm to the identity (mean 0, var 1, scale 1,
    shift 0); random statistics make the folded Conv weights less trivial."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(0.1 * torch.randn(c, generator=generator))
                m.running_var.copy_(0.5 + torch.rand(c, generator=generator))
                m.weight.copy_(0.8 + 0.4 * torch.rand(c, generator=generator))
                m.bias.copy_(0.1 * torch.randn(c, generator=generator))


def build_tiny_encoder():
    import torch
    from torch import nn

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
            self.proj = nn.Linear(D_MODEL, D_MODEL)
            self.head_dim = D_MODEL // NUM_HEADS
            self.scale = 1.0 / math.sqrt(self.head_dim)

        def forward(self, x):
            b, s, d = x.shape
            # [b, s, 3*d] -> [3, b, heads, s, head_dim]
            qkv = self.qkv(x).reshape(b, s, 3, NUM_HEADS, self.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.scale, dim=-1)
            out = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, d)
            return self.proj(out)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(D_MODEL)
            self.attn = SelfAttention()
            self.norm2 = nn.LayerNorm(D_MODEL)
            self.mlp = nn.Sequential(nn.Linear(D_MODEL, MLP_DIM), nn.GELU(), nn.Linear(MLP_DIM, D_MODEL))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class TinyEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding = nn.Embedding(VOCAB, D_MODEL)
            self.position_embedding = nn.Parameter(0.1 * torch.randn(1, SEQ_LEN, D_MODEL))
            self.blocks = nn.ModuleList([Block() for _ in range(NUM_LAYERS)])
            self.norm = nn.LayerNorm(D_MODEL)
            self.lm_head = nn.Linear(D_MODEL, VOCAB)

        def forward(self, input_ids):
            seq = input_ids.shape[1]
            x = self.token_embedding(input_ids) + self.position_embedding[:, :seq]
            for block in self.blocks:
                x = block(x)
            x = self.norm(x)
            return self.lm_head(x), x.mean(dim=1)

    model = TinyEncoder()
    # Non-trivial LayerNorm affine parameters (default init is scale 1, shift 0).
    g = torch.Generator().manual_seed(SEED + 7)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(0.8 + 0.4 * torch.rand(D_MODEL, generator=g))
                m.bias.copy_(0.1 * torch.randn(D_MODEL, generator=g))
    return model


def model_spec(name: str):
    """Returns (torch module, sample inputs dict, input names, output names, dynamic axes)."""
    import torch
    import torchvision

    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    if name in ("resnet18", "mobilenet_v2"):
        model = getattr(torchvision.models, name)(weights=None)
        randomize_batchnorm(model, torch.Generator().manual_seed(SEED + 1))
        inputs = {"input": rng.standard_normal((SAMPLE_BATCH, 3, 224, 224), dtype=np.float32)}
        return model, inputs, ["input"], ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}}
    if name == "tiny_encoder":
        model = build_tiny_encoder()
        inputs = {"input_ids": rng.integers(0, VOCAB, size=(SAMPLE_BATCH, SEQ_LEN), dtype=np.int64)}
        axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}, "pooled": {0: "batch"}}
        return model, inputs, ["input_ids"], ["logits", "pooled"], axes
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")


def export_onnx(model, example_inputs: tuple, path: str, input_names, output_names, dynamic_axes) -> None:
    """Exports with the TorchScript exporter (dynamo=False): it needs no extra
    package and works offline; at opset 17 it writes LayerNormalization as one op
    and GELU as Erf arithmetic."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
        torch.onnx.export(
            model,
            example_inputs,
            path,
            dynamo=False,
            opset_version=OPSET,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            do_constant_folding=True,
        )


def check_export(path: str, model, inputs: dict, output_names) -> None:
    """The exported file must pass the ONNX checker and match torch in onnxruntime."""
    import onnx
    import onnxruntime as ort
    import torch

    onnx.checker.check_model(onnx.load(path), full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = session.run(output_names, inputs)
    with torch.no_grad():
        want = model(*[torch.from_numpy(v) for v in inputs.values()])
    if isinstance(want, torch.Tensor):
        want = (want,)
    for name, g, w in zip(output_names, got, want):
        w = w.numpy()
        err = float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-12))
        if err > 1e-4:
            raise RuntimeError(f"{path}: output {name!r} differs from torch by {err:.3g} (relative to max)")


def make_model(name: str, out_dir: str) -> None:
    import torch

    model, inputs, input_names, output_names, dynamic_axes = model_spec(name)
    model.eval()
    example = tuple(torch.from_numpy(inputs[n]) for n in input_names)

    def write_model(tmp):
        with torch.no_grad():
            export_onnx(model, example, tmp, input_names, output_names, dynamic_axes)
        check_export(tmp, model, inputs, output_names)

    replace_atomically(out_dir, name + ".onnx", write_model)
    def write_inputs(tmp):
        with open(tmp, "wb") as f:  # a file object: np.savez would add ".npz" to a path
            np.savez(f, **inputs)

    replace_atomically(out_dir, name + ".npz", write_inputs)


def make_all(out_dir: str, force: bool = False) -> bool:
    """Writes every model into out_dir unless the stamp says they are current.
    Returns True when it wrote files."""
    os.makedirs(out_dir, exist_ok=True)
    stamp = stamp_contents()
    with locked(out_dir):
        if not force and is_up_to_date(out_dir, stamp):
            return False
        stamp_path = os.path.join(out_dir, "stamp.json")
        if os.path.exists(stamp_path):
            os.remove(stamp_path)  # a run that fails half-way leaves no stale stamp
        for name in MODEL_NAMES:
            make_model(name, out_dir)

        def write_stamp(tmp):
            with open(tmp, "w") as f:
                f.write(json.dumps(stamp, indent=1, sort_keys=True) + "\n")

        replace_atomically(out_dir, "stamp.json", write_stamp)
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", help="folder for the .onnx and .npz files")
    parser.add_argument("--force", action="store_true", help="rebuild even when the stamp is current")
    args = parser.parse_args(argv)
    wrote = make_all(args.out_dir, force=args.force)
    print(("wrote" if wrote else "up to date:"), ", ".join(MODEL_NAMES), "in", args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
