"""torch's scaled_dot_product_attention and LayerNorm as its TorchScript
exporter writes them at opset 14 (Q and K^T each scaled by a Mul, a -inf
mask, Where(IsNaN(p), 0, p) after the Softmax; LayerNorm as ReduceMean / Sub /
Pow / ReduceMean / Add / Sqrt / Div / Mul / Add): `sparq eval` runs them as
sparq.Attention and sparq.LayerNormChain on the fast rows and matches
onnxruntime to max|sparq - ort| / max|ort| < 1e-4, a fully masked sample
included (the guard's zeros).

  test_tiny_block: a one-block model exported here (needs torch).
  test_minilm_sdpa_op14: all-MiniLM-L6-v2 so exported
      ($SPARQ_OUTSIDE_MINILM_DIR/minilm_sdpa_op14.onnx, default
      /work/outside/minilm; made by bench/outside_models.py's exporter);
      skipped without it.
"""
import json
import os

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")

MAX_RELATIVE_ERROR = 1e-4
UNFUSED = ("IsNaN", "Softmax", "ReduceMean", "Pow", "Sqrt")


def check(sparq_eval, model, feeds, tmp_path, attention, layer_norms):
    ours = sparq_eval.eval(model, feeds, tmp_path, threads=1)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    theirs = dict(zip(names, sess.run(None, feeds)))
    for name in names:
        assert np.all(np.isfinite(ours[name])), f"output {name} is not finite"
        scale = max(float(np.max(np.abs(theirs[name]))), 1e-6)
        err = float(np.max(np.abs(ours[name].astype(np.float64) - theirs[name]))) / scale
        assert err < MAX_RELATIVE_ERROR, f"output {name}: max|sparq - ort| / max|ort| = {err:.2e}"
    np.savez(tmp_path / "in.npz", **feeds)
    batch = len(next(iter(feeds.values())))
    proc = sparq_eval.run("eval", model, "--inputs", tmp_path / "in.npz", "--batch", batch, "--json", "--verbose")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kernels = json.loads(proc.stdout)["kernels"]
    ops = [k.get("op") for k in kernels]
    assert ops.count("Attention") == attention, kernels
    assert ops.count("LayerNormChain") == layer_norms, kernels
    assert not [k for k in kernels if k.get("op") in UNFUSED], kernels
    assert all(k.get("kernel") != "ref" for k in kernels if k.get("op") in ("Attention", "LayerNormChain")), kernels


def test_tiny_block(sparq_eval, tmp_path):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(32, 32) for _ in range(3))
            self.ln = torch.nn.LayerNorm(32)

        def forward(self, x, mask):
            b, n, _ = x.shape
            q, k, v = (f(x).view(b, n, 4, 8).transpose(1, 2) for f in (self.q, self.k, self.v))
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :].bool(), scale=8 ** -0.5)
            return self.ln(o.transpose(1, 2).reshape(b, n, 32) + x)

    torch.manual_seed(0)
    model = str(tmp_path / "block.onnx")
    x = torch.randn(2, 16, 32)
    mask = torch.ones(2, 16, dtype=torch.int64)
    torch.onnx.export(Block().eval(), (x, mask), model, opset_version=14, dynamo=False, input_names=["x", "mask"],
                      output_names=["y"], dynamic_axes={"x": {0: "b", 1: "n"}, "mask": {0: "b", 1: "n"}})
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((4, 16, 32)).astype(np.float32), "mask": np.ones((4, 16), np.int64)}
    feeds["mask"][1, 10:] = 0
    feeds["mask"][2, :] = 0  # every score -inf: the guard's zeros
    check(sparq_eval, model, feeds, tmp_path, attention=1, layer_norms=1)


def test_minilm_sdpa_op14(sparq_eval, tmp_path):
    model = os.path.join(os.environ.get("SPARQ_OUTSIDE_MINILM_DIR", "/work/outside/minilm"), "minilm_sdpa_op14.onnx")
    if not os.path.exists(model):
        pytest.skip(f"{model} is not there (bench/outside_models.py's exporter writes it)")
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 20000, size=(3, 128)).astype(np.int64)
    ids[:, 0] = 101
    mask = np.ones_like(ids)
    mask[1, 100:] = 0
    mask[2, :] = 0
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    check(sparq_eval, model, feeds, tmp_path, attention=6, layer_norms=13)
