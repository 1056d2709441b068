"""bench/accuracy_suite.py writes its fallback variants' recipes with each
task's gate (FALLBACK_GATES): a drop for classifiers and recognizers, a
floor for the detector (sqnr has no FP32 value to drop from)."""
import os
import sys

import pytest

yaml = pytest.importorskip("yaml")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import accuracy_suite as S  # noqa: E402

PATHS = {"calib": "/d/calib.npz", "eval_small": "/d/eval_small.npz"}


@pytest.mark.parametrize("task,metric,key,value", [("classifier", "agreement", "max_drop", 5),
                                                   ("ctc_recognizer", "ctc_accuracy", "max_drop", 5),
                                                   ("detector", "sqnr", "min_sqnr_db", 35)])
def test_fallback_variant_recipe_has_the_tasks_gate(task, metric, key, value):
    r = yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", "max", False, "sqnr", S.FALLBACK_GATES[task]))
    assert r["evaluate"] == {"metric": metric, "gate": {key: value}}
    assert r["quantize"]["fallback"] == {"enabled": True}
    assert r["data"]["evaluation"] == PATHS["calib"]  # gated on the calibration split


def test_plain_variant_recipe_has_no_gate_and_no_fallback():
    r = yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", "max", False, "sqnr"))
    assert r["evaluate"] == {"metric": "sqnr", "gate": {"max_drop": 1000000}}
    assert r["quantize"]["fallback"] == {"enabled": False}
    assert r["data"]["evaluation"] == PATHS["eval_small"]


@pytest.mark.parametrize("prune,structure,sparsity,allocation", [(True, "2:4", None, None),
                                                                 ("uniform50", "unstructured", 0.5, "uniform"),
                                                                 ("auto50", "unstructured", 0.5, "auto"),
                                                                 ("auto50r", "unstructured", 0.5, "auto")])
def test_pruned_variant_recipes(prune, structure, sparsity, allocation):
    r = yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", "percentile", prune, "agreement"))
    p = r["prune"]
    assert p["enabled"] and p["recovery"] and p["structure"] == structure
    assert p.get("sparsity") == sparsity and p.get("allocation") == allocation
    assert p.get("sensitivity") == ({"recovery": True} if str(prune).endswith("r") else None)
