"""Silero VAD's pretrained 16 kHz network streamed over an audio clip, as ONNX
Loop and Scan models (issue 24: a real model using each control-flow kind).

silero-vad ships its network as silero_vad.onnx (one If on the sample rate
around it) and as silero_vad.jit, whose `audio_forward` runs the network over
a clip window by window in a TorchScript loop, the LSTM state carried from
one 512-sample window to the next. The ONNX files hold one window per call.
This module exports that streaming loop two ways:

- `export_loop`: the loop scripted (torch.jit.script) around the JIT file's
  own 16 kHz network and exported by torch's TorchScript exporter: an ONNX
  Loop over the windows whose body holds the network (6 Conv, the LSTM, and
  the Ifs TorchScript keeps for its state checks), its trip count the clip
  length / 512, the state and the probabilities so far carried;
- `export_scan`: torch.export cannot trace a TorchScript module, so the 16 kHz
  network is rebuilt in torch (the layers of the wheel's tinygrad_model.py)
  with the JIT file's weights (checked equal to its outputs), and the loop
  written with torch's scan operator and exported by torch.export (the dynamo
  exporter): an ONNX Scan over a [1, W, 576]
  tensor of windows (64 context samples + 512), the state carried, one
  probability per window scanned out. That exporter cannot scan over a
  symbolic length yet (torch 2.15: "Expected leaf to be a Tensor or None,
  got SymInt"), so W is fixed at export.

Nothing is downloaded: everything comes from the installed silero-vad and
torch wheels.
"""
import os
import warnings

import numpy as np

WINDOW = 512   # samples per window at 16 kHz
CONTEXT = 64   # samples of the previous window before each one


def _jit_network():
    """silero_vad.jit's 16 kHz network (a TorchScript module), as shipped."""
    import torch
    import silero_vad

    path = os.path.join(os.path.dirname(silero_vad.__file__), "data", "silero_vad.jit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.load(path, map_location="cpu")._model


def _network():
    import torch

    class SileroVad16k(torch.nn.Module):
        """x [B, 576], state [2, B, 128] -> (probability [B, 1], state)."""

        def __init__(self):
            super().__init__()
            self.stft_conv = torch.nn.Conv1d(1, 258, 256, stride=128, bias=False)
            self.conv1 = torch.nn.Conv1d(129, 128, 3, padding=1)
            self.conv2 = torch.nn.Conv1d(128, 64, 3, stride=2, padding=1)
            self.conv3 = torch.nn.Conv1d(64, 64, 3, stride=2, padding=1)
            self.conv4 = torch.nn.Conv1d(64, 128, 3, padding=1)
            self.lstm_cell = torch.nn.LSTMCell(128, 128)
            self.final_conv = torch.nn.Conv1d(128, 1, 1)

        def forward(self, x, state):
            x = torch.nn.functional.pad(x, (0, 64), "reflect").unsqueeze(1)
            x = self.stft_conv(x)
            x = torch.sqrt(x[:, :129] ** 2 + x[:, 129:] ** 2)
            x = torch.relu(self.conv1(x))
            x = torch.relu(self.conv2(x))
            x = torch.relu(self.conv3(x))
            x = torch.relu(self.conv4(x)).squeeze(-1)
            h, c = self.lstm_cell(x, (state[0], state[1]))
            y = torch.sigmoid(self.final_conv(torch.relu(h).unsqueeze(-1)))
            return y.squeeze(1).mean(1, keepdim=True), torch.stack([h, c])

    jit = _jit_network()
    weights = {k: v.detach() for k, v in list(jit.named_parameters()) + list(jit.named_buffers())}
    names = {"stft_conv.weight": "stft.forward_basis_buffer", "final_conv.weight": "decoder.decoder.2.weight",
             "final_conv.bias": "decoder.decoder.2.bias"}
    for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        names[f"lstm_cell.{p}"] = f"decoder.rnn.{p}"
    for i in range(4):
        for p in ("weight", "bias"):
            names[f"conv{i + 1}.{p}"] = f"encoder.{i}.reparam_conv.{p}"
    net = SileroVad16k().eval()
    net.load_state_dict({k: weights[v] for k, v in names.items()})
    # The JIT model's own forward is the reference: the same arithmetic.
    torch.manual_seed(0)
    x, state = torch.randn(2, CONTEXT + WINDOW) * 0.2, torch.randn(2, 2, 128) * 0.1
    with torch.no_grad():
        for mine, theirs in zip(net(x, state), jit(x, state)):
            if not torch.allclose(mine, theirs, atol=1e-6):
                raise RuntimeError("the rebuilt Silero VAD network does not match silero_vad.jit")
    return net


def windows(audio):
    """audio [B, T * 512] -> [B, T, 576]: each window after the previous one's last 64 samples (zeros first)."""
    b, n = audio.shape[0], audio.shape[1] // WINDOW
    padded = np.concatenate([np.zeros((b, CONTEXT), audio.dtype), audio[:, :n * WINDOW]], axis=1)
    return np.stack([padded[:, i * WINDOW:i * WINDOW + CONTEXT + WINDOW] for i in range(n)], axis=1)


def export_loop(path):
    """The streaming loop as an ONNX Loop: inputs audio [N, T] (T a multiple of
    512) and state [2, N, 128]; outputs probs [N, T / 512] and the last state."""
    import torch

    class Stream(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, audio: torch.Tensor, state: torch.Tensor):
            n = audio.size(1) // 512
            context = torch.zeros(audio.size(0), 64)
            probs = torch.zeros(audio.size(0), 0)
            for i in range(n):
                chunk = audio[:, i * 512:(i + 1) * 512]
                p, state = self.net(torch.cat([context, chunk], 1), state)
                context = chunk[:, 448:]
                probs = torch.cat([probs, p], 1)
            return probs, state

    scripted = torch.jit.script(Stream(_jit_network()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(scripted, (torch.zeros(1, 4 * WINDOW), torch.zeros(2, 1, 128)), path, dynamo=False,
                          opset_version=17, input_names=["audio", "state"], output_names=["probs", "state_out"],
                          dynamic_axes={"audio": {0: "N", 1: "T"}, "state": {1: "N"}, "probs": {0: "N", 1: "W"},
                                        "state_out": {1: "N"}})
    # The exporter leaves the carried state's output untyped (onnx.checker
    # refuses it): it is the state's type and shape.
    import onnx

    model = onnx.load(path)
    for out, dims in zip(model.graph.output, (["N", "W"], [2, "N", 128])):
        if not out.type.HasField("tensor_type"):
            out.CopyFrom(onnx.helper.make_tensor_value_info(out.name, onnx.TensorProto.FLOAT, dims))
    onnx.save(model, path)
    return path


def export_scan(path, n_windows=8):
    """The streaming loop as an ONNX Scan: inputs windows [1, n_windows, 576]
    (`windows`) and state [2, 1, 128]; outputs probs [1, n_windows] and the
    last state."""
    import torch
    from torch._higher_order_ops.scan import scan

    class ScanStream(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, windows, state):
            def step(s, w):
                p, s_next = self.net(w, s)
                return s_next.clone(), p.clone()

            last, probs = scan(step, state, windows.transpose(0, 1))
            return probs.squeeze(-1).transpose(0, 1), last

    module = ScanStream(_network()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, (torch.zeros(1, n_windows, CONTEXT + WINDOW), torch.zeros(2, 1, 128)),
                                    dynamo=True, opset_version=18, input_names=["windows", "state"],
                                    output_names=["probs", "state_out"], verbose=False)
    program.save(path)
    return path
