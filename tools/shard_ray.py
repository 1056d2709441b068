#!/usr/bin/env python3
"""Fan sparq's sharded calibration (or evaluation) out and merge the parts.

Each shard is one `sparq calibrate ... --shard i/n -o part-i.hist` (or
`sparq eval ... --shard i/n --json`) run as a Ray task; the driver then runs
`sparq calibrate --merge` (or `sparq eval --merge`). The merged table is byte
for byte the table of one `sparq calibrate` over all the data (docs/scale.md).

Ray is optional: without it (or with --local) the shards run as local
processes (concurrent.futures), the same commands and the same result.

  python tools/shard_ray.py calibrate --sparq build/bin/sparq --shards 8 \\
      --work parts/ -o scales.json -- model.onnx --data calib.npz --method kl
  python tools/shard_ray.py eval --sparq build/bin/sparq --shards 4 \\
      --work parts/ -o report.json -- int8.onnx --inputs val.npz --reference fp32.onnx
  # on a cluster: ray start --head ...; RAY_ADDRESS=auto python tools/shard_ray.py ...

Every worker must see the same sparq binary, model and data paths (a shared
file system), and the parts folder.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys


def shard_command(kind, sparq, args, shard, shards, work):
    """The command of one shard and the file it writes."""
    if kind == "calibrate":
        part = os.path.join(work, f"part-{shard}.hist")
        return [sparq, "calibrate", *args, "--shard", f"{shard}/{shards}", "-o", part], part, False
    part = os.path.join(work, f"part-{shard}.json")
    return [sparq, "eval", *args, "--shard", f"{shard}/{shards}", "--json"], part, True


def run_shard(command, part, stdout_to_part):
    """Runs one shard; returns (exit code, stderr). eval's JSON goes to `part`."""
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode == 0 and stdout_to_part:
        with open(part, "w") as f:
            f.write(proc.stdout)
    return proc.returncode, proc.stderr


def run_all(commands, use_ray, workers):
    """Runs every (command, part, stdout_to_part); returns their results in order."""
    if use_ray:
        import ray

        # Workers import this file by module name to run run_shard: put its
        # folder on their path (a cluster's workers need the file there too).
        here = os.path.dirname(os.path.abspath(__file__))
        ray.init(address=os.environ.get("RAY_ADDRESS"), ignore_reinit_error=True, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": here}})
        task = ray.remote(num_cpus=1)(run_shard)
        return ray.get([task.remote(*c) for c in commands])
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_shard, *zip(*commands)))


def have_ray():
    try:
        import ray  # noqa: F401
        return True
    except ImportError:
        return False


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                usage="%(prog)s {calibrate,eval} [options] -- MODEL SPARQ_OPTIONS...")
    p.add_argument("kind", choices=["calibrate", "eval"])
    p.add_argument("--sparq", default="sparq", help="the sparq binary every worker runs")
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--work", required=True, help="folder for the parts (shared by the workers)")
    p.add_argument("-o", "--output", required=True, help="calibrate: the table; eval: the merged JSON report")
    p.add_argument("--trt-cache", help="calibrate: also write the TensorRT cache at the merge")
    p.add_argument("--local", action="store_true", help="local processes even when Ray is installed")
    p.add_argument("--workers", type=int, default=os.cpu_count(), help="local processes at once")
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after "--" is the model and sparq's own options, passed as written.
    split = argv.index("--") if "--" in argv else len(argv)
    a = p.parse_args(argv[:split])
    args = argv[split + 1:]
    if not args:
        p.error("give the model and sparq's options after --")
    if a.shards < 1:
        p.error("--shards must be >= 1")
    os.makedirs(a.work, exist_ok=True)
    use_ray = not a.local and have_ray()
    commands = [shard_command(a.kind, a.sparq, args, i, a.shards, a.work) for i in range(a.shards)]
    print(f"{a.shards} shards on {'ray' if use_ray else 'local processes'}", file=sys.stderr)
    failed = False
    for i, (code, err) in enumerate(run_all(commands, use_ray, a.workers)):
        if code != 0:
            failed = True
            print(f"shard {i}/{a.shards} failed (exit {code}): {err.strip()}", file=sys.stderr)
    if failed:
        return 2
    parts = [c[1] for c in commands]
    if a.kind == "calibrate":
        merge = [a.sparq, "calibrate", "--merge", *parts, "-o", a.output]
        if a.trt_cache:
            merge += ["--trt-cache", a.trt_cache]
        proc = subprocess.run(merge, capture_output=True, text=True)
    else:
        proc = subprocess.run([a.sparq, "eval", "--merge", *parts, "--json"], capture_output=True, text=True)
        if proc.returncode == 0:
            with open(a.output, "w") as f:
                f.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    if a.kind == "calibrate":
        sys.stdout.write(proc.stdout)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
