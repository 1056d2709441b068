"""Shared fixtures for sparq's Python interop tests.

Environment (ctest's python_interop test sets all three):
  SPARQ_BIN         the sparq CLI binary; tests that run it are skipped without it
  SPARQ_BUILD_DIR   where generated models go (<dir>/models); a temporary
                    folder when unset
  SPARQ_SOURCE_DIR  the repository root; defaults to this file's ../..
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

SOURCE_DIR = os.environ.get("SPARQ_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS_DIR = os.path.join(SOURCE_DIR, "tools")
if TOOLS_DIR not in sys.path:
    sys.path.insert(0, TOOLS_DIR)

# Seconds one sparq command may take before the test fails (the reference
# kernels run resnet18 at 224x224; slow, but not minutes).
SPARQ_TIMEOUT_S = 300


class Sparq:
    """Runs the sparq CLI binary."""

    def __init__(self, path: str):
        self.path = path
        self._help_answers = {}  # memoized has_subcommand / has_option results

    def run(self, *args, timeout: float = SPARQ_TIMEOUT_S) -> subprocess.CompletedProcess:
        return subprocess.run([self.path, *map(str, args)], capture_output=True, text=True,
                              timeout=timeout)

    def has_subcommand(self, name: str) -> bool:
        """True when `sparq NAME` is a subcommand: listed in `sparq --help`, or
        `sparq NAME --help` succeeds with a usage line naming it."""
        if name not in self._help_answers:
            found = False
            top = self.run("--help", timeout=30)
            if top.returncode == 0 and re.search(rf"^\s+{re.escape(name)}\b", top.stdout + top.stderr, re.M):
                found = True
            else:
                sub = self.run(name, "--help", timeout=30)
                text = sub.stdout + sub.stderr
                found = sub.returncode == 0 and re.search(rf"usage:.*\b{re.escape(name)}\b", text, re.I) is not None
            self._help_answers[name] = found
        return self._help_answers[name]

    def has_option(self, subcommand: str, option: str) -> bool:
        """True when `sparq SUBCOMMAND --help` mentions `option`."""
        key = (subcommand, option)
        if key not in self._help_answers:
            proc = self.run(subcommand, "--help", timeout=30)
            self._help_answers[key] = proc.returncode == 0 and re.search(
                rf"(^|[\s,]){re.escape(option)}\b", proc.stdout + proc.stderr) is not None
        return self._help_answers[key]

    def require_subcommand(self, name: str) -> None:
        if not self.has_subcommand(name):
            pytest.skip(f"`sparq {name}` does not exist yet in {self.path}")

    def eval(self, model_path, inputs: dict, work_dir, threads: int = 2, tag: str = "run") -> dict:
        """Runs `sparq eval` on `inputs` (name -> array); returns the saved outputs.
        Fails the test with sparq's messages when it exits non-zero."""
        inputs_path = os.path.join(str(work_dir), f"{tag}_inputs.npz")
        out_path = os.path.join(str(work_dir), f"{tag}_outputs.npz")
        np.savez(inputs_path, **inputs)
        args = ["eval", model_path, "--inputs", inputs_path, "--save-outputs", out_path, "--threads", threads]
        if self.has_option("eval", "--batch"):
            # Run all samples as one batch (eval's default for a dynamic batch
            # dimension is one sample per run), so batch > 1 is really tested.
            args += ["--batch", len(next(iter(inputs.values())))]
        proc = self.run(*args)
        if proc.returncode != 0:
            pytest.fail(f"sparq eval {os.path.basename(str(model_path))} exited {proc.returncode}:\n"
                        f"{proc.stdout}{proc.stderr}", pytrace=False)
        assert os.path.isfile(out_path), f"sparq eval exited 0 but wrote no {out_path}"
        with np.load(out_path) as f:
            return {k: f[k] for k in f.files}


@pytest.fixture(scope="session")
def sparq() -> Sparq:
    path = os.environ.get("SPARQ_BIN")
    if not path:
        pytest.skip("SPARQ_BIN is not set (ctest sets it; or export SPARQ_BIN=build/bin/sparq)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"SPARQ_BIN={path} is not an executable file", pytrace=False)
    return Sparq(path)


@pytest.fixture(scope="session")
def sparq_eval(sparq) -> Sparq:
    """The CLI, with its `eval` subcommand present (skips otherwise)."""
    sparq.require_subcommand("eval")
    return sparq


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> str:
    """Folder with the models of tools/make_test_models.py (made once, cached
    by the script's stamp under $SPARQ_BUILD_DIR/models)."""
    build_dir = os.environ.get("SPARQ_BUILD_DIR")
    out_dir = os.path.join(build_dir, "models") if build_dir else str(tmp_path_factory.mktemp("models"))
    script = os.path.join(TOOLS_DIR, "make_test_models.py")
    proc = subprocess.run([sys.executable, script, out_dir], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"{script} failed:\n{proc.stdout}{proc.stderr}", pytrace=False)
    return out_dir


def make_real_suite_model(tmp_path_factory, model: str, calib: int, evaluation: int) -> str:
    """The folder of one model of the real-model suite (tools/make_real_suite.py:
    model.onnx, calib.npz, eval.npz, meta.json), made once and cached by the
    script's stamp under $SPARQ_BUILD_DIR/models/real_ci."""
    build_dir = os.environ.get("SPARQ_BUILD_DIR")
    out = os.path.join(build_dir, "models", "real_ci") if build_dir else str(tmp_path_factory.mktemp("real_ci"))
    script = os.path.join(TOOLS_DIR, "make_real_suite.py")
    proc = subprocess.run([sys.executable, script, "--out", out, "--models", model, "--calib", str(calib),
                           "--eval", str(evaluation)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"{script} failed:\n{proc.stdout}{proc.stderr}", pytrace=False)
    if f"{model}: skipped:" in proc.stdout:  # its wheel is not installed
        pytest.skip(proc.stdout.strip().splitlines()[-1])
    return os.path.join(out, model)


def load_npz(path) -> dict:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


# The digits CNN (examples/digits) and its data: the model the pruning tests run in seconds.
DIGITS = os.path.join(SOURCE_DIR, "examples", "digits")
# The ops whose input 1 is a weight prune.* masks.
WEIGHTED_OPS = ("Conv", "Gemm", "MatMul")


def write_digits_retrain_recipe(recipe, command, out_dir, timeout):
    """Writes a `sparq run` recipe to `recipe`: the digits CNN pruned to 50%
    unstructured in 2 linear steps (no recovery, no quantization), running
    prune.retrain's `command` (a list) after each step; output into out_dir."""
    recipe.write_text(f"""version: 1
model: {DIGITS}/digits_cnn.onnx
data:
  calibration: {DIGITS}/calib.npz
  evaluation: {DIGITS}/eval.npz
  labels: {DIGITS}/eval_labels.npy
prune:
  enabled: true
  sparsity: 0.5
  schedule: linear
  steps: 2
  recovery: false
  skip_first_last: false
  retrain:
    command: {json.dumps(command)}
    timeout: {timeout}
quantize:
  enabled: false
evaluate:
  metric: top1
  gate: {{max_drop: 50}}
output:
  dir: {out_dir}
""")
    return recipe


def weighted_initializers(model) -> set:
    """The names of the weights of a model's Conv / Gemm / MatMul nodes."""
    return {n.input[1] for n in model.graph.node if n.op_type in WEIGHTED_OPS}


def only_written_model(out_dir) -> str:
    """The path of the one .onnx file a run wrote into out_dir (asserted: exactly one)."""
    written = [f for f in os.listdir(out_dir) if f.endswith(".onnx")]
    assert len(written) == 1, written
    return os.path.join(str(out_dir), written[0])

