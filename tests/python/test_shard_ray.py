"""tools/shard_ray.py: sharded calibration fanned out (Ray when installed, else
local processes) and merged gives the one-process table byte for byte."""
import os

import pytest

from conftest import SOURCE_DIR

DIGITS = os.path.join(SOURCE_DIR, "examples", "digits")


def load_driver():
    import shard_ray  # tools/ is on sys.path (conftest); imported by name so its tasks pickle
    return shard_ray


def one_process_table(sparq, tmp_path):
    out = tmp_path / "one.json"
    proc = sparq.run("calibrate", os.path.join(DIGITS, "digits_cnn.onnx"), "--data", os.path.join(DIGITS, "calib.npz"),
                     "--method", "kl", "--batch", "16", "--samples", "100", "--threads", "1", "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out.read_bytes()


def shard_args():
    return ["--", os.path.join(DIGITS, "digits_cnn.onnx"), "--data", os.path.join(DIGITS, "calib.npz"),
            "--method", "kl", "--batch", "16", "--samples", "100", "--threads", "1"]


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_sharded_table_is_the_one_process_table(sparq, tmp_path, backend):
    sparq.require_subcommand("calibrate")
    if not sparq.has_option("calibrate", "--shard"):
        pytest.skip("this sparq has no --shard")
    if backend == "ray":
        pytest.importorskip("ray")
        os.environ.setdefault("RAY_ADDRESS", "local")  # a local cluster for the test
    driver = load_driver()
    out = tmp_path / "merged.json"
    argv = ["calibrate", "--sparq", sparq.path, "--shards", "3", "--work", str(tmp_path / "parts"), "-o", str(out)]
    if backend == "local":
        argv.append("--local")
    assert driver.main(argv + shard_args()) == 0
    assert out.read_bytes() == one_process_table(sparq, tmp_path)
    if backend == "ray":
        import ray
        ray.shutdown()


def test_a_failing_shard_fails_the_run(sparq, tmp_path):
    sparq.require_subcommand("calibrate")
    if not sparq.has_option("calibrate", "--shard"):
        pytest.skip("this sparq has no --shard")
    driver = load_driver()
    argv = ["calibrate", "--sparq", sparq.path, "--shards", "2", "--work", str(tmp_path / "parts"),
            "-o", str(tmp_path / "out.json"), "--local", "--", os.path.join(DIGITS, "digits_cnn.onnx"),
            "--data", os.path.join(DIGITS, "calib.npz"), "--method", "auto"]
    assert driver.main(argv) == 2
    assert not (tmp_path / "out.json").exists()
