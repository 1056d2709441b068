"""Every JSON sparq prints or writes (report.json, `run/eval/inspect/compare/quantize --json`,
errors with --json) follows docs/sparq-json.schema.json and carries
schema_version and the sparq version; ratios are fractions everywhere."""
import json
import os

import jsonschema
import pytest

from conftest import SOURCE_DIR
from test_run_gate import quickstart_copy

SCHEMA_PATH = os.path.join(SOURCE_DIR, "docs", "sparq-json.schema.json")
DIGITS = os.path.join(SOURCE_DIR, "examples", "digits")


@pytest.fixture(scope="module")
def schema():
    with open(SCHEMA_PATH) as f:
        s = json.load(f)
    jsonschema.Draft202012Validator.check_schema(s)
    return s


def validate(schema, obj, kind):
    """Validates obj against the whole schema and against $defs/<kind>."""
    jsonschema.validate(obj, schema, cls=jsonschema.Draft202012Validator)
    jsonschema.validate(obj, {**schema, "oneOf": [{"$ref": "#/$defs/" + kind}]}, cls=jsonschema.Draft202012Validator)


def version_of(sparq):
    out = sparq.run("--version").stdout.strip()
    assert out.startswith("sparq "), out
    return out.split()[1]


def test_inspect_and_eval_json(sparq, schema):
    version = version_of(sparq)
    model = os.path.join(DIGITS, "digits_cnn.onnx")
    inspect = sparq.run("inspect", model, "--json")
    assert inspect.returncode == 0, inspect.stderr
    j = json.loads(inspect.stdout)
    validate(schema, j, "inspect_report")
    assert j["schema_version"] == 2 and j["sparq_version"] == version

    ev = sparq.run("eval", model, "--inputs", os.path.join(DIGITS, "eval.npz"), "--labels",
                   os.path.join(DIGITS, "eval_labels.npy"), "--reference", model, "--json")
    assert ev.returncode == 0, ev.stderr
    j = json.loads(ev.stdout)
    validate(schema, j, "eval_report")
    assert j["sparq_version"] == version
    lat = j["latency"]
    assert lat["warmup_batches"] == 1 and lat["timed_batches"] == j["batches"] - 1
    assert 0 <= lat["p50_seconds"] <= lat["p90_seconds"] <= lat["p99_seconds"] <= lat["max_seconds"]

    # --map-threshold adds reference.map (the thresholded-map IoU; metric map_iou).
    ev = sparq.run("eval", model, "--inputs", os.path.join(DIGITS, "eval.npz"), "--limit", "16", "--reference", model,
                   "--map-threshold", "0.5", "--json")
    assert ev.returncode == 0, ev.stderr
    j = json.loads(ev.stdout)
    validate(schema, j, "eval_report")
    assert j["reference"]["map"]["threshold"] == 0.5 and j["reference"]["map"]["map_iou"] == 1.0


def test_eval_chrome_trace(sparq, schema, tmp_path):
    """--trace writes the Chrome trace format: one complete event per node run."""
    model = os.path.join(DIGITS, "digits_cnn.onnx")
    trace = str(tmp_path / "trace.json")
    ev = sparq.run("eval", model, "--inputs", os.path.join(DIGITS, "eval.npz"), "--limit", "8", "--batch", "4",
                   "--trace", trace, "--verbose", "--json")
    assert ev.returncode == 0, ev.stderr
    j = json.loads(ev.stdout)
    validate(schema, j, "eval_report")
    assert j["trace"] == trace
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    kernels = {k["node"]: (k["op"], k["kernel"]) for k in j["kernels"]}
    assert len(events) == len(kernels) * j["batches"]
    for e in events:
        assert (e["cat"], e["args"]["kernel"]) == kernels[e["name"]]
        assert e["dur"] >= 0 and e["ts"] >= 0
    starts = [e["ts"] for e in events]
    assert starts == sorted(starts)


def test_compare_json(sparq, schema):
    model = os.path.join(DIGITS, "digits_cnn.onnx")
    proc = sparq.run("compare", model, model, "--inputs", os.path.join(DIGITS, "eval.npz"), "--limit", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    j = json.loads(proc.stdout)
    validate(schema, j, "compare_report")
    assert j["tensors"] and all(t["identical"] and t["sqnr_db"] is None for t in j["tensors"])
    assert j["sparq_version"] == version_of(sparq)


def test_run_report_json(sparq, schema, tmp_path):
    out_dir = str(tmp_path / "out")
    proc = sparq.run("run", quickstart_copy(tmp_path, out_dir), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = json.loads(proc.stdout)
    validate(schema, printed, "run_report")
    with open(os.path.join(out_dir, "report.json")) as f:
        written = json.load(f)
    validate(schema, written, "run_report")
    assert written["schema_version"] == 2 and written["backend"] == "cpu"
    assert [c["limit_key"] for c in written["gate"]["checks"]] == ["max_drop"]
    # One unit convention: the same ratio is the same number in report.json
    # and in `eval --json` (fractions), where the recipe wrote percent.
    assert 0.9 <= written["gate"]["fp32"] <= 1.0 and written["gate"]["max_drop"] == pytest.approx(0.005)
    ev = sparq.run("eval", os.path.join(DIGITS, "digits_cnn.onnx"), "--inputs", os.path.join(DIGITS, "eval.npz"),
                   "--labels", os.path.join(DIGITS, "eval_labels.npy"), "--json")
    assert ev.returncode == 0, ev.stderr
    assert json.loads(ev.stdout)["accuracy"]["top1"] == pytest.approx(written["gate"]["fp32"], abs=1e-9)

    # Calibrate once, quantize again: `sparq quantize --json`.
    model = str(tmp_path / "again.onnx")
    q = sparq.run("quantize", os.path.join(DIGITS, "digits_cnn.onnx"), "--scales", os.path.join(out_dir, "scales.json"),
                  "-o", model, "--json")
    assert q.returncode == 0, q.stdout + q.stderr
    j = json.loads(q.stdout)
    validate(schema, j, "quantize_report")
    assert j["output"] == model and j["layers"] and all(l["precision"] == "int8" for l in j["layers"])


@pytest.mark.parametrize("args", [
    ["inspect", "/no/such/model.onnx", "--json"],
    ["eval", "/no/such/model.onnx", "--inputs", "x.npz", "--json"],
    ["run", "/no/such/recipe.yaml", "--json"],
    ["compare", "/no/such/a.onnx", "/no/such/b.onnx", "--inputs", "x.npz", "--json"],
    ["inspect", "--no-such-flag", "--json"],
    ["quantize", "/no/such/model.onnx", "--scales", "s.json", "-o", "o.onnx", "--json"],
], ids=["inspect", "eval", "run", "compare", "bad_flag", "quantize"])
def test_errors_are_json_on_stdout_with_json(sparq, schema, args):
    proc = sparq.run(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    j = json.loads(proc.stdout)
    validate(schema, j, "error")
    assert j["error"]["message"] and j["error"]["message"] in proc.stderr
