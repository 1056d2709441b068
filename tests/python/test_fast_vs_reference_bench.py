"""bench/fast_vs_reference_nodes.py runs end to end on the digits model, one
sample per side, and prints its two tables: the script's plumbing (two
`sparq eval --trace` runs, fast rows and --reference-kernels --fused-graph,
compared node by node), not a speed. bench/RESULTS.md has its numbers on the
real models.
"""
import os
import subprocess
import sys

from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "bench", "fast_vs_reference_nodes.py")
DIGITS = os.path.join(SOURCE_DIR, "examples", "digits")


def test_digits_quick(sparq_eval):
    proc = subprocess.run([sys.executable, SCRIPT, "--sparq", sparq_eval.path, "--model",
                           os.path.join(DIGITS, "digits_cnn.onnx"), "--inputs", os.path.join(DIGITS, "calib.npz"),
                           "--samples", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    summary = [l for l in lines if l.startswith("| digits_cnn.onnx |")]
    assert summary, proc.stdout
    # The digits CNN's Convs and Gemm have fast rows: they are compared.
    compared = int(summary[0].split("|")[2])
    assert compared >= 2, proc.stdout
    assert "| model | node | op | fast kernel |" in proc.stdout
