"""`sparq run` end to end, as CI uses it: the exit code (0 gate passed, 1 gate
failed, 2 error) and the files it writes.

The quickstart recipe (recipes/quickstart.yaml) is copied into a temporary
folder with its paths made absolute and its output folder there, so the
tests never write into the source tree.
"""
import json
import os
import re
import struct
import xml.etree.ElementTree as ET

import pytest

from conftest import SOURCE_DIR

QUICKSTART = os.path.join(SOURCE_DIR, "recipes", "quickstart.yaml")
EXAMPLES = os.path.join(SOURCE_DIR, "examples")
OUTPUT_FILES = ("digits_cnn.sparq.onnx", "scales.json", "calib.cache", "report.json", "junit.xml", "report.md")
EXIT_PASSED, EXIT_GATE_FAILED, EXIT_ERROR = 0, 1, 2


def quickstart_copy(tmp_path, out_dir: str, edits=()) -> str:
    """Writes recipes/quickstart.yaml into tmp_path with absolute data paths,
    output.dir = out_dir, and each (old, new) text edit applied; returns its path."""
    with open(QUICKSTART) as f:
        text = f.read()
    assert "../examples/" in text, "quickstart.yaml no longer reads ../examples/: update this test"
    text = text.replace("../examples/", EXAMPLES + "/")
    text, n = re.subn(r"^(\s+dir:\s*)\S+", lambda m: m.group(1) + out_dir, text, flags=re.M)
    assert n == 1, "quickstart.yaml should set output.dir once"
    for old, new in edits:
        assert old in text, f"quickstart.yaml no longer contains {old!r}: update this test"
        text = text.replace(old, new)
    path = str(tmp_path / "recipe.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def read_junit(path: str):
    """(testcases, failures) of a JUnit XML file."""
    root = ET.parse(path).getroot()
    cases = root.findall(".//testcase")
    failures = [f for case in cases for f in case.findall("failure")]
    return cases, failures


def decode_trt_cache(path: str) -> dict:
    """TensorRT calibration cache -> (header, {tensor: float32 scale})."""
    with open(path) as f:
        lines = f.read().splitlines()
    scales = {}
    for line in lines[1:]:
        m = re.fullmatch(r"(.+): ([0-9a-f]{8})", line)
        assert m, f"calib.cache line {line!r} is not '<tensor>: <8 hex digits>'"
        scales[m.group(1)] = struct.unpack(">f", bytes.fromhex(m.group(2)))[0]
    return lines[0], scales


@pytest.fixture(scope="module")
def quickstart_run(sparq, tmp_path_factory):
    """The quickstart recipe run once: (process, output folder)."""
    tmp = tmp_path_factory.mktemp("quickstart")
    out_dir = str(tmp / "out")
    proc = sparq.run("run", quickstart_copy(tmp, out_dir))
    return proc, out_dir


def test_quickstart_passes(quickstart_run):
    proc, out_dir = quickstart_run
    assert proc.returncode == EXIT_PASSED, f"sparq run exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    for name in OUTPUT_FILES:
        assert os.path.isfile(os.path.join(out_dir, name)), f"sparq run did not write {name}"


def test_quickstart_report_json(quickstart_run):
    _, out_dir = quickstart_run
    with open(os.path.join(out_dir, "report.json")) as f:
        report = json.load(f)
    gate = report["gate"]
    assert gate["passed"] is True
    # JSON gives percent metrics as fractions: the recipe's 0.5 points is 0.005.
    assert gate["metric"] == "top1" and gate["max_drop"] == pytest.approx(0.005)
    assert gate["drop"] <= 0.005
    assert gate["fp32"] >= 0.95 and gate["drop"] == pytest.approx(gate["fp32"] - gate["output"])
    assert report["agreement"]["samples"] == 512
    assert report["output_model"] == os.path.join(out_dir, "digits_cnn.sparq.onnx")
    assert all(layer["precision"] == "int8" for layer in report["layers"]), report["layers"]
    listed = {os.path.basename(p) for p in report["files"]}
    assert listed == set(OUTPUT_FILES), \
        f"report.json 'files' should list every file the run writes (as its terminal output does): " \
        f"missing {sorted(set(OUTPUT_FILES) - listed)}"


def test_quickstart_scales_and_trt_cache(quickstart_run):
    _, out_dir = quickstart_run
    with open(os.path.join(out_dir, "scales.json")) as f:
        table = json.load(f)
    assert table["format"] == "sparq-calibration" and table["method"] == "kl" and table["samples"] == 256
    header, cache = decode_trt_cache(os.path.join(out_dir, "calib.cache"))
    assert header == "TRT-8601-EntropyCalibration2"
    assert set(cache) == set(table["tensors"]), "calib.cache and scales.json list different tensors"
    for name, scale in cache.items():
        t = table["tensors"][name]
        assert 0.0 < t["threshold"] <= t["abs_max"] * (1 + 1e-6), name
        assert scale == pytest.approx(t["threshold"] / 127.0, rel=1e-6), \
            f"{name}: calib.cache scale {scale} is not threshold / 127 = {t['threshold'] / 127.0}"
        assert scale == pytest.approx(t["scale"], rel=1e-6), name


def test_quickstart_junit_and_markdown(quickstart_run):
    _, out_dir = quickstart_run
    cases, failures = read_junit(os.path.join(out_dir, "junit.xml"))
    assert len(cases) == 1 and failures == []
    root = ET.parse(os.path.join(out_dir, "junit.xml")).getroot()
    assert root.get("tests") == "1" and root.get("failures") == "0"
    with open(os.path.join(out_dir, "report.md")) as f:
        assert "passed" in f.read().splitlines()[0]


# A recipe the INT8 model cannot pass: clipping every activation at its
# median (percentile 50) with one weight scale per tensor wrecks the digits
# CNN (top-1 ~10%), and max_drop 0 allows no loss at all.
LOSSY = [("method: kl", "method: percentile\n    percentile: 50"),
         ("  precision: int8\n", "  precision: int8\n  per_channel: false\n"),
         ("max_drop: 0.5", "max_drop: 0")]


@pytest.mark.parametrize("fallback", ["off", "one_layer"])
def test_failed_gate_exits_1(sparq, tmp_path, fallback):
    """Without fallback, or with fallback allowed one layer (not enough): exit 1,
    a JUnit failure, and the reports still written."""
    edits = LOSSY + [("  calibration:\n    method", "  fallback:\n    enabled: " +
                      ("false" if fallback == "off" else "true\n    max_layers: 1") +
                      "\n  calibration:\n    method")]
    out_dir = str(tmp_path / "out")
    proc = sparq.run("run", quickstart_copy(tmp_path, out_dir, edits))
    assert proc.returncode == EXIT_GATE_FAILED, f"sparq run exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    cases, failures = read_junit(os.path.join(out_dir, "junit.xml"))
    assert len(cases) == 1 and len(failures) == 1
    assert "gate" in failures[0].get("message", "")
    with open(os.path.join(out_dir, "report.json")) as f:
        report = json.load(f)
    assert report["gate"]["passed"] is False and report["gate"]["drop"] > 0.10
    assert len(report["fallback"]) == (0 if fallback == "off" else 1)
    # A failed model never sits at output.model looking like a result.
    assert not os.path.exists(os.path.join(out_dir, "digits_cnn.sparq.onnx"))
    failed = os.path.join(out_dir, "digits_cnn.sparq.FAILED.onnx")
    assert os.path.isfile(failed) and report["output_model"] == failed
    assert failed in report["files"]


def test_failed_gate_discard_writes_no_model(sparq, tmp_path):
    edits = LOSSY[:2] + [("max_drop: 0.5", "failed_model: discard\n    max_drop: 0"),
                         ("  calibration:\n    method", "  fallback:\n    enabled: false\n  calibration:\n    method")]
    out_dir = str(tmp_path / "out")
    proc = sparq.run("run", quickstart_copy(tmp_path, out_dir, edits))
    assert proc.returncode == EXIT_GATE_FAILED, f"sparq run exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    assert not any(name.endswith(".onnx") for name in os.listdir(out_dir)), os.listdir(out_dir)
    assert "top1" in proc.stdout and "max_drop" in proc.stdout, proc.stdout


@pytest.mark.parametrize("edits,expected", [
    ([("  precision: int8\n", "  precision: int8\n  calibraton: {}\n")],
     ["quantize.calibraton: unknown key", "did you mean 'calibration'"]),
    ([("max_drop: 0.5", "max_drop: -1")], ["evaluate.gate.max_drop", "out of range"]),
    ([("method: kl", "method: entropy2")], ["quantize.calibration.method"]),
    ([("format: qdq", "format: int4")], ["output.format"]),
    ([("digits/eval_labels.npy", "digits/no_such_labels.npy")], ["data.labels", "no_such_labels.npy"]),
    ([("max_drop: 0.5", 'max_drop: "0.5"')], ["evaluate.gate.max_drop"]),
    # Several problems are reported together, each with its line.
    ([("max_drop: 0.5", "max_drop: -1"), ("format: qdq", "format: int4")],
     [":" + "LINE" + ": evaluate.gate.max_drop", "output.format"]),
], ids=["unknown_key", "out_of_range", "bad_enum", "bad_format", "missing_file", "string_for_number", "several"])
def test_recipe_errors_exit_2(sparq, tmp_path, edits, expected):
    out_dir = str(tmp_path / "out")
    recipe = quickstart_copy(tmp_path, out_dir, edits)
    proc = sparq.run("run", recipe)
    assert proc.returncode == EXIT_ERROR, f"sparq run exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    for text in expected:
        if "LINE" in text:
            with open(recipe) as f:
                line = next(i for i, l in enumerate(f, 1) if "max_drop" in l)
            text = text.replace("LINE", str(line))
        assert text in proc.stderr, f"stderr should contain {text!r}:\n{proc.stderr}"
    assert not os.path.exists(out_dir), "a recipe error must not create the output folder"


def test_second_run_without_overwrite_exits_2(sparq, tmp_path):
    out_dir = str(tmp_path / "out")
    recipe = quickstart_copy(tmp_path, out_dir, [("overwrite: true", "overwrite: false")])
    first = sparq.run("run", recipe)
    assert first.returncode == EXIT_PASSED, first.stdout + first.stderr
    before = {n: os.stat(os.path.join(out_dir, n)).st_mtime_ns for n in OUTPUT_FILES}
    second = sparq.run("run", recipe)
    assert second.returncode == EXIT_ERROR, f"second run exited {second.returncode}:\n{second.stdout}{second.stderr}"
    assert "output.overwrite" in second.stderr
    for name in OUTPUT_FILES:
        assert os.path.join(out_dir, name) in second.stderr, f"the error should name the existing {name}"
        assert os.stat(os.path.join(out_dir, name)).st_mtime_ns == before[name], f"{name} was rewritten"
