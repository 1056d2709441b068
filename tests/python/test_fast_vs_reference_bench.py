"""bench/fast_vs_reference_nodes.py on the digits model, the model CI has:
two `sparq eval --trace` runs per round (fast rows, and --reference-kernels
--fused-graph), compared node by node. With --check the verdict is checked:
no node of the fast rows slower than the reference beyond the script's noise
rule (under 5 us or 1.10x apart), after its confirming rounds. bench/RESULTS.md
has its numbers on the real models.
"""
import importlib.util
import os
import subprocess
import sys

from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "bench", "fast_vs_reference_nodes.py")
DIGITS = os.path.join(SOURCE_DIR, "examples", "digits")


def run(sparq, *extra):
    return subprocess.run([sys.executable, SCRIPT, "--sparq", sparq, "--model",
                           os.path.join(DIGITS, "digits_cnn.onnx"), "--inputs", os.path.join(DIGITS, "calib.npz"),
                           *extra], capture_output=True, text=True, timeout=300)


def test_digits_no_fast_row_slower_than_the_reference(sparq_eval):
    proc = run(sparq_eval.path, "--samples", "5", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    summary = [l for l in lines if l.startswith("| digits_cnn.onnx |")]
    assert summary, proc.stdout
    # The digits CNN's Convs and Gemm have fast rows: they are compared.
    compared = int(summary[0].split("|")[2])
    assert compared >= 2, proc.stdout
    assert int(summary[0].split("|")[6]) == 0, proc.stdout  # beyond the noise
    assert "| model | node | op | fast kernel |" in proc.stdout


def load_script():
    spec = importlib.util.spec_from_file_location("fast_vs_reference_nodes", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_noise_rule_and_the_verdict():
    bench = load_script()
    fast = {"a": ("Add", "binary_f32_avx512", 20.0),   # 2x and 10 us slower: beyond the noise
            "b": ("Cast", "cast_to_f32", 3.0),          # 3x but 2 us: noise
            "c": ("Mul", "binary_f32_avx512", 105.0),   # 1.05x: noise
            "d": ("Conv", "gemm_f32_avx512", 50.0),     # faster
            "e": ("Shape", "ref", 9.0)}                 # no fast row: not compared
    ref = {"a": ("Add", "ref", 10.0), "b": ("Cast", "ref", 1.0), "c": ("Mul", "ref", 100.0),
           "d": ("Conv", "ref", 900.0), "e": ("Shape", "ref", 1.0)}
    compared, fast_total, ref_total, rows = bench.compare("m", fast, ref, 5.0, 1.10)
    assert compared == 4
    assert fast_total == 178.0 and ref_total == 1011.0
    assert {r[1]: r[7] for r in rows} == {"a": False, "b": True, "c": True}
    assert bench.exit_status(rows, False, True, False) == 1
    assert bench.exit_status(rows, False, False, False) == 0  # without --check: a listing
    noise_only = [r for r in rows if r[7]]
    assert bench.exit_status(noise_only, False, True, False) == 0
    assert bench.exit_status([], True, True, False) == 1  # a model that did not run
    merged = {}
    bench.merge_min(merged, {"a": ("Add", "k", 20.0)})
    bench.merge_min(merged, {"a": ("Add", "k", 12.0), "b": ("Mul", "k", 1.0)})
    bench.merge_min(merged, {"a": ("Add", "k", 30.0)})
    assert merged == {"a": ("Add", "k", 12.0), "b": ("Mul", "k", 1.0)}
