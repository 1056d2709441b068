#!/usr/bin/env python3
"""The GPU check's models (tools/gpu_run.sh, issue 23): random-weight ONNX
files at the shapes the GPU targets name, each with an input .npz of 8
samples, and (where this python has CUDA) PyTorch's own FP16 latency on them,
eager and replayed as a CUDA graph, for the table beside sparq's.

  resnet50            torchvision ResNet-50, [N, 3, 224, 224]
  efficientnet_lite0  timm's tf_efficientnet_lite0, [N, 3, 224, 224] (skipped without timm)
  minilm_l6           a BERT of MiniLM-L6-v2's shape (6 layers, hidden 384, 12 heads), sequence 128
  bert_base           a BERT of BERT-base's shape (12 layers, hidden 768, 12 heads), sequence 128
                      (transformers' BertModel, eager attention; skipped without transformers)

Random weights: these files check that the GPU computes what the CPU does and
how fast, not accuracy (the real-model suite does that).

  python3 tools/gpu_models.py OUT_DIR [--only resnet50,minilm_l6] [--torch-times times.json]
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def vision(name):
    import torch
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None)
    import timm  # noqa: F401 - ImportError: the model is skipped
    return timm.create_model("tf_efficientnet_lite0", pretrained=False)


def bert(layers, hidden, heads):
    from transformers import BertConfig, BertModel
    config = BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                        intermediate_size=4 * hidden, attn_implementation="eager")
    model = BertModel(config)

    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return LastHidden(model)


MODELS = {
    "resnet50": ("vision", lambda: vision("resnet50")),
    "efficientnet_lite0": ("vision", lambda: vision("efficientnet_lite0")),
    "minilm_l6": ("text", lambda: bert(6, 384, 12)),
    "bert_base": ("text", lambda: bert(12, 768, 12)),
}
SEQ = 128


def inputs_for(kind, n, rng):
    if kind == "vision":
        return {"x": rng.standard_normal((n, 3, 224, 224)).astype(np.float32)}
    ids = rng.integers(1000, 20000, size=(n, SEQ)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[n // 2:, SEQ - 16:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def torch_fp16_ms(model, feeds, batch):
    """PyTorch FP16 ms per batch on the GPU: eager, and one CUDA graph replayed."""
    import torch
    dev = torch.device("cuda")
    m = model.half().to(dev).eval()
    args = [torch.from_numpy(np.repeat(v[:1], batch, axis=0)).to(dev) for v in feeds.values()]
    args = [a.half() if a.dtype == torch.float32 else a for a in args]
    with torch.no_grad():
        for _ in range(5):
            m(*args)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            m(*args)
        torch.cuda.synchronize()
        eager = (time.perf_counter() - t0) / 20 * 1e3
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                m(*args)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            m(*args)
        for _ in range(5):
            graph.replay()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            graph.replay()
        torch.cuda.synchronize()
        replay = (time.perf_counter() - t0) / 50 * 1e3
    return eager, replay


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--torch-times", help="write PyTorch FP16 ms (batch 1 and 32) here when CUDA is available")
    args = ap.parse_args()
    import torch
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    times = {}
    for name in args.only.split(","):
        kind, make = MODELS[name]
        try:
            model = make().eval()
        except ImportError as e:
            print(f"{name}: skipped ({e})", file=sys.stderr)
            continue
        feeds = inputs_for(kind, 8, rng)
        path = os.path.join(args.out, name + ".onnx")
        example = tuple(torch.from_numpy(v[:1]) for v in feeds.values())
        names = list(feeds)
        torch.onnx.export(model, example, path, dynamo=False, opset_version=17, input_names=names,
                          output_names=["y"], dynamic_axes={**{k: {0: "batch"} for k in names}, "y": {0: "batch"}})
        np.savez(os.path.join(args.out, name + ".npz"), **feeds)
        print(f"wrote {path}")
        if args.torch_times and torch.cuda.is_available():
            times[name] = {f"b{b}": dict(zip(("eager_ms", "graph_ms"), torch_fp16_ms(model, feeds, b)))
                           for b in (1, 32)}
    if args.torch_times:
        with open(args.torch_times, "w") as f:
            json.dump(times, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
