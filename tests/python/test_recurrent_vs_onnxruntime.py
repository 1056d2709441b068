"""sparq's RNN, GRU and LSTM kernels against onnxruntime.

1. A torch model of stacked nn.LSTM (bidirectional, two layers), nn.GRU and
   nn.RNN (relu), exported by torch.onnx.export (TorchScript exporter: one
   ONNX LSTM/GRU/RNN node per layer), run by `sparq eval` and onnxruntime at
   batch 1 and 3; outputs agree to max|sparq - ort| / max|ort| < 1e-4.
2. Single-node models sweeping the attributes torch does not export (clip,
   peepholes, input_forget, sequence_lens, linear_before_reset, every ONNX
   activation with activation_alpha/beta, layout 1, initial states, optional
   outputs), written as ONNX node-test cases with onnxruntime's outputs and
   run by `node_tests --data` (each input fed as given, whatever its axes).
   onnxruntime runs layout 0 only, so a layout 1 case's expected outputs are
   onnxruntime's on the transposed inputs, transposed back.
"""
import os
import subprocess
import warnings

import numpy as np
import pytest

from conftest import SOURCE_DIR
import find_divergence

MAX_RELATIVE_ERROR = 1e-4

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


@pytest.fixture(scope="module")
def torch_recurrent_model(tmp_path_factory):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")

    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(4, 8, num_layers=2, bidirectional=True, batch_first=True)
            self.gru = torch.nn.GRU(16, 6, batch_first=True)
            self.rnn = torch.nn.RNN(6, 5, batch_first=True, nonlinearity="relu")

        def forward(self, x):
            y, (h, _) = self.lstm(x)
            y, _ = self.gru(y)
            y, _ = self.rnn(y)
            return y, h.transpose(0, 1).reshape(x.shape[0], -1)

    torch.manual_seed(0)
    path = str(tmp_path_factory.mktemp("recurrent") / "recurrent.onnx")
    with warnings.catch_warnings():  # the tracer's notes on batch sizes and Python booleans
        warnings.simplefilter("ignore")
        torch.onnx.export(Recurrent().eval(), (torch.randn(2, 7, 4),), path, input_names=["x"],
                          output_names=["y", "h"], dynamic_axes={"x": {0: "batch"}}, opset_version=17, dynamo=False)
    return path


@pytest.mark.parametrize("batch", [1, 3])
def test_torch_recurrent_model_matches_onnxruntime(sparq_eval, torch_recurrent_model, tmp_path, batch):
    import onnx

    ops = {n.op_type for n in onnx.load(torch_recurrent_model).graph.node}
    assert {"LSTM", "GRU", "RNN"} <= ops, f"the export has no recurrent nodes: {sorted(ops)}"
    inputs = {"x": np.random.default_rng(batch).standard_normal((batch, 7, 4)).astype(np.float32)}
    want = find_divergence.run_onnxruntime(torch_recurrent_model, inputs)
    got = sparq_eval.eval(torch_recurrent_model, inputs, tmp_path)
    for name, w in want.items():
        err = find_divergence.relative_error(got.get(name), w)
        assert err < MAX_RELATIVE_ERROR, f"output {name}: max|sparq - ort| / max|ort| = {err:.3g}"


def _write_case(root, name, op, rng, opset=14, direction="forward", layout=0, bias=True, lens=None, init_h=False,
                init_c=False, peep=False, attrs=None, outputs=("Y", "Y_h", "Y_c"), seq=5, batch=3, inp=4, hidden=3):
    """One node-test case folder (model.onnx, test_data_set_0) under `root`."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    feeds = {"X": rng.uniform(-1, 1, (seq, batch, inp) if layout == 0 else (batch, seq, inp)).astype(np.float32),
             "W": rng.uniform(-0.7, 0.7, (dirs, g * hidden, inp)).astype(np.float32),
             "R": rng.uniform(-0.7, 0.7, (dirs, g * hidden, hidden)).astype(np.float32)}
    names = ["X", "W", "R"]
    state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    optional = [("B", rng.uniform(-0.5, 0.5, (dirs, 2 * g * hidden)).astype(np.float32) if bias else None),
                ("sequence_lens", np.array(lens, np.int32) if lens is not None else None),
                ("initial_h", rng.uniform(-1, 1, state).astype(np.float32) if init_h else None)]
    if op == "LSTM":
        optional += [("initial_c", rng.uniform(-1, 1, state).astype(np.float32) if init_c else None),
                     ("P", rng.uniform(-0.5, 0.5, (dirs, 3 * hidden)).astype(np.float32) if peep else None)]
    for n, v in optional:
        names.append(n if v is not None else "")
        if v is not None:
            feeds[n] = v
    while names[-1] == "":
        names.pop()
    outs = list(outputs) if op == "LSTM" else [o for o in outputs if o != "Y_c"]
    present = [n for n in names if n]
    wanted = [o for o in outs if o]

    def model(layout_attr, shapes):
        a = dict(hidden_size=hidden, direction=direction, **(attrs or {}))
        if opset >= 14:
            a["layout"] = layout_attr
        node = helper.make_node(op, names, outs, **a)
        ins = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else TensorProto.FLOAT,
                                             shapes[n].shape) for n in present]
        out_info = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in wanted]
        m = helper.make_model(helper.make_graph([node], name, ins, out_info),
                              opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m

    if layout == 0:
        session = ort.InferenceSession(model(0, feeds).SerializeToString(), providers=["CPUExecutionProvider"])
        results = session.run(wanted, feeds)
    else:
        swapped = {k: (np.swapaxes(v, 0, 1).copy() if k in ("X", "initial_h", "initial_c") else v)
                   for k, v in feeds.items()}
        session = ort.InferenceSession(model(0, swapped).SerializeToString(), providers=["CPUExecutionProvider"])
        results = [np.ascontiguousarray(np.transpose(v, (2, 0, 1, 3)) if o == "Y" else np.swapaxes(v, 0, 1))
                   for o, v in zip(wanted, session.run(wanted, swapped))]
    case_dir = os.path.join(root, "test_" + name)
    data_dir = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(data_dir)
    onnx.save(model(layout, feeds), os.path.join(case_dir, "model.onnx"))
    for i, n in enumerate(present):
        with open(os.path.join(data_dir, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
    for i, (o, v) in enumerate(zip(wanted, results)):
        with open(os.path.join(data_dir, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, o).SerializeToString())


ACTIVATIONS = {
    "RNN": [["Relu"], ["LeakyRelu"], ["HardSigmoid"], ["Elu"], ["Softsign"], ["Softplus"], ["ThresholdedRelu"],
            ["Affine"], ["ScaledTanh"], ["Sigmoid"]],
    "GRU": [["Relu", "Tanh"], ["HardSigmoid", "LeakyRelu"], ["Sigmoid", "ScaledTanh"]],
    "LSTM": [["HardSigmoid", "Tanh", "Relu"], ["Sigmoid", "LeakyRelu", "Softsign"], ["Sigmoid", "Elu", "Affine"]],
}


# Activations whose alpha/beta default differs: sparq takes the ONNX
# operators' defaults as the spec says (ThresholdedRelu alpha 1; Affine alpha
# 1, beta 0; ScaledTanh alpha 1, beta 1), onnxruntime 0. Swept with
# activation_alpha/beta given only.
DEFAULTS_DIFFER = {"ThresholdedRelu", "Affine", "ScaledTanh"}


def test_attribute_sweep_matches_onnxruntime(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    build_dir = os.environ.get("SPARQ_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
    node_tests = os.path.join(build_dir, "bin", "node_tests")
    if not os.access(node_tests, os.X_OK):
        pytest.skip(f"{node_tests} is not built")
    rng = np.random.default_rng(0)
    root = str(tmp_path / "cases")
    n = 0

    def case(name, op, **kw):
        nonlocal n
        _write_case(root, name, op, rng, **kw)
        n += 1

    for op in GATES:
        o = op.lower()
        for direction in ("forward", "reverse", "bidirectional"):
            for layout in (0, 1):
                case(f"{o}_{direction}_layout{layout}", op, direction=direction, layout=layout, init_h=True,
                     init_c=True)
                case(f"{o}_{direction}_layout{layout}_lens", op, direction=direction, layout=layout, lens=[5, 2, 3],
                     init_h=True, init_c=True)
        case(f"{o}_opset7", op, opset=7, direction="bidirectional")
        case(f"{o}_no_bias", op, bias=False)
        case(f"{o}_clip", op, attrs=dict(clip=0.3), direction="bidirectional")
        case(f"{o}_y_h_only", op, outputs=("", "Y_h"))
        case(f"{o}_y_only", op, outputs=("Y",))
        case(f"{o}_length_0", op, lens=[5, 0, 2], init_h=True, init_c=True, direction="bidirectional")
        for k, acts in enumerate(ACTIVATIONS[op]):
            if not DEFAULTS_DIFFER & set(acts):
                case(f"{o}_activations{k}", op, attrs=dict(activations=acts))
            case(f"{o}_activations{k}_alpha_beta", op,
                 attrs=dict(activations=acts, activation_alpha=[0.3, 0.7, 0.4], activation_beta=[0.6, 0.2, 0.1]))
            case(f"{o}_activations{k}_bidirectional", op, direction="bidirectional",
                 attrs=dict(activations=acts + acts[::-1], activation_alpha=[0.3, 0.7, 0.4, 0.9],
                            activation_beta=[0.6, 0.2, 0.1, 0.3]))
    case("gru_linear_before_reset", "GRU", attrs=dict(linear_before_reset=1), direction="bidirectional", init_h=True,
         lens=[5, 1, 4])
    case("gru_linear_before_reset_layout1", "GRU", attrs=dict(linear_before_reset=1), layout=1)
    case("lstm_peepholes", "LSTM", peep=True, init_c=True, init_h=True, direction="bidirectional", lens=[3, 5, 1])
    case("lstm_peepholes_clip", "LSTM", peep=True, init_c=True, attrs=dict(clip=0.5))
    case("lstm_input_forget", "LSTM", peep=True, init_c=True, attrs=dict(input_forget=1), direction="bidirectional")

    proc = subprocess.run([node_tests, "--data", root, "--verbose"], capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    assert f"{n} passed, 0 failed, 0 skipped" in text, text[-4000:]
