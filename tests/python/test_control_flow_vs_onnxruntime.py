"""sparq's If, Loop and Scan against onnxruntime.

1. Models built with onnx.helper, one per case (branches reading outer
   values, a nested If inside a Loop body, for / while / do-while loops,
   zero trips, Scan axes and directions), written as ONNX node-test cases
   with onnxruntime's outputs and run by `node_tests --data`.
2. Silero VAD (pip package silero_vad, skipped without it), a real model
   whose graph is 25 If nodes deep in places: sparq's outputs on random
   audio chunks against onnxruntime's, at 16 kHz (512 samples) and 8 kHz
   (256 samples), which take different branches.
3. Silero VAD's pretrained network streamed over real speech (pyannote's
   sample conversation when installed, else noise) as a Loop (its JIT file's
   network in a scripted loop, TorchScript exporter) and as a Scan (the
   network rebuilt from the JIT's weights, torch.export's scan):
   tools/silero_streaming.py. sparq against onnxruntime, and both against
   the shipped silero_vad.onnx run window by window.
4. `sparq calibrate --constant sr=16000` then `sparq quantize --constant
   sr=16000` on Silero VAD writes the model `sparq run` writes with the
   same table (issue 24), and onnxruntime runs it.
"""
import importlib.util
import os
import subprocess

import numpy as np
import pytest

from conftest import SOURCE_DIR

MAX_RELATIVE_ERROR = 1e-4


def _node_tests():
    build_dir = os.environ.get("SPARQ_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
    path = os.path.join(build_dir, "bin", "node_tests")
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built")
    return path


def _write_case(root, name, model, feeds):
    """A node-test case folder: model.onnx, the feeds, onnxruntime's outputs."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = session.run(None, feeds)
    case_dir = os.path.join(root, f"test_{name}")
    data_dir = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(data_dir)
    onnx.save(model, os.path.join(case_dir, "model.onnx"))
    for i, inp in enumerate(model.graph.input):
        with open(os.path.join(data_dir, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[inp.name], inp.name).SerializeToString())
    for i, (out, value) in enumerate(zip(model.graph.output, outs)):
        with open(os.path.join(data_dir, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(value), out.name).SerializeToString())


def _cases(rng):
    """(name, model, feeds) for each control-flow case."""
    from onnx import TensorProto, helper, numpy_helper

    F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL

    def vi(name, t, shape=None):
        return helper.make_tensor_value_info(name, t, shape)

    def model(nodes, inputs, outputs, inits=(), opset=17):
        g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])

    x = rng.standard_normal((3, 4)).astype(np.float32)
    w = numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "w")

    # If whose branches read outer values only: a node output and an initializer.
    then_g = helper.make_graph([helper.make_node("Add", ["h", "w"], ["t"])], "then", [], [vi("t", F, [3, 4])])
    else_g = helper.make_graph([helper.make_node("Mul", ["h", "h"], ["e"])], "else", [], [vi("e", F, [3, 4])])
    if_nodes = [helper.make_node("Relu", ["x"], ["h"]),
                helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    for opset in (11, 13, 17, 21):
        for c in (True, False):
            yield (f"if_outer_opset{opset}_{c}",
                   model(if_nodes, [vi("x", F, [3, 4]), vi("c", B, [])], [vi("y", F, [3, 4])], [w], opset),
                   {"x": x, "c": np.array(c)})

    # Loop body: cond passes through (or i + 1 < limit), a carried sum, a scan
    # output, and a nested If choosing + or - by the outer `flag`.
    def loop_body(cond_rule):
        plus = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["p"])], "plus", [], [vi("p", F, [3, 4])])
        minus = helper.make_graph([helper.make_node("Sub", ["acc", "x"], ["q"])], "minus", [], [vi("q", F, [3, 4])])
        nodes = [helper.make_node("If", ["flag"], ["acc_next"], then_branch=plus, else_branch=minus),
                 helper.make_node("Cast", ["i"], ["i_f"], to=F),
                 helper.make_node("Mul", ["acc_next", "i_f"], ["scan_out"])]
        if cond_rule == "limit":
            nodes += [helper.make_node("Add", ["i", "one"], ["i1"]),
                      helper.make_node("Less", ["i1", "limit"], ["cond_out"])]
        else:
            nodes += [helper.make_node("Identity", ["cond_in"], ["cond_out"])]
        return helper.make_graph(nodes, "body", [vi("i", I64, []), vi("cond_in", B, []), vi("acc", F, [3, 4])],
                                 [vi("cond_out", B, []), vi("acc_next", F, [3, 4]), vi("scan_out", F, [3, 4])])

    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    limit = numpy_helper.from_array(np.array(3, np.int64), "limit")
    acc0 = rng.standard_normal((3, 4)).astype(np.float32)
    loop_inputs = [vi("M", I64, []), vi("c", B, []), vi("flag", B, []), vi("acc0", F, [3, 4]), vi("x", F, [3, 4])]
    for name, m_in, c_in, rule, trips, c in [("for", "M", "", "pass", 4, True),
                                             ("while", "", "c", "limit", 0, True),
                                             ("for_and_while", "M", "c", "limit", 5, True),
                                             ("cond_false_at_start", "M", "c", "limit", 5, False),
                                             ("zero_trips", "M", "c", "pass", 0, True)]:
        for flag in (True, False):
            node = helper.make_node("Loop", [m_in, c_in, "acc0"], ["acc_final", "accs"], body=loop_body(rule))
            yield (f"loop_{name}_{flag}",
                   model([node], loop_inputs, [vi("acc_final", F, [3, 4]), vi("accs", F, [None, 3, 4])], [one, limit]),
                   {"M": np.array(trips, np.int64), "c": np.array(c), "flag": np.array(flag), "acc0": acc0, "x": x})

    # Scan: a running sum with a scan input along an axis and direction, its
    # outputs along another axis and direction; the body reads outer `w2`.
    w2 = numpy_helper.from_array(rng.standard_normal((1,)).astype(np.float32), "w2")
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "xt"], ["s_next"]), helper.make_node("Mul", ["s_next", "w2"], ["yt"]),
         helper.make_node("Sub", ["xt", "zt"], ["dt"])],
        "body", [vi("s", F, [2, 3]), vi("xt", F, [2, 3]), vi("zt", F, [2, 3])],
        [vi("s_next", F, [2, 3]), vi("yt", F, [2, 3]), vi("dt", F, [2, 3])])
    xs = rng.standard_normal((2, 5, 3)).astype(np.float32)
    zs = rng.standard_normal((5, 2, 3)).astype(np.float32)
    s0 = rng.standard_normal((2, 3)).astype(np.float32)
    for name, attrs, opset in [
            ("defaults", dict(scan_input_axes=[1, 0]), 9),
            ("reverse_in", dict(scan_input_axes=[1, 0], scan_input_directions=[1, 0]), 11),
            ("negative_axes", dict(scan_input_axes=[-2, 0], scan_output_axes=[-1, 1]), 11),
            ("reverse_out", dict(scan_input_axes=[1, 0], scan_input_directions=[0, 1], scan_output_axes=[2, 0],
                                 scan_output_directions=[1, 1]), 16)]:
        node = helper.make_node("Scan", ["s0", "xs", "zs"], ["s_final", "ys", "ds"], body=body, num_scan_inputs=2,
                                **attrs)
        yield (f"scan_{name}",
               model([node], [vi("s0", F, [2, 3]), vi("xs", F, [2, 5, 3]), vi("zs", F, [5, 2, 3])],
                     [vi("s_final", F, [2, 3]), vi("ys", F, [None] * 3), vi("ds", F, [None] * 3)], [w2], opset),
               {"s0": s0, "xs": xs, "zs": zs})


def test_control_flow_cases_match_onnxruntime(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    node_tests = _node_tests()
    root = str(tmp_path / "cases")
    n = 0
    for name, model, feeds in _cases(np.random.default_rng(0)):
        _write_case(root, name, model, feeds)
        n += 1
    proc = subprocess.run([node_tests, "--data", root, "--verbose"], capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    assert f"{n} passed, 0 failed, 0 skipped" in text, text[-4000:]


def _silero_model(name="silero_vad.onnx"):
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("silero_vad is not installed")
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", name)
    if not os.path.isfile(path):
        pytest.skip(f"{path} is missing")
    return path


def test_silero_vad_matches_onnxruntime(tmp_path):
    """Three random chunks per sample rate, with a random state, through
    node_tests --data (each tensor fed as given) against onnxruntime."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    node_tests = _node_tests()
    model = onnx.load(_silero_model())
    rng = np.random.default_rng(1)
    root = str(tmp_path / "silero")
    n = 0
    for sr, samples in ((16000, 512), (8000, 256)):
        for k in range(3):
            feeds = {"input": rng.uniform(-0.5, 0.5, (1, samples)).astype(np.float32),
                     "state": rng.uniform(-0.5, 0.5, (2, 1, 128)).astype(np.float32),
                     "sr": np.array(sr, np.int64)}
            _write_case(root, f"silero_{sr}_{k}", model, feeds)
            n += 1
    proc = subprocess.run([node_tests, "--data", root, "--verbose"], capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    assert f"{n} passed, 0 failed, 0 skipped" in text, text[-4000:]


@pytest.mark.parametrize("name", ["silero_vad.onnx", "silero_vad_16k_op15.onnx", "silero_vad_half.onnx"])
def test_silero_vad_eval_runs(sparq_eval, tmp_path, name):
    """`sparq eval` of Silero VAD (and its opset 15 and float16 exports) with
    --constant sr=16000 over a few chunks (the file holds one state [2, 128]
    per chunk: the model's batch axis is its axis 1), its outputs against
    onnxruntime's, chunk by chunk."""
    import find_divergence

    path = _silero_model(name)
    sr = [] if name == "silero_vad_half.onnx" else ["--constant", "sr=16000"]  # its sr is fixed inside
    rng = np.random.default_rng(2)
    chunks = rng.uniform(-0.5, 0.5, (4, 512)).astype(np.float32)
    states = rng.uniform(-0.5, 0.5, (4, 2, 128)).astype(np.float32)
    inputs_path = str(tmp_path / "inputs.npz")
    out_path = str(tmp_path / "outputs.npz")
    np.savez(inputs_path, input=chunks, state=states)
    proc = sparq_eval.run("eval", path, "--inputs", inputs_path, *sr, "--save-outputs", out_path, "--threads", 2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with np.load(out_path) as f:
        got = {k: f[k] for k in f.files}
    assert len(got["output"]) == len(chunks)
    for i in range(len(chunks)):
        feeds = {"input": chunks[i:i + 1], "state": states[i][:, None]}
        if sr:
            feeds["sr"] = np.array(16000, np.int64)
        want = find_divergence.run_onnxruntime(path, feeds)
        err = find_divergence.relative_error(got["output"][i].reshape(want["output"].shape), want["output"])
        assert err < MAX_RELATIVE_ERROR, f"chunk {i}: output relative error {err:.3g}"


def _conv_then_if_model():
    """x -> Conv -> h -> Relu -> r -> Conv -> h2, then If(c): Add(h2, h) or
    Mul(h2, w3); the branches read outer node outputs and an initializer
    that nothing else reads."""
    from onnx import TensorProto, helper, numpy_helper

    F = TensorProto.FLOAT
    rng = np.random.default_rng(4)
    w1 = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (4, 2, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (4, 4, 3, 3)).astype(np.float32), "w2")
    w3 = numpy_helper.from_array(rng.uniform(0.5, 1.5, (1, 4, 1, 1)).astype(np.float32), "w3")
    shape = ["N", 4, 8, 8]
    then_g = helper.make_graph([helper.make_node("Add", ["h2", "h"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F, shape)])
    else_g = helper.make_graph([helper.make_node("Mul", ["h2", "w3"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, shape)])
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["h2"], pads=[1, 1, 1, 1]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "conv_if",
                          [helper.make_tensor_value_info("x", F, ["N", 2, 8, 8]),
                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", F, shape)], initializer=[w1, w2, w3])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_quantized_model_with_if_loads_in_onnxruntime(sparq, tmp_path, precision):
    """sparq calibrate + quantize of a model with an If whose branches read
    quantized layers' outputs: the outer Convs are quantized, the branches
    stay as written, and the file passes onnx.checker and runs in
    onnxruntime close to the float model."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    sparq.require_subcommand("quantize")
    model_path = str(tmp_path / "conv_if.onnx")
    onnx.save(_conv_then_if_model(), model_path)
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (16, 2, 8, 8)).astype(np.float32)
    calib = str(tmp_path / "calib.npz")
    np.savez(calib, x=x, c=np.array(True))
    scales = str(tmp_path / "scales.json")
    out = str(tmp_path / f"conv_if.{precision}.onnx")
    proc = sparq.run("calibrate", model_path, "--data", calib, "-o", scales, "--method", "max", "--threads", 2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = sparq.run("quantize", model_path, "--scales", scales, "--precision", precision, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = onnx.load(out)
    onnx.checker.check_model(written)
    ops = [n.op_type for n in written.graph.node]
    assert "If" in ops
    if precision == "int8":
        assert ops.count("QuantizeLinear") >= 2, ops
    session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    reference = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    for c in (True, False):
        feeds = {"x": x[:4], "c": np.array(c)}
        got = session.run(None, feeds)[0]
        want = reference.run(None, feeds)[0]
        err = float(np.abs(got - want).max() / np.abs(want).max())
        assert err < 0.05, f"c={c}: relative error {err:.3g} of the {precision} model vs float"


def test_quantized_silero_vad_loads_in_onnxruntime(sparq, tmp_path):
    """Silero VAD's Convs all sit inside If branches: `sparq quantize` (which
    pins no input) says so and that nothing was quantized, and the written
    file passes onnx.checker and runs in onnxruntime."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    sparq.require_subcommand("quantize")
    path = _silero_model()
    rng = np.random.default_rng(6)
    calib = str(tmp_path / "calib.npz")
    np.savez(calib, input=rng.uniform(-0.5, 0.5, (8, 512)).astype(np.float32),
             state=np.zeros((8, 2, 128), np.float32), sr=np.array(16000, np.int64))
    scales = str(tmp_path / "scales.json")
    out = str(tmp_path / "silero.int8.onnx")
    proc = sparq.run("calibrate", path, "--data", calib, "-o", scales, "--method", "max", "--threads", 2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = sparq.run("quantize", path, "--scales", scales, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inside If/Loop/Scan subgraphs stay as written" in proc.stderr, proc.stderr
    assert "nothing was quantized (int8 layers: 0)" in proc.stderr, proc.stderr
    onnx.checker.check_model(onnx.load(out))
    feeds = {"input": rng.uniform(-0.5, 0.5, (1, 512)).astype(np.float32), "state": np.zeros((2, 1, 128), np.float32),
             "sr": np.array(16000, np.int64)}
    got = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.allclose(got, want, atol=1e-5)


def _rate_if_model():
    """y = If(sr == 16000) then Relu(x @ w) -> nested If(N == 1) reading the
    branch's value and the outer x, else x @ w8; z = y + 1. The nested If's
    condition is the batch size: it is left in place."""
    from onnx import TensorProto, helper, numpy_helper

    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    rng = np.random.default_rng(8)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (4, 4)).astype(np.float32), "w")
    w8 = numpy_helper.from_array(rng.uniform(-1, 1, (4, 4)).astype(np.float32), "w8")
    shape = ["N", 4]

    def vi(name, t=F, s=shape):
        return helper.make_tensor_value_info(name, t, s)

    inner_then = helper.make_graph([helper.make_node("Add", ["t_r", "x"], ["it"])], "inner_then", [], [vi("it")])
    inner_else = helper.make_graph([helper.make_node("Sub", ["t_r", "x"], ["ie"])], "inner_else", [], [vi("ie")])
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t_m"]), helper.make_node("Relu", ["t_m"], ["t_r"]),
         helper.make_node("Shape", ["x"], ["t_s"]),
         helper.make_node("Gather", ["t_s", "zero"], ["t_n"], axis=0),
         helper.make_node("Equal", ["t_n", "one"], ["t_c"]),
         helper.make_node("If", ["t_c"], ["t_y"], then_branch=inner_then, else_branch=inner_else)],
        "then", [], [vi("t_y")])
    else_g = helper.make_graph([helper.make_node("MatMul", ["x", "w8"], ["e_y"])], "else", [], [vi("e_y")])
    nodes = [helper.make_node("Constant", [], ["k16"], value=numpy_helper.from_array(np.array(16000, np.int64))),
             helper.make_node("Equal", ["sr", "k16"], ["is16"]),
             helper.make_node("If", ["is16"], ["y"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["y", "onef"], ["z"])]
    inits = [w, w8, numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array(1.0, np.float32), "onef")]
    g = helper.make_graph(nodes, "rate_if", [vi("x"), helper.make_tensor_value_info("sr", I64, [])], [vi("z")],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _run_recipe(sparq, tmp_path, name, model_path, data, sr, quantize):
    out_dir = tmp_path / name
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(
        f"version: 1\nmodel: {model_path}\n"
        f"data:\n  calibration: {data}\n  evaluation: {data}\n  batch_size: 4\n  constants: {{sr: {sr}}}\n"
        f"output: {{dir: {out_dir}, overwrite: true}}\n"
        + ("" if quantize else "quantize: {enabled: false}\n")
        + "evaluate: {metric: sqnr, gate: {min_sqnr_db: 20}}\n")
    proc = sparq.run("run", str(recipe))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stem = os.path.splitext(os.path.basename(model_path))[0]
    return str(out_dir / f"{stem}.sparq.onnx"), proc.stdout + proc.stderr


@pytest.mark.parametrize("sr", [16000, 8000])
def test_if_folded_by_pinned_input_matches_onnxruntime(sparq, tmp_path, sr):
    """`sparq run` with data.constants {sr: ...} folds the If on sr (either
    branch) and writes a model without the input sr; onnxruntime running it
    agrees with onnxruntime running the original fed that sr, at batch 1
    and 3 (the nested If on the batch size takes each branch)."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    model_path = str(tmp_path / "rate_if.onnx")
    model = _rate_if_model()
    onnx.checker.check_model(model)
    onnx.save(model, model_path)
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (16, 4)).astype(np.float32)
    data = str(tmp_path / "x.npz")
    np.savez(data, x=x)
    out, log = _run_recipe(sparq, tmp_path, f"float_{sr}", model_path, data, sr, quantize=False)
    assert "fold If" in log, log
    written = onnx.load(out)
    onnx.checker.check_model(written)
    assert [i.name for i in written.graph.input] == ["x"]
    ops = [n.op_type for n in written.graph.node]
    assert ops.count("If") == (1 if sr == 16000 else 0), ops
    folded = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    original = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    for n in (1, 3):
        got = folded.run(None, {"x": x[:n]})[0]
        want = original.run(None, {"x": x[:n], "sr": np.array(sr, np.int64)})[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    with pytest.raises(Exception, match="sr"):  # the pinned input is gone: feeding it is an error
        folded.run(None, {"x": x[:1], "sr": np.array(sr, np.int64)})


def test_silero_vad_default_recipe_folds_and_quantizes(sparq, tmp_path):
    """Silero VAD with sr pinned: the If on sr folds, the float file matches
    onnxruntime on the original at 16 kHz, and the default recipe writes
    integer convolutions that onnxruntime runs close to the float model."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    path = _silero_model()
    rng = np.random.default_rng(10)
    chunks = rng.uniform(-0.3, 0.3, (16, 512)).astype(np.float32)
    states = np.zeros((16, 2, 128), np.float32)
    data = str(tmp_path / "chunks.npz")
    np.savez(data, input=chunks, state=states)
    float_path, log = _run_recipe(sparq, tmp_path, "float", path, data, 16000, quantize=False)
    assert "the written model has no input 'sr'" in log, log
    int8_path, log = _run_recipe(sparq, tmp_path, "int8", path, data, 16000, quantize=True)
    assert "nothing was quantized" not in log, log
    for written in (float_path, int8_path):
        onnx.checker.check_model(onnx.load(written), full_check=True)
    ops = [n.op_type for n in onnx.load(int8_path).graph.node]
    assert ops.count("QuantizeLinear") >= 2, ops
    original = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    folded = ort.InferenceSession(float_path, providers=["CPUExecutionProvider"])
    quantized = ort.InferenceSession(int8_path, providers=["CPUExecutionProvider"])
    for i in range(4):
        feeds = {"input": chunks[i:i + 1], "state": states[i][:, None]}
        want = original.run(None, {**feeds, "sr": np.array(16000, np.int64)})
        for got, ref in zip(folded.run(None, feeds), want):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
        p = quantized.run(None, feeds)[0]
        assert np.abs(p - want[0]).max() < 0.05, (p, want[0])


def _streaming_audio(n_windows):
    """[1, n_windows * 512] of 16 kHz audio: pyannote.audio's sample
    conversation from 7 s (speech: its RTTM starts the first turn at 6.7 s) when installed, else uniform noise."""
    import importlib.util

    spec = importlib.util.find_spec("pyannote.audio")
    if spec is not None and spec.submodule_search_locations:
        import scipy.io.wavfile

        path = os.path.join(list(spec.submodule_search_locations)[0], "sample", "sample.wav")
        if os.path.isfile(path):
            rate, x = scipy.io.wavfile.read(path)
            if rate == 16000:
                x = x.astype(np.float32)
                x = 0.9 * x / max(float(np.abs(x).max()), 1e-9)
                return x[None, 7 * 16000:7 * 16000 + n_windows * 512].copy()
    return np.random.default_rng(11).uniform(-0.3, 0.3, (1, n_windows * 512)).astype(np.float32)


def _ops_by_depth(graph, depth=0, found=None):
    """{(op_type, subgraph depth): count}."""
    found = {} if found is None else found
    for node in graph.node:
        found[(node.op_type, depth)] = found.get((node.op_type, depth), 0) + 1
        for a in node.attribute:
            if a.g is not None and len(a.g.node):
                _ops_by_depth(a.g, depth + 1, found)
    return found


def _shipped_probabilities(windows):
    """silero_vad.onnx as shipped, run window by window at 16 kHz."""
    import onnxruntime as ort

    session = ort.InferenceSession(_silero_model(), providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    probs = []
    for w in windows[0]:
        p, state = session.run(None, {"input": w[None], "state": state, "sr": np.array(16000, np.int64)})
        probs.append(p[0, 0])
    return np.array(probs, np.float32)[None], state


@pytest.mark.parametrize("kind", ["loop", "scan"])
def test_silero_streaming_loop_and_scan_match_onnxruntime(tmp_path, kind):
    """A real model using Loop and one using Scan (issue 24, point 4): Silero
    VAD streamed over 8 windows of speech (the Loop also over 3 windows at
    batch 2: its trip count and batch are the input's). Its body holds the
    pretrained Convs and the LSTM (Loop) or its Gemms (Scan). sparq matches
    onnxruntime, which matches the shipped single-window model."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    _silero_model()  # skips without silero_vad
    import silero_streaming

    node_tests = _node_tests()
    path = str(tmp_path / f"silero_{kind}.onnx")
    (silero_streaming.export_loop if kind == "loop" else silero_streaming.export_scan)(path)
    model = onnx.load(path)
    ops = _ops_by_depth(model.graph)
    top = "Loop" if kind == "loop" else "Scan"
    assert ops.get((top, 0)) == 1, ops
    assert ops.get(("Conv", 1)) == 6, ops
    assert ops.get(("LSTM", 2) if kind == "loop" else ("Gemm", 1), 0) >= 1, ops
    audio = _streaming_audio(8)
    windows = silero_streaming.windows(audio)
    state = np.zeros((2, 1, 128), np.float32)
    want_probs, want_state = _shipped_probabilities(windows)
    cases = [("speech_8", {"audio": audio, "state": state} if kind == "loop" else {"windows": windows, "state": state})]
    if kind == "loop":
        noise = np.random.default_rng(12).uniform(-0.3, 0.3, (2, 3 * 512)).astype(np.float32)
        cases.append(("noise_batch2_3", {"audio": noise, "state": np.zeros((2, 2, 128), np.float32)}))
    import onnxruntime as ort

    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, cases[0][1])
    np.testing.assert_allclose(got[0], want_probs, atol=1e-5)
    np.testing.assert_allclose(got[1], want_state, atol=1e-4)
    root = str(tmp_path / "cases")
    for name, feeds in cases:
        _write_case(root, f"silero_{kind}_{name}", model, feeds)
    proc = subprocess.run([node_tests, "--data", root, "--verbose"], capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    assert f"{len(cases)} passed, 0 failed, 0 skipped" in text, text[-4000:]


def test_silero_calibrate_then_quantize_by_table_equals_run(sparq, tmp_path):
    """calibrate --constant sr=16000 folds the If as `sparq run` does, and the
    table records the pin: quantize with the same --constant writes the graph
    `sparq run` writes with that table as quantize.scales (provenance aside);
    without the pin, or with another, exit 2 naming it."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    sparq.require_subcommand("quantize")
    path = _silero_model()
    rng = np.random.default_rng(13)
    chunks = rng.uniform(-0.3, 0.3, (16, 576)).astype(np.float32)
    states = np.zeros((16, 2, 128), np.float32)
    data = str(tmp_path / "chunks.npz")
    np.savez(data, input=chunks, state=states)
    scales = str(tmp_path / "scales.json")
    proc = sparq.run("calibrate", path, "--data", data, "--constant", "sr=16000", "--method", "max", "--batch", 4,
                     "-o", scales, "--threads", 2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--constant sr=16000 decided an If" in proc.stderr, proc.stderr
    import json

    with open(scales) as f:
        table = json.load(f)
    assert table["folded_inputs"] == {"sr": [16000.0]}
    out = str(tmp_path / "by_table.onnx")
    proc = sparq.run("quantize", path, "--scales", scales, "--constant", "sr=16000", "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fold If" in proc.stderr and "nothing was quantized" not in proc.stderr, proc.stderr
    for bad, says in ((["--constant", "sr=8000"], "pins sr=8000"), ([], "--constant sr=16000"),
                      (["--constant", "rate=1"], "no such input")):
        proc = sparq.run("quantize", path, "--scales", scales, *bad, "-o", str(tmp_path / "bad.onnx"))
        assert proc.returncode == 2 and says in proc.stderr, (bad, proc.stdout + proc.stderr)

    out_dir = tmp_path / "run"
    recipe = tmp_path / "run.yaml"
    recipe.write_text(
        f"version: 1\nmodel: {path}\n"
        f"data:\n  calibration: {data}\n  evaluation: {data}\n  batch_size: 4\n  constants: {{sr: 16000}}\n"
        f"output: {{dir: {out_dir}, overwrite: true}}\n"
        f"quantize: {{scales: {scales}, fallback: {{enabled: false}}}}\n"
        "evaluate: {metric: sqnr, gate: {min_sqnr_db: 0}}\n")
    proc = sparq.run("run", str(recipe))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    by_run = onnx.load(str(out_dir / "silero_vad.sparq.onnx"))
    by_table = onnx.load(out)
    for m in (by_run, by_table):
        del m.metadata_props[:]
    assert by_run.SerializeToString() == by_table.SerializeToString()
    ops = [n.op_type for n in by_table.graph.node]
    assert ops.count("QuantizeLinear") >= 2, ops  # the Convs of the folded branch (Ifs on shapes stay)
    assert [i.name for i in by_table.graph.input] == ["input", "state"]
    session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    original = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for i in range(4):
        feeds = {"input": chunks[i:i + 1], "state": states[i][:, None]}
        want = original.run(None, {**feeds, "sr": np.array(16000, np.int64)})[0]
        assert np.abs(session.run(None, feeds)[0] - want).max() < 0.05
