"""Fault-tolerance figures on a standalone cluster of two TaskManagers (started and stopped here).

    python -m benchmarks.recovery kill --staleness 0 --staleness none     # a TaskManager killed mid-training
    python -m benchmarks.recovery cost --workload dense --workload sparse  # what a checkpoint costs

``kill``: the quickstart job, 2 replicas, paced, checkpoints every ``--checkpoint-interval`` s;
once a checkpoint completed and both replicas trained ``--kill-after`` steps, one TaskManager and
its Python workers get SIGKILL and replacements start (``cluster.ensure_taskmanagers``). The same
job runs undisturbed beside it. Printed per run: restores, batches trained by the final state,
batches trained again, recovery time (the kill to the first batch trained after the restore),
final loss against the undisturbed run, and for ``--staleness 0`` whether the replicas are
bit-identical.

``cost``: the benchmark's workloads (``dense``: the CIFAR-10 CNN; ``sparse``: word2vec with two
50,000 x 300 tables) trained by 2 replicas with checkpoints; Flink's own checkpoint statistics
(state size, duration) and the batches per second against the same run without checkpoints.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICKSTART = os.path.join(ROOT, "jobs", "quickstart.py")
PROBE_JOB = os.path.join(ROOT, "benchmarks", "throughput", "probe_job.py")


def _min_model_version(url, job_id):
    from pyflink_tensair import cluster

    job = cluster.rest_get(f"{url}/jobs/{job_id}")
    vertex = next(v for v in job["vertices"] if ": replicas" in v["name"])
    base = f"{url}/jobs/{job_id}/vertices/{vertex['id']}/subtasks/metrics"
    wanted = [m["id"] for m in cluster.rest_get(base) if m["id"].endswith("tensair.model_version")]
    if not wanted:
        return 0
    return int(float(cluster.rest_get(base + "?get=" + ",".join(wanted))[0].get("min", 0)))


def _checkpoints(url, job_id):
    from pyflink_tensair import cluster

    stats = cluster.rest_get(f"{url}/jobs/{job_id}/checkpoints")
    summary = stats.get("summary", {})
    return {"completed": stats["counts"]["completed"], "failed": stats["counts"]["failed"],
            "state_mb": {k: round(v / 1e6, 2) for k, v in summary.get("checkpointed_size", summary.get("state_size", {})).items()
                         if k in ("min", "max", "avg")},
            "duration_s": {k: round(v / 1e3, 3) for k, v in summary.get("end_to_end_duration", {}).items()
                           if k in ("min", "max", "avg")}}


def _submit(folder, args, kill=None):
    """Runs a job; with ``kill=steps`` kills a TaskManager once a checkpoint completed
    and every replica reached ``steps`` model versions. Returns (result, job id, kill time)."""
    from pyflink_tensair import cluster

    url = cluster.rest_url(folder)
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(result=cluster.submit(folder, args, timeout=1800)))
    runner.start()
    killed_at = None
    try:
        job_id = cluster.running_job(folder)
        if kill is not None:
            deadline = time.time() + 300
            while time.time() < deadline and (_checkpoints(url, job_id)["completed"] < 1 or _min_model_version(url, job_id) < kill):
                time.sleep(0.5)
            killed_at = time.time()
            print(f"  killing TaskManager: PIDs {cluster.kill_taskmanager(folder)}", flush=True)
            time.sleep(5)
            cluster.ensure_taskmanagers(folder, 2)
    finally:
        runner.join()
        cluster.ensure_taskmanagers(folder, 2)
    result = outcome["result"]
    if result.returncode != 0:
        raise RuntimeError(f"the job failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result, job_id, killed_at


def _metrics(outdir):
    from pyflink_tensair.core.events import Metrics

    return [Metrics.from_json(line) for path in glob.glob(os.path.join(outdir, "metrics-*.jsonl")) for line in open(path)]


def kill_run(folder, work, staleness, args) -> dict:
    from pyflink_tensair import cluster

    figures = {}
    for disturbed in (False, True):
        outdir = os.path.join(work, f"s{staleness}-{'kill' if disturbed else 'calm'}")
        summary_path = outdir + ".json"
        job_args = [QUICKSTART, "--replicas", "2", "--staleness-bound", staleness, "--batches", str(args.batches),
                    "--rate", str(args.rate), "--checkpoint-interval", str(args.checkpoint_interval),
                    "--summary", summary_path, "--outdir", outdir]
        _, job_id, killed_at = _submit(folder, job_args, args.kill_after if disturbed else None)
        summary = json.load(open(summary_path))
        run = {k: summary[k] for k in ("batches", "restores", "retrained_batches", "model_versions", "final_loss",
                                       "replica_max_weight_diff", "finished_replicas")}
        run["checkpoints"] = _checkpoints(cluster.rest_url(folder), job_id)
        if disturbed:
            records = _metrics(outdir)
            restored = [m for m in records if m.phase == "restored"]
            resumed = min(m.time for m in restored)
            after = [m.time for m in records if m.phase == "batch" and m.time > resumed]
            run["recovery_s"] = round(min(after) - killed_at, 2) if after else None
            run["restored_at_steps"] = sorted(m.local_step for m in restored)
        figures["killed" if disturbed else "undisturbed"] = run
    calm, hit = figures["undisturbed"]["final_loss"], figures["killed"]["final_loss"]
    figures["final_loss_ratio"] = round(hit / calm, 4) if calm else None
    return figures


def cost_run(folder, work, workload, args) -> dict:
    from pyflink_tensair import cluster

    figures = {}
    for interval in (0.0, args.checkpoint_interval):
        outdir = os.path.join(work, f"{workload}-{interval:g}")
        job_args = [PROBE_JOB, "--system", "dasgd", "--workload", workload, "--replicas", "2", "--batches",
                    str(args.cost_batches), "--checkpoint-interval", str(interval), "--outdir", outdir]
        _, job_id, _ = _submit(folder, job_args)
        batches = sorted(m.time for m in _metrics(outdir) if m.phase == "batch")
        rate = (len(batches) - 1) / (batches[-1] - batches[0]) if len(batches) > 1 else None
        run = {"batches_per_s": round(rate, 2) if rate else None}
        if interval:
            run["checkpoints"] = _checkpoints(cluster.rest_url(folder), job_id)
        figures[f"interval {interval:g} s"] = run
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recovery", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["kill", "cost"])
    parser.add_argument("--staleness", action="append", help="kill: staleness bounds to run (default: 0 and none)")
    parser.add_argument("--workload", action="append", help="cost: dense and/or sparse (default: both)")
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--kill-after", type=int, default=60, help="model versions every replica has before the kill")
    parser.add_argument("--checkpoint-interval", type=float, default=2.0)
    parser.add_argument("--cost-batches", type=int, default=200)
    parser.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "results", "recovery.jsonl"))
    args = parser.parse_args(argv)
    from pyflink_tensair import cluster

    sys.path.insert(0, ROOT)
    work = tempfile.mkdtemp(prefix="tensair-recovery-")
    folder = os.path.join(work, "cluster")
    cluster.start(folder, taskmanagers=2, slots=2, rest_port=18381, rpc_port=16423)
    try:
        runs = ([("kill", s, kill_run(folder, work, s, args)) for s in (args.staleness or ["0", "none"])]
                if args.what == "kill" else
                [("cost", w, cost_run(folder, work, w, args)) for w in (args.workload or ["dense", "sparse"])])
    finally:
        cluster.stop(folder)
    os.makedirs(os.path.dirname(args.results), exist_ok=True)
    with open(args.results, "a") as out:
        for what, name, figures in runs:
            record = {"what": what, "run": name, "time": time.strftime("%Y-%m-%d %H:%M:%S"), **figures}
            out.write(json.dumps(record) + "\n")
            print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
