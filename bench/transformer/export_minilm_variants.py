"""all-MiniLM-L6-v2 exported as other scripts do (not the suite's eager export in
tools/make_real_suite.py) at sequence 128: VARIANTS=attn:opset,... (eager / sdpa
attention; DYNAMO=1 for torch.onnx's dynamo exporter, which needs onnxscript).
For bench/outside_models.py --minilm-dir.

  VARIANTS=eager:17,sdpa:17 python3 bench/transformer/export_minilm_variants.py OUT_DIR
"""
import os, sys, tempfile, zipfile, importlib.util
import numpy as np, torch
from transformers import BertModel
spec = importlib.util.find_spec("all_minilm_l6_v2")
pkg = os.path.dirname(spec.origin) if spec and spec.origin else None
if pkg is None:
    import all_minilm_l6_v2 as m; pkg = list(m.__path__)[0]
zip_path = os.path.join(pkg, "model.zip")
out = sys.argv[1] if len(sys.argv) > 1 else "."
with tempfile.TemporaryDirectory() as tmp:
    zipfile.ZipFile(zip_path).extractall(tmp)
    for attn, opset in [tuple(a.split(":")) for a in os.environ.get("VARIANTS", "sdpa:17,sdpa:14").split(",")]:
        opset = int(opset)
        bert0 = BertModel.from_pretrained(tmp, attn_implementation=attn).eval()
        class Wrap(torch.nn.Module):
            def __init__(self, b):
                super().__init__(); self.b = b
            def forward(self, input_ids, attention_mask, token_type_ids):
                o = self.b(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
                return o.last_hidden_state, o.pooler_output
        bert = Wrap(bert0).eval()
        ids = torch.ones(1, 128, dtype=torch.int64); mask = torch.ones(1, 128, dtype=torch.int64)
        path = os.path.join(out, f"minilm_{attn}_op{opset}{'_dynamo' if os.environ.get('DYNAMO') == '1' else ''}.onnx")
        torch.onnx.export(bert, (ids, mask, torch.zeros_like(ids)), path, dynamo=os.environ.get("DYNAMO") == "1", opset_version=opset,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes={k: {0: "batch", 1: "seq"} for k in ("input_ids", "attention_mask", "token_type_ids")})
        print("wrote", path)
rng = np.random.default_rng(0)
ids = rng.integers(1000, 20000, size=(64, 128)).astype(np.int64); ids[:, 0] = 101
mask = np.ones_like(ids); mask[32:, 100:] = 0
np.savez(os.path.join(out, "minilm128.npz"), input_ids=ids, attention_mask=mask, token_type_ids=np.zeros_like(ids))
