"""Fault-tolerance figures on a standalone cluster of two TaskManagers (started and stopped here).

    python -m benchmarks.recovery kill --staleness 0 --staleness none     # a TaskManager killed mid-training
    python -m benchmarks.recovery cost --workload dense --workload sparse  # what a checkpoint costs
    python -m benchmarks.recovery savepoint --staleness 0 --staleness none  # stop with a savepoint, resume

``kill``: the quickstart job, 2 replicas, paced, checkpoints every ``--checkpoints-interval-s`` s;
once a checkpoint completed and both replicas trained ``--kill-after`` steps, one TaskManager and
its Python workers get SIGKILL and replacements start (``cluster.ensure_taskmanagers``). The same
job runs undisturbed beside it. Printed per run: restores, batches trained by the final state,
batches trained again, recovery time (the kill to the first batch trained after the restore),
final loss against the undisturbed run, and for ``--staleness 0`` whether the replicas are
bit-identical.

``savepoint``: the quickstart job undisturbed, and the same job stopped with a savepoint (not
drained) once both replicas have ``--kill-after`` model versions, then resumed from it: where
it stopped and resumed, every batch trained once across both runs, final model versions, loss
and (``--staleness 0``) the replicas' difference against the undisturbed run.

``cost``: the benchmark's workloads (``dense``: the CIFAR-10 CNN; ``sparse``: word2vec with two
50,000 x 300 tables) trained by 2 replicas with checkpoints; Flink's own checkpoint statistics
(state size, duration) and the batches per second against the same run without checkpoints.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import sys
import tempfile
import threading
import time

from benchmarks.jobrun import read_summary

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


_GAUGES = ("snapshot_bytes", "snapshot_written_bytes", "snapshot_ms", "checkpoint_pause_ms", "unacked_messages")


def _replica_gauges(url, job_id) -> list:
    """Each replica subtask's snapshot gauges now (``[{gauge: value}]``, one dict per subtask)."""
    from pyflink_tensair import cluster

    job = cluster.rest_get(f"{url}/jobs/{job_id}")
    vertex = next(v for v in job["vertices"] if ": replicas" in v["name"])
    out = []
    for sub in range(vertex["parallelism"]):
        base = f"{url}/jobs/{job_id}/vertices/{vertex['id']}/subtasks/{sub}/metrics"
        wanted = [m["id"] for m in cluster.rest_get(base) if m["id"].split(".")[-1] in _GAUGES]
        values = cluster.rest_get(base + "?get=" + ",".join(wanted)) if wanted else []
        out.append({m["id"].split(".")[-1]: int(float(m["value"])) for m in values})
    return out


class _SnapshotSampler(threading.Thread):
    """Polls the replicas' snapshot gauges while a job runs; keeps one sample per new snapshot."""

    def __init__(self, url, job_id):
        super().__init__(daemon=True)
        self.url, self.job_id, self.samples, self.unacked_max = url, job_id, [], 0
        self._done, self._seen = threading.Event(), set()

    def run(self):
        while not self._done.wait(1.0):
            try:
                gauges = _replica_gauges(self.url, self.job_id)
            except Exception:  # the job is restarting or over
                continue
            for sub, g in enumerate(gauges):
                self.unacked_max = max(self.unacked_max, g.get("unacked_messages", 0))
                key = (sub, g.get("snapshot_bytes"), g.get("checkpoint_pause_ms"), g.get("snapshot_ms"))
                if g.get("snapshot_bytes") and g.get("checkpoint_pause_ms") and key not in self._seen:
                    self._seen.add(key)
                    self.samples.append(g)

    def stop(self) -> dict:
        import statistics

        self._done.set()
        self.join()
        if not self.samples:
            return {"unacked_messages_max": self.unacked_max}
        column = lambda k: [s[k] for s in self.samples]  # noqa: E731
        return {"replica_snapshots_seen": len(self.samples),
                "replica_snapshot_mb_median": round(statistics.median(column("snapshot_bytes")) / 1e6, 1),
                "replica_written_mb_median": round(statistics.median(column("snapshot_written_bytes")) / 1e6, 1),
                "python_snapshot_s_median": round(statistics.median(column("snapshot_ms")) / 1e3, 2),
                "replica_pause_s_median": round(statistics.median(column("checkpoint_pause_ms")) / 1e3, 2),
                "replica_pause_s_max": round(max(column("checkpoint_pause_ms")) / 1e3, 2),
                "unacked_messages_max": self.unacked_max}


def _checkpoints(url, job_id):
    from pyflink_tensair import cluster

    stats = cluster.rest_get(f"{url}/jobs/{job_id}/checkpoints")
    summary = stats.get("summary", {})
    return {"completed": stats["counts"]["completed"], "failed": stats["counts"]["failed"],
            "state_mb": {k: round(v / 1e6, 2) for k, v in summary.get("checkpointed_size", summary.get("state_size", {})).items()
                         if k in ("min", "max", "avg")},
            "duration_s": {k: round(v / 1e3, 3) for k, v in summary.get("end_to_end_duration", {}).items()
                           if k in ("min", "max", "avg")}}


def _submit(folder, args, kill=None, sampler=None, stop=None, savepoint=None):
    """Runs a job; with ``kill=steps`` kills a TaskManager once a checkpoint completed
    and every replica reached ``steps`` model versions; with ``stop=(steps, folder, out)`` stops
    it with a savepoint into ``folder`` once every replica reached ``steps`` model versions (``out``
    gets the savepoint's location and how long the stop took); with ``sampler=[]`` polls the
    replicas' snapshot gauges and appends their summary; ``savepoint``: start from it. Returns
    (result, job id, kill time)."""
    from pyflink_tensair import cluster
    from pyflink_tensair.waiting import WaitTimeout, wait_until

    url = cluster.rest_url(folder)
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(
        result=cluster.submit(folder, args, timeout=1800, savepoint=savepoint)))
    runner.start()
    killed_at = None
    try:
        job_id = cluster.running_job(folder)
        polling = _SnapshotSampler(url, job_id) if sampler is not None else None
        if polling:
            polling.start()
        if stop is not None:
            steps, target, out = stop
            with contextlib.suppress(WaitTimeout):  # stop after 300 s all the same
                wait_until(lambda: _min_model_version(url, job_id) >= steps, 300, interval_s=0.5,
                           what=f"{steps} model versions on every replica")
            began = time.time()
            out.update(location=cluster.stop_with_savepoint(folder, target, job_id=job_id), stop_s=round(time.time() - began, 2))
        if kill is not None:
            with contextlib.suppress(WaitTimeout):  # kill after 300 s all the same
                wait_until(lambda: _checkpoints(url, job_id)["completed"] >= 1 and _min_model_version(url, job_id) >= kill,
                           300, interval_s=0.5, what=f"a checkpoint and {kill} model versions on every replica")
            killed_at = time.time()
            print(f"  killing TaskManager: PIDs {cluster.kill_taskmanager(folder)}", flush=True)
            cluster.await_failover(folder, job_id)
    finally:
        runner.join()
        cluster.ensure_taskmanagers(folder, 2)
    if polling:
        sampler.append(polling.stop())
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
                    "--rate", str(args.rate), "--checkpoints-interval-s", str(args.checkpoints_interval_s),
                    "--summary", summary_path, "--outdir", outdir]
        _, job_id, killed_at = _submit(folder, job_args, args.kill_after if disturbed else None)
        summary = read_summary(summary_path)
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


def savepoint_run(folder, work, staleness, args) -> dict:
    """The quickstart job undisturbed, and the same job stopped with a savepoint and resumed."""
    from pyflink_tensair.core.summary import tail_mean
    from pyflink_tensair.testing import max_weight_diff

    def job(name):
        outdir = os.path.join(work, f"s{staleness}-{name}")
        return outdir, [QUICKSTART, "--replicas", "2", "--staleness-bound", staleness, "--batches", str(args.batches),
                        "--rate", str(args.rate), "--checkpoints-interval-s", str(args.checkpoints_interval_s),
                        "--summary", outdir + ".json", "--outdir", outdir]

    calm_dir, calm_args = job("calm")
    _submit(folder, calm_args)
    calm = read_summary(calm_dir + ".json")
    first_dir, first_args = job("stopped")
    stopped = {}
    _submit(folder, first_args, stop=(args.kill_after, os.path.join(work, "savepoints"), stopped))
    second_dir, second_args = job("resumed")
    resubmitted = time.time()
    _submit(folder, second_args, savepoint=stopped["location"])
    resumed = read_summary(second_dir + ".json")
    first = [m for m in _metrics(first_dir) if m.phase == "batch"]
    second = _metrics(second_dir)
    trained = [m.batch_id for m in first] + [m.batch_id for m in second if m.phase == "batch"]
    after = [m.time for m in second if m.phase == "batch"]
    both = sorted(first + [m for m in second if m.phase == "batch"], key=lambda m: m.time)  # the whole stream
    final_loss = tail_mean([m.loss for m in both])
    return {"stop_s": stopped["stop_s"], "batches_before_stop": len(first),
            "stopped_at_steps": sorted(max(m.local_step for m in first if m.replica == r) for r in (0, 1)),
            "restored_at_steps": sorted(m.local_step for m in second if m.phase == "restored"),
            "batches_trained": len(trained), "distinct_batches": len(set(trained)),
            "resume_to_first_batch_s": round(min(after) - resubmitted, 2) if after else None,
            "model_versions": resumed["model_versions"], "undisturbed_model_versions": calm["model_versions"],
            "replica_max_weight_diff": resumed["replica_max_weight_diff"],
            "max_weight_diff_to_undisturbed": max_weight_diff([_final_weights(calm_dir), _final_weights(second_dir)]),
            "final_loss_both_runs": final_loss, "undisturbed_final_loss": calm["final_loss"],
            "final_loss_ratio": round(final_loss / calm["final_loss"], 4) if calm["final_loss"] else None}


def _final_weights(outdir):
    """Replica 0's final weights, from the job's model files."""
    from pyflink_tensair.flink.types import decode_final_model

    models = [decode_final_model(open(p, "rb").read()) for p in glob.glob(os.path.join(outdir, "model-*.bin"))]
    return min(models, key=lambda m: m.replica).weights


def cost_run(folder, work, workload, args) -> dict:
    from pyflink_tensair import cluster

    figures = {}
    for interval in (0.0, args.checkpoints_interval_s):  # 0: no checkpoints, the reference
        outdir = os.path.join(work, f"{workload}-{interval:g}")
        job_args = [PROBE_JOB, "--system", args.system, "--workload", workload, "--replicas", "2", "--batches",
                    str(args.cost_batches), "--checkpoints-interval-s", str(interval) if interval else "none",
                    "--outdir", outdir, "--checkpoints-state-backend", args.checkpoints_state_backend,
                    "--staleness-bound", str(args.staleness_bound), "--rate", str(args.cost_rate)]
        sampled = []
        _, job_id, _ = _submit(folder, job_args, sampler=sampled if interval else None)
        batches = sorted(m.time for m in _metrics(outdir) if m.phase == "batch")
        rate = (len(batches) - 1) / (batches[-1] - batches[0]) if len(batches) > 1 else None
        run = {"batches_per_s": round(rate, 2) if rate else None}
        if interval:
            run["checkpoints"] = _checkpoints(cluster.rest_url(folder), job_id)
            run["replicas"] = sampled[0]
        figures[f"interval {interval:g} s"] = run
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recovery", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["kill", "cost", "savepoint"])
    parser.add_argument("--staleness", action="append", help="kill, savepoint: staleness bounds to run (default: 0 and none)")
    parser.add_argument("--workload", action="append", help="cost: dense and/or sparse (default: both)")
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--kill-after", type=int, default=60,
                        help="model versions every replica has before the kill (savepoint: before the stop)")
    parser.add_argument("--checkpoints-interval-s", type=float, default=2.0,
                        help="Checkpoints.interval_s of the jobs (cost: also runs the same job without checkpoints)")
    parser.add_argument("--cost-batches", type=int, default=200)
    parser.add_argument("--cost-rate", type=float, default=0.0, help="cost: batches/s of the source (0: unpaced)")
    parser.add_argument("--system", choices=["dasgd", "bounded", "sync"], default="dasgd", help="cost: our system to run")
    parser.add_argument("--staleness-bound", type=int, default=4, help="cost: the bound of --system bounded")
    parser.add_argument("--checkpoints-state-backend", choices=["hashmap", "rocksdb"], default="hashmap",
                        help="cost: where state lives (Checkpoints.state_backend)")
    parser.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "results", "recovery.jsonl"))
    args = parser.parse_args(argv)
    from pyflink_tensair import cluster

    sys.path.insert(0, ROOT)
    work = tempfile.mkdtemp(prefix="tensair-recovery-")
    folder = os.path.join(work, "cluster")
    cluster.start(folder, taskmanagers=2, slots=2, rest_port=18381, rpc_port=16423)
    try:
        if args.what == "cost":
            runs = [("cost", w, cost_run(folder, work, w, args)) for w in (args.workload or ["dense", "sparse"])]
        else:
            run = kill_run if args.what == "kill" else savepoint_run
            runs = [(args.what, s, run(folder, work, s, args)) for s in (args.staleness or ["0", "none"])]
    finally:
        cluster.stop(folder)
    os.makedirs(os.path.dirname(args.results), exist_ok=True)
    with open(args.results, "a") as out:
        for what, name, figures in runs:
            record = {"what": what, "run": name, "argv": sys.argv[1:], "time": time.strftime("%Y-%m-%d %H:%M:%S"), **figures}
            out.write(json.dumps(record) + "\n")
            print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
