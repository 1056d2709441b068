#!/usr/bin/env python3
"""Trains the bundled example model: a small CNN on scikit-learn's digits.

The data set (sklearn.datasets.load_digits: 1797 grayscale 8x8 images of the
digits 0-9) ships with scikit-learn, so nothing is downloaded. Pixels are
scaled from 0..16 to [0, 1] and laid out NCHW as [N, 1, 8, 8] float32.

Splits (stratified by label, fixed seed):
  eval         512 images   accuracy is measured here
  calibration  256 images   for sparq's quantization calibration
  train        the rest (1029 images)

Writes into OUT_DIR (default examples/digits):
  digits_cnn.onnx     opset 17, input "input" [batch,1,8,8], output "logits" [batch,10]
  calib.npz           key "input": the calibration images
  eval.npz            key "input": the evaluation images
  eval_labels.npy     int64 labels of the evaluation images
  README.md           how the files were made and the accuracy reached

Deterministic: fixed seeds, one CPU thread, deterministic algorithms.

Usage: python3 tools/train_digits.py [--out-dir DIR] [--epochs N]
"""
import argparse
import os
import sys
import warnings

import numpy as np

SEED = 0
EVAL_SIZE = 512
CALIB_SIZE = 256
EPOCHS = 40
BATCH_SIZE = 32
LEARNING_RATE = 3e-3
WEIGHT_DECAY = 1e-4
OPSET = 17
TARGET_ACCURACY = 0.95

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
REGENERATE_COMMAND = "python3 tools/train_digits.py --out-dir examples/digits"


def load_splits():
    """Returns dict split -> (images [N,1,8,8] float32 in [0,1], labels int64)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    rest_x, eval_x, rest_y, eval_y = train_test_split(
        images, labels, test_size=EVAL_SIZE, stratify=labels, random_state=SEED)
    train_x, calib_x, train_y, calib_y = train_test_split(
        rest_x, rest_y, test_size=CALIB_SIZE, stratify=rest_y, random_state=SEED)
    return {"train": (train_x, train_y), "calib": (calib_x, calib_y), "eval": (eval_x, eval_y)}


def build_model():
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 32, kernel_size=3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 8x8 -> 4x4
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 10),
    )


def train(model, images, labels, epochs):
    import torch

    x = torch.from_numpy(images)
    y = torch.from_numpy(labels)
    generator = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=generator)
        total = 0.0
        for start in range(0, len(x), BATCH_SIZE):
            idx = order[start:start + BATCH_SIZE]
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        scheduler.step()
        if epoch == 0 or (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1:3d}  train loss {total / len(x):.4f}")
    model.eval()


def export(model, path):
    import torch

    example = torch.zeros(1, 1, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(model, (example,), path, dynamo=False, opset_version=OPSET,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                          do_constant_folding=True)


def onnxruntime_logits(path, images):
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(["logits"], {"input": images})[0]


def write_readme(path, splits, torch_acc, ort_acc, model_path, ops):
    from importlib.metadata import version

    train_n = len(splits["train"][1])
    size_kb = os.path.getsize(model_path) / 1024
    text = f"""# digits: a small real model for sparq's examples and tests

`digits_cnn.onnx` classifies 8x8 grayscale handwritten digits (0-9). It was
trained with PyTorch on scikit-learn's bundled digits data set
(`sklearn.datasets.load_digits`, 1797 images; nothing is downloaded) by
`tools/train_digits.py`.

## Accuracy

| split | images | accuracy (onnxruntime, CPU) |
| --- | --- | --- |
| eval | {EVAL_SIZE} | **{ort_acc * 100:.2f}%** |

(PyTorch on the same split: {torch_acc * 100:.2f}%.)

## Files

| file | contents |
| --- | --- |
| `digits_cnn.onnx` | the model, opset {OPSET}, {size_kb:.0f} KB; input `input` float32 `[batch, 1, 8, 8]`, output `logits` float32 `[batch, 10]` |
| `calib.npz` | key `input`: {CALIB_SIZE} calibration images, float32 `[{CALIB_SIZE}, 1, 8, 8]` |
| `eval.npz` | key `input`: {EVAL_SIZE} evaluation images, float32 `[{EVAL_SIZE}, 1, 8, 8]` |
| `eval_labels.npy` | int64 `[{EVAL_SIZE}]`: the labels of `eval.npz` |

Operators in the model: {", ".join(f"{op} x{n}" for op, n in ops)}.

## How it was made

- Inputs: pixel values 0..16 divided by 16, so float32 in [0, 1], NCHW `[N, 1, 8, 8]`.
- Splits, stratified by label with `sklearn.model_selection.train_test_split`
  (random_state {SEED}): {EVAL_SIZE} eval images first, then {CALIB_SIZE}
  calibration images from the rest; the remaining {train_n} images train the model.
  The calibration and eval images are never trained on.
- Network: Conv(1->16, 3x3, pad 1) - BatchNorm - ReLU - Conv(16->32, 3x3, pad 1) -
  BatchNorm - ReLU - MaxPool 2x2 - Flatten - Linear(512->10).
- Training: AdamW (lr {LEARNING_RATE}, weight decay {WEIGHT_DECAY}), cosine
  schedule, {EPOCHS} epochs, batch {BATCH_SIZE}, cross-entropy; seed {SEED},
  one CPU thread, `torch.use_deterministic_algorithms(True)`.
- Export: `torch.onnx.export(..., dynamo=False, opset_version={OPSET})` in eval
  mode with a dynamic batch dimension; the exporter folds each BatchNorm into
  the Conv before it.
- Versions: torch {version("torch")}, onnx {version("onnx")}, onnxruntime
  {version("onnxruntime")}, scikit-learn {version("scikit-learn")}.

## Run it with sparq

    sparq eval examples/digits/digits_cnn.onnx --inputs examples/digits/eval.npz \\
        --save-outputs /tmp/digits_logits.npz

The argmax of `logits` against `eval_labels.npy` gives the accuracy above
(tests/python/test_digits_example.py checks this).

## Regenerate

From the repository root:

    {REGENERATE_COMMAND}

The run is deterministic on a given machine and set of versions; another CPU
or library version may give slightly different weights and accuracy.
"""
    with open(path, "w") as f:
        f.write(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", default=os.path.join(REPO_ROOT, "examples", "digits"))
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    args = parser.parse_args(argv)

    import collections

    import onnx
    import torch

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    os.makedirs(args.out_dir, exist_ok=True)
    splits = load_splits()
    model = build_model()
    train(model, *splits["train"], args.epochs)

    eval_x, eval_y = splits["eval"]
    with torch.no_grad():
        torch_acc = float((model(torch.from_numpy(eval_x)).argmax(1).numpy() == eval_y).mean())

    model_path = os.path.join(args.out_dir, "digits_cnn.onnx")
    export(model, model_path)
    onnx.checker.check_model(onnx.load(model_path), full_check=True)
    logits = onnxruntime_logits(model_path, eval_x)
    ort_acc = float((logits.argmax(1) == eval_y).mean())

    np.savez(os.path.join(args.out_dir, "calib.npz"), input=splits["calib"][0])
    np.savez(os.path.join(args.out_dir, "eval.npz"), input=eval_x)
    np.save(os.path.join(args.out_dir, "eval_labels.npy"), eval_y)
    ops = collections.Counter(n.op_type for n in onnx.load(model_path).graph.node)
    write_readme(os.path.join(args.out_dir, "README.md"), splits, torch_acc, ort_acc, model_path,
                 sorted(ops.items()))

    print(f"eval accuracy: onnxruntime {ort_acc * 100:.2f}%, torch {torch_acc * 100:.2f}%")
    print(f"wrote {model_path} ({os.path.getsize(model_path) / 1024:.0f} KB) and data in {args.out_dir}")
    if ort_acc < TARGET_ACCURACY:
        print(f"error: accuracy {ort_acc:.4f} is below the target {TARGET_ACCURACY}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
