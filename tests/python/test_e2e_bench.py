"""bench/e2e_vs_ort.py runs end to end on the smallest case and prints its table.

tiny_encoder, FP32 and INT8 (the INT8 model made by `sparq run`), batch 1,
0.1 s per measurement, no --results: the script's plumbing, not a speed.
"""
import os
import subprocess
import sys

from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "bench", "e2e_vs_ort.py")


def run_bench(sparq_path, *args):
    return subprocess.run([sys.executable, SCRIPT, "--sparq", sparq_path, *args], capture_output=True, text=True,
                          timeout=120)


def test_tiny_encoder_fp32_int8_table(sparq_eval, models_dir, tmp_path):
    proc = run_bench(sparq_eval.path, "--work-dir", str(tmp_path), "--models-dir", models_dir,
                     "--models", "tiny_encoder", "--variants", "fp32,int8", "--batches", "1",
                     "--threads", "1", "--min-seconds", "0.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "## End to end vs onnxruntime" in out
    assert "| tiny_encoder | FP32 |" in out and "| tiny_encoder | INT8 |" in out, out
    assert "tiny_encoder: FP32 within 1.2x of onnxruntime" in out
    assert "tiny_encoder: INT8 no slower than onnxruntime" in out
    assert os.path.isfile(tmp_path / "models" / "tiny_encoder_int8" / "tiny_encoder.sparq.onnx")


def test_missing_sparq_is_a_clear_error(tmp_path):
    proc = run_bench(str(tmp_path / "no_sparq"), "--work-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "sparq binary not found" in proc.stderr
