"""A model loaded and saved by sparq (`sparq convert in.onnx -o out.onnx
[--external-data]`) is still a valid ONNX model with the same graph, the same
weights and the same onnxruntime outputs."""
import os

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

from conftest import load_npz
import find_divergence

MODELS = ("resnet18", "mobilenet_v2", "tiny_encoder")


def initializer_values(model) -> dict:
    return {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}


def convert(sparq, src, dst, *extra):
    proc = sparq.run("convert", src, "-o", dst, *extra)
    assert proc.returncode == 0, f"sparq convert exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    assert os.path.isfile(dst), f"sparq convert exited 0 but wrote no {dst}"


@pytest.fixture(scope="module")
def sparq_convert(sparq):
    sparq.require_subcommand("convert")
    return sparq


@pytest.mark.parametrize("external_data", [False, True], ids=["inline", "external"])
@pytest.mark.parametrize("name", MODELS)
def test_convert_roundtrip(sparq_convert, models_dir, tmp_path, name, external_data):
    src = os.path.join(models_dir, name + ".onnx")
    dst = str(tmp_path / (name + ".onnx"))
    convert(sparq_convert, src, dst, *(["--external-data"] if external_data else []))

    # A path, not a loaded proto: the checker then resolves external data too.
    onnx.checker.check_model(dst, full_check=True)

    before = onnx.load(src)
    after = onnx.load(dst)  # loads external data from beside dst
    if external_data:
        data_files = {e.value for t in onnx.load(dst, load_external_data=False).graph.initializer
                      for e in t.external_data if e.key == "location"}
        assert data_files, "--external-data wrote every initializer inline"
        assert os.path.getsize(dst) < os.path.getsize(src) / 10, "--external-data left most weights inline"
        for f in data_files:
            assert os.path.isfile(tmp_path / f), f"external data file {f} is missing"

    assert [(n.op_type, list(n.input), list(n.output)) for n in after.graph.node] == \
        [(n.op_type, list(n.input), list(n.output)) for n in before.graph.node], "the nodes changed"
    assert [i.name for i in after.graph.input] == [i.name for i in before.graph.input]
    assert [o.name for o in after.graph.output] == [o.name for o in before.graph.output]
    assert {(o.domain, o.version) for o in after.opset_import} == \
        {(o.domain, o.version) for o in before.opset_import}, "the opset changed"
    want_weights = initializer_values(before)
    got_weights = initializer_values(after)
    assert sorted(got_weights) == sorted(want_weights)
    for k, w in want_weights.items():
        g = got_weights[k]
        assert g.dtype == w.dtype and np.array_equal(g, w), f"initializer {k} changed"

    inputs = load_npz(os.path.join(models_dir, name + ".npz"))
    want = find_divergence.run_onnxruntime(src, inputs)
    got = find_divergence.run_onnxruntime(dst, inputs)
    for out_name, w in want.items():
        assert np.array_equal(got[out_name], w), f"onnxruntime output {out_name} changed after the roundtrip"


def test_convert_missing_input_is_an_error(sparq_convert, tmp_path):
    proc = sparq_convert.run("convert", tmp_path / "absent.onnx", "-o", tmp_path / "out.onnx")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "absent.onnx" in proc.stdout + proc.stderr, "the message should name the missing file"
    assert not (tmp_path / "out.onnx").exists()
