"""bench/memory_plan.py --allocs (bench/alloc_count.c, an LD_PRELOAD shim
counting heap allocations) runs on the digits model laid out as a one-model
suite and prints its table: the plumbing, not the numbers (bench/RESULTS.md
"Memory plan (issue 22)" has those for the real models).
"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "bench", "memory_plan.py")
DIGITS = os.path.join(SOURCE_DIR, "examples", "digits")


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) to build the shim")
def test_digits_alloc_counts(sparq_eval, tmp_path):
    model_dir = tmp_path / "digits"
    model_dir.mkdir()
    shutil.copy(os.path.join(DIGITS, "digits_cnn.onnx"), model_dir / "model.onnx")
    shutil.copy(os.path.join(DIGITS, "eval.npz"), model_dir / "eval.npz")
    proc = subprocess.run([sys.executable, SCRIPT, "--sparq", sparq_eval.path, "--suite", str(tmp_path), "--models",
                           "digits", "--batches", "1", "--limit", "4", "--allocs"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [l for l in proc.stdout.splitlines() if l.startswith("| digits | 1 |")]
    assert rows, proc.stdout
    cells = [c.strip() for c in rows[0].split("|")]
    assert cells[3] == "4", proc.stdout  # batches at --limit 4
    off, on = (int(x) for x in cells[4].split(" -> "))
    assert off > 0 and on > 0, proc.stdout  # the shim counted
