"""bench/accuracy_suite.py writes its fallback variants' recipes with each
task's gate (FALLBACK_GATES): a drop for classifiers and recognizers, a
floor for the detector (sqnr has no FP32 value to drop from)."""
import os
import sys

import numpy as np
import pytest

yaml = pytest.importorskip("yaml")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import accuracy_suite as S  # noqa: E402

PATHS = {"calib": "/d/calib.npz", "eval": "/d/eval.npz", "eval_small": "/d/eval_small.npz"}


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


@pytest.mark.parametrize("prune,structure,sparsity,allocation", [("2:4o", "2:4", None, None),
                                                                 ("uniform50o", "unstructured", 0.5, "uniform"),
                                                                 ("auto50o", "unstructured", 0.5, "auto")])
def test_obs_variant_recipes_ask_for_recovery_method_obs(prune, structure, sparsity, allocation):
    r = yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", "percentile", prune, "agreement"))
    p = r["prune"]
    assert p["recovery"] and p["recovery_method"] == "obs" and p["structure"] == structure
    assert p.get("sparsity") == sparsity and p.get("allocation") == allocation
    plain = yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", "percentile", prune[:-1], "agreement"))["prune"]
    assert "recovery_method" not in plain


@pytest.mark.parametrize("prune,structure", [("2:4d", "2:4"), ("uniform50d", "unstructured")])
def test_distilled_variant_recipes_run_retrain_distill_with_the_dense_teacher(prune, structure, monkeypatch):
    monkeypatch.setitem(S.DISTILL, "steps", 4)
    monkeypatch.setitem(S.DISTILL, "args", ["--iterations", "20"])
    monkeypatch.setitem(S.DISTILL, "data", "/suite/<model>/calib.npz")
    r = yaml.safe_load(S.sparq_recipe("/suite/m1/model.onnx", PATHS, "/out", "percentile", prune, "agreement"))
    p = r["prune"]
    assert p["structure"] == structure and p["schedule"] == "linear" and p["steps"] == 4 and p["recovery"]
    cmd = p["retrain"]["command"]
    assert cmd[1].endswith(os.path.join("tools", "retrain_distill.py"))
    assert cmd[cmd.index("--teacher") + 1] == "/suite/m1/model.onnx"
    for placeholder in ("{model_in}", "{masks}", "{model_out}", "{data}", "{step}"):
        assert placeholder in cmd
    assert cmd[-2:] == ["--iterations", "20"]
    assert p["retrain"]["data"] == "/suite/m1/calib.npz"


def test_constants_are_pinned_in_every_recipe():
    sr = {"sr": [16000, "int64"]}
    for quant in ("max", "whole"):
        r = yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", quant, False, "sqnr", constants=sr))
        assert r["data"]["constants"] == {"sr": 16000}


@pytest.mark.parametrize("metric,written,gate", [("agreement", "agreement", None),
                                                 ("cosine", "mean_cosine", None),
                                                 ("sqnr", "sqnr", {"min_sqnr_db": 30})])
def test_whole_default_recipe_has_no_quantize_section(metric, written, gate):
    r = yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", "whole", False, metric))
    assert "quantize" not in r
    assert r["data"]["evaluation"] == PATHS["eval"]  # what a user gives: the gate reads the evaluation split
    assert r["evaluate"].get("gate") == gate and r["evaluate"]["metric"] == written


@pytest.mark.parametrize("quant", ["whole", "default", "max"])
def test_map_iou_recipes_carry_the_suites_threshold(quant):
    r = yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", quant, False, "map_iou", output="notes",
                                      map_threshold=0.3))
    assert r["evaluate"]["metric"] == "map_iou" and r["evaluate"]["threshold"] == 0.3
    assert r["evaluate"]["output"] == "notes"
    assert "threshold" not in yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", quant, False, "sqnr",
                                                            map_threshold=0.3))["evaluate"]


def test_dense_map_metric_option_picks_map_iou_for_dense_maps_only():
    class Args:
        dense_map_metric = "map_iou"
    assert S.sparq_metric_of(Args, {"task": "dense_map"}) == "map_iou"
    assert S.sparq_metric_of(Args, {"task": "classifier"}) == "agreement"
    Args.dense_map_metric = "sqnr"
    assert S.sparq_metric_of(Args, {"task": "dense_map"}) == "sqnr"


def test_ort_feed_moves_the_batch_axis_and_adds_constants():
    feeds = {"input": np.zeros((5, 576), np.float32), "state": np.arange(5 * 2 * 3, dtype=np.float32).reshape(5, 2, 3)}
    f = S.ort_feed(feeds, 1, 4, {"batch_axis": {"state": 1}, "constants": {"sr": [16000, "int64"]}})
    assert f["input"].shape == (3, 576) and f["state"].shape == (2, 3, 3)
    np.testing.assert_array_equal(f["state"][:, 0], feeds["state"][1])
    assert f["sr"].shape == () and f["sr"].dtype == np.int64 and int(f["sr"]) == 16000


def test_int8_op_count_sees_a_float_file(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    def save(nodes, name):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                              [helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])])
        path = str(tmp_path / name)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
        return path

    float_file = save([helper.make_node("Relu", ["x"], ["y"])], "f.onnx")
    qdq_file = save([helper.make_node("QuantizeLinear", ["x", "s"], ["q"]),
                     helper.make_node("DequantizeLinear", ["q", "s"], ["y"])], "q.onnx")
    assert S.int8_op_count(float_file) == 0
    assert S.int8_op_count(qdq_file) == 1


def test_a_file_onnxruntime_crashes_on_is_found_without_crashing_the_run(tmp_path):
    """onnxruntime 1.32 segfaults at ORT_ENABLE_ALL on a float16 Transpose
    feeding a MatMul with a constant weight (what sparq's FP16 file of
    madmom_onsets holds); the probe runs in a child process and says so, and
    ORT_ENABLE_BASIC, which the suite then uses, loads the file."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
             helper.make_node("Transpose", ["xh"], ["xt"], perm=[1, 0, 2]),
             helper.make_node("MatMul", ["xt", "w"], ["z"]),
             helper.make_node("Cast", ["z"], ["y"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 2, 50])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones((50, 1), np.float16), "w")])
    path = str(tmp_path / "fp16_transpose_matmul.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert S.has_float16(path)
    if not S.ort_crashes_loading(path, "ORT_ENABLE_ALL"):
        pytest.skip("this onnxruntime loads the file (its float16 Transpose -> MatMul crash is fixed)")
    assert not S.ort_crashes_loading(path, "ORT_ENABLE_BASIC")


def test_prune_extra_lines_join_the_prune_block(monkeypatch):
    monkeypatch.setattr(S, "PRUNE_EXTRA", ["schedule: linear", " steps: 2", ""])
    p = yaml.safe_load(S.sparq_recipe("/m.onnx", PATHS, "/out", "max", "auto50o", "agreement"))["prune"]
    assert p["schedule"] == "linear" and p["steps"] == 2 and p["recovery_method"] == "obs"


def test_prune_eval_gives_pruned_variants_calibration_samples_to_evaluate_on(tmp_path, monkeypatch):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    np.savez(model_dir / "calib.npz", x=np.arange(10, dtype=np.float32).reshape(10, 1))
    np.savez(model_dir / "eval.npz", x=np.arange(10, 20, dtype=np.float32).reshape(10, 1))
    monkeypatch.setattr(S, "PRUNE_EVAL", {"samples": 4})
    paths, _, _ = S.write_splits(str(model_dir), str(tmp_path), 8, 6)
    with np.load(paths["prune_eval"]) as f:
        assert f["x"].ravel().tolist() == [0, 1, 2, 3]
    pruned = yaml.safe_load(S.sparq_recipe("/m.onnx", paths, "/out", "max", "auto50", "agreement"))
    dense = yaml.safe_load(S.sparq_recipe("/m.onnx", paths, "/out", "max", False, "agreement"))
    assert pruned["data"]["evaluation"] == paths["prune_eval"]
    assert dense["data"]["evaluation"] == paths["eval_small"]


def test_packed_sentences_fill_every_position_and_keep_the_originals():
    ids = np.zeros((3, 8), np.int64)
    ids[0, :4] = [101, 5, 6, 102]
    ids[1, :3] = [101, 7, 102]
    ids[2, :5] = [101, 8, 9, 10, 102]
    calib = {"input_ids": ids, "attention_mask": (ids != 0).astype(np.int64),
             "token_type_ids": np.zeros_like(ids)}
    out = S.augment_calibration(calib, "pack")
    assert out["input_ids"].shape == (6, 8)
    np.testing.assert_array_equal(out["input_ids"][:3], ids)
    np.testing.assert_array_equal(out["attention_mask"][:3], calib["attention_mask"])
    assert out["attention_mask"][3:].all() and not out["token_type_ids"].any()
    # sentence 1, then 2, then 0, ... cut at 8 tokens and closed by [SEP]
    assert out["input_ids"][4].tolist() == [101, 7, 102, 8, 9, 10, 102, 102]
    assert out["input_ids"][3].tolist() == [101, 5, 6, 102, 7, 102, 8, 102]


def test_flipped_images_are_added_mirrored():
    x = np.arange(2 * 3 * 2 * 4, dtype=np.float32).reshape(2, 3, 2, 4)
    out = S.augment_calibration({"input": x}, "flip")["input"]
    assert out.shape == (4, 3, 2, 4)
    np.testing.assert_array_equal(out[:2], x)
    np.testing.assert_array_equal(out[2:], x[..., ::-1])
    assert S.augment_calibration({"input": x}, "")["input"] is x


def test_rescore_models_scores_a_written_file_on_a_slice_of_the_split(tmp_path, capsys):
    import json
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import rescore_models as R
    w = np.random.default_rng(0).standard_normal((4, 10)).astype(np.float32)
    def write(path, weight):
        g = helper.make_graph([helper.make_node("MatMul", ["input", "w"], ["logits"])], "g",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(weight, "w")])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    d = tmp_path / "toy"
    d.mkdir()
    write(str(d / "model.onnx"), w)
    write(str(tmp_path / "same.onnx"), w)
    write(str(tmp_path / "other.onnx"), -w)
    (d / "meta.json").write_text(json.dumps({"task": "classifier", "output": "logits"}))
    np.savez(d / "eval.npz", input=np.random.default_rng(1).standard_normal((12, 4)).astype(np.float32))
    r = R.rescore(str(tmp_path), "toy", 4, 12, [str(tmp_path / "same.onnx"), str(tmp_path / "other.onnx")])
    assert r[str(tmp_path / "same.onnx")]["top-1 agreement %"] == 100.0
    assert r[str(tmp_path / "other.onnx")]["top-1 agreement %"] < 100.0
    assert R.main(["--suite", str(tmp_path), "toy", "0", "3", str(tmp_path / "same.onnx")]) == 0
    assert '"top-1 agreement %": 100.0' in capsys.readouterr().out
    with pytest.raises(ValueError):
        R.rescore(str(tmp_path), "toy", 12, 20, [str(tmp_path / "same.onnx")])


def test_calib_file_replaces_the_calibration_split_and_lifts_sparqs_cap(tmp_path):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    np.savez(model_dir / "calib.npz", x=np.zeros((10, 1), np.float32))
    np.savez(model_dir / "eval.npz", x=np.ones((10, 1), np.float32))
    big = tmp_path / "big.npz"
    np.savez(big, x=np.arange(600, dtype=np.float32).reshape(600, 1))
    paths, calib, evals = S.write_splits(str(model_dir), str(tmp_path), 600, 6, calib_file=str(big))
    assert calib["x"].shape == (600, 1) and calib["x"][599, 0] == 599 and evals["x"].all()
    data = yaml.safe_load(S.sparq_recipe("/m.onnx", paths, "/out", "max", "uniform50o", "cosine"))["data"]
    assert data["calibration_samples"] == 0  # more than sparq's default 512: all of them
    paths, calib, _ = S.write_splits(str(model_dir), str(tmp_path), 8, 6)
    assert not calib["x"].any()
    assert "calibration_samples" not in yaml.safe_load(S.sparq_recipe("/m.onnx", paths, "/out", "max", False,
                                                                      "cosine"))["data"]
