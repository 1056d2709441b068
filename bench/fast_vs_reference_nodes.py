#!/usr/bin/env python3
"""Fast CPU rows against the reference kernels, node by node (issue 22: "no
fast row slower than the reference for the same node").

Per model, `sparq eval --trace` runs the deployment graph twice, 1 thread,
batch 1, on the same samples: on the fast CPU rows, and on the reference
kernels with `--reference-kernels --fused-graph` (the same fused graph,
kernels/ref alone). Per node the MINIMUM over the samples of each side's
time is compared (wall times on a shared machine: the minimum is the closest
to an uncontended run). Nodes that ran the same kernel in both runs (ops with
no fast row: the CPU backend runs the reference kernel) are left out. Every
node whose fast row took longer than the reference is listed; those within
the noise (under --noise-us microseconds apart, or under --noise-ratio) are
marked so. A model with nodes slower beyond the noise is measured --confirm
rounds more (both sides, alternating; the minimum over every round), so that
a moment when the shared machine was busy is not taken for a slow row.

  python3 bench/fast_vs_reference_nodes.py --sparq build/bin/sparq --suite /work/models/real [--models a,b]
      [--samples 5] [--rounds 1] [--confirm 2] [--check] [--no-memory-plan]
  python3 bench/fast_vs_reference_nodes.py --sparq build/bin/sparq --model M.onnx --inputs D.npz --samples 1

Prints Markdown: one summary row per model, then the slower nodes. With
--check the verdict is the exit status: 1 when a node is still slower than
the reference beyond the noise after the confirming rounds (or a model could
not run), 0 otherwise. tests/python/test_fast_vs_reference_bench.py runs it
with --check on the digits model, the model CI has; the real models' numbers
are in bench/RESULTS.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def trace_nodes(sparq, model, inputs, samples, constants, reference, extra=()):
    """{node: (op, kernel, min micros)} of one `sparq eval --trace` run."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        cmd = [sparq, "eval", model, "--inputs", inputs, "--batch", "1", "--threads", "1", "--limit", str(samples),
               "--warmup", "0", "--json", "--trace", trace]
        for name, value in constants.items():
            cmd += ["--constant", f"{name}={value}"]
        if reference:
            cmd += ["--reference-kernels", "--fused-graph"]
        cmd += list(extra)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip().splitlines()[-1][:200] if p.stderr.strip() else f"exit {p.returncode}")
        with open(trace) as f:
            events = json.load(f)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    nodes = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        name, kernel, dur = e["name"], e.get("args", {}).get("kernel", ""), float(e["dur"])
        if name in nodes:
            op, k, best = nodes[name]
            nodes[name] = (op, k, min(best, dur))
        else:
            nodes[name] = (e.get("cat", ""), kernel, dur)
    return nodes


def suite_constants(model_dir):
    """Inputs that the suite's meta.json pins (Silero VAD's sample rate)."""
    try:
        with open(os.path.join(model_dir, "meta.json")) as f:
            meta = json.load(f)
    except OSError:
        return {}
    out = {}
    for name, value in meta.get("constants", {}).items():
        v = value[0] if isinstance(value, list) else value
        out[name] = int(v) if float(v).is_integer() else v
    return out


def merge_min(into, nodes):
    """Keeps each node's minimum over the runs merged so far."""
    for node, (op, kernel, us) in nodes.items():
        if node in into:
            into[node] = (op, kernel, min(into[node][2], us))
        else:
            into[node] = (op, kernel, us)


def measure(sparq, model, inputs, samples, constants, rounds, fast, ref, extra=()):
    """Adds `rounds` runs of each side, alternating, to the minimums in fast / ref."""
    for _ in range(rounds):
        merge_min(fast, trace_nodes(sparq, model, inputs, samples, constants, False, extra))
        merge_min(ref, trace_nodes(sparq, model, inputs, samples, constants, True, extra))


def compare(name, fast, ref, noise_us, noise_ratio):
    """(nodes compared, fast total, reference total, slower rows) of two runs' minimums."""
    rows, compared = [], 0
    fast_total = ref_total = 0.0
    for node, (op, kernel, us) in fast.items():
        if node not in ref:
            continue
        ref_op, ref_kernel, ref_us = ref[node]
        if kernel == ref_kernel:
            continue  # no fast row: the same reference kernel both times
        compared += 1
        fast_total += us
        ref_total += ref_us
        if us > ref_us:
            noise = us - ref_us < noise_us or us < ref_us * noise_ratio
            rows.append((name, node, op, kernel, ref_kernel, us, ref_us, noise))
    return compared, fast_total, ref_total, rows


def exit_status(rows, failed, check, one_model):
    """The script's exit status: with --check, 1 when a row is slower beyond the noise or a model did not run."""
    if check and (failed or any(not r[7] for r in rows)):
        return 1
    return 1 if failed and one_model else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sparq", default="build/bin/sparq")
    ap.add_argument("--suite", default=os.environ.get("SPARQ_REAL_SUITE_DIR", "/work/models/real"),
                    help="folder of <model>/model.onnx + calib.npz (tools/make_real_suite.py)")
    ap.add_argument("--models", default="", help="comma separated names in --suite (default: all there)")
    ap.add_argument("--model", help="one model file instead of the suite (with --inputs)")
    ap.add_argument("--inputs", help="its data (.npz)")
    ap.add_argument("--samples", type=int, default=5, help="samples run one at a time per side (min taken)")
    ap.add_argument("--noise-us", type=float, default=5.0, help="slower by less than this: marked as noise")
    ap.add_argument("--no-memory-plan", action="store_true", help="both runs without the executor's memory plan")
    ap.add_argument("--noise-ratio", type=float, default=1.10, help="slower by less than this factor: noise")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each side, alternating (min over all)")
    ap.add_argument("--confirm", type=int, default=2,
                    help="a model with nodes slower beyond the noise is measured this many rounds more, both "
                         "sides, and only nodes still slower beyond it count (a busy machine's slow moment is "
                         "not a verdict)")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a node is slower than the reference beyond the noise after --confirm "
                         "(or a model could not run)")
    a = ap.parse_args()

    jobs = []
    if a.model:
        if not a.inputs:
            sys.exit("--model needs --inputs")
        jobs.append((os.path.basename(a.model), a.model, a.inputs, {}))
    else:
        names = a.models.split(",") if a.models else sorted(
            d for d in os.listdir(a.suite) if os.path.exists(os.path.join(a.suite, d, "model.onnx")))
        for n in names:
            d = os.path.join(a.suite, n)
            jobs.append((n, os.path.join(d, "model.onnx"), os.path.join(d, "calib.npz"), suite_constants(d)))

    slower, failed = [], False
    print("| model | nodes with a fast row | fast ms (those nodes) | reference ms | fast slower | beyond noise |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, model, inputs, constants in jobs:
        extra = ["--no-memory-plan"] if a.no_memory_plan else []
        fast, ref = {}, {}
        try:
            measure(a.sparq, model, inputs, a.samples, constants, a.rounds, fast, ref, extra)
            compared, fast_total, ref_total, rows = compare(name, fast, ref, a.noise_us, a.noise_ratio)
            if a.confirm > 0 and any(not r[7] for r in rows):
                measure(a.sparq, model, inputs, a.samples, constants, a.confirm, fast, ref, extra)
                compared, fast_total, ref_total, rows = compare(name, fast, ref, a.noise_us, a.noise_ratio)
        except RuntimeError as e:  # a model sparq cannot run: said, not fatal
            print(f"| {name} | skipped: {e} | | | | |", flush=True)
            failed = True
            continue
        slower += rows
        print(f"| {name} | {compared} | {fast_total / 1e3:.2f} | {ref_total / 1e3:.2f} | {len(rows)} | "
              f"{sum(1 for r in rows if not r[7])} |", flush=True)
    print()
    print("| model | node | op | fast kernel | reference kernel | fast us | reference us | fast / ref | |")
    print("|---|---|---|---|---|---:|---:|---:|---|")
    for name, node, op, kernel, ref_kernel, us, ref_us, noise in sorted(slower, key=lambda r: (r[7], -r[5] / max(r[6], 1e-9))):
        print(f"| {name} | {node} | {op} | {kernel} | {ref_kernel} | {us:.1f} | {ref_us:.1f} | "
              f"{us / max(ref_us, 1e-9):.2f} | {'noise' if noise else ''} |")
    if not slower:
        print("| (none) | | | | | | | | |")
    status = exit_status(slower, failed, a.check, bool(a.model))
    if status and a.check:
        beyond = sum(1 for r in slower if not r[7])
        print(f"fast_vs_reference_nodes: {beyond} node(s) slower than the reference beyond the noise"
              f"{', a model did not run' if failed else ''}", file=sys.stderr)
    sys.exit(status)


if __name__ == "__main__":
    main()
