"""How long a checkpoint holds the servers of the online loop: ``jobs/online_loop.py`` with
checkpoints every second on a standalone cluster (two TaskManagers of two slots, started and
stopped here), each completed checkpoint's acknowledgement time per operator, from Flink's REST
API (``/jobs/<id>/checkpoints/details/<n>``).

With aligned checkpoints an operator stops reading its inputs from the first barrier until the
last: its acknowledgement time (trigger to snapshot) is how long a checkpoint can hold it. Three
operators of one run, one checkpoint at a time: the trained servers (events + model updates),
the frozen servers (events only: the floor) and the replicas (the training path's backlog).

    python -m benchmarks.online_checkpoints --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from pyflink_tensair import cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(ROOT, "jobs", "online_loop.py")
OPERATORS = {"trained servers": "serve: servers", "frozen servers": "frozen: servers", "replicas": "online: replicas"}


def _vertex_ids(url: str, job_id: str) -> dict:
    """``{operator label: vertex id}`` of the job (the vertex whose chain holds it)."""
    vertices = cluster.rest_get(f"{url}/jobs/{job_id}")["vertices"]
    found = {}
    for label, part in OPERATORS.items():
        ids = [v["id"] for v in vertices if part in v["name"]]
        if len(ids) != 1:
            raise RuntimeError(f"no single vertex named after {part!r}: {[v['name'] for v in vertices]}")
        found[label] = ids[0]
    return found


def watch(url: str, job_id: str, every_s: float = 0.5) -> list:
    """Until the job ends: each completed checkpoint's ``{label: acknowledgement ms}``."""
    seen, rows, ids = set(), [], None
    while True:
        state = cluster.rest_get(f"{url}/jobs/{job_id}")["state"]
        if ids is None and state == "RUNNING":
            ids = _vertex_ids(url, job_id)
        if ids is not None:
            for entry in cluster.rest_get(f"{url}/jobs/{job_id}/checkpoints").get("history", []):
                if entry["status"] != "COMPLETED" or entry["id"] in seen:
                    continue
                seen.add(entry["id"])
                tasks = cluster.rest_get(f"{url}/jobs/{job_id}/checkpoints/details/{entry['id']}")["tasks"]
                rows.append({label: tasks[vertex]["end_to_end_duration"] for label, vertex in ids.items()})
        if state in ("FINISHED", "FAILED", "CANCELED"):
            if state != "FINISHED":
                raise RuntimeError(f"job {job_id} ended {state}")
            return rows
        time.sleep(every_s)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--events", type=int, default=1500)
    parser.add_argument("--events-per-s", type=float, default=50.0)
    parser.add_argument("--checkpoints-interval-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="tensair-online-ckpt-") as scratch:
        folder = os.path.join(scratch, "cluster")
        cluster.start(folder, taskmanagers=2, slots=2)
        try:
            url = cluster.rest_url(folder)
            for repeat in range(args.repeats):
                result = cluster.submit(folder, [JOB, "--events", str(args.events), "--events-per-s",
                                                 str(args.events_per_s), "--checkpoints-interval-s",
                                                 str(args.checkpoints_interval_s), "--warmup-s", "5",
                                                 "--outdir", os.path.join(scratch, f"run-{repeat}")],
                                        detached=True, timeout=300)
                if result.returncode != 0:
                    raise RuntimeError(result.stdout[-3000:] + result.stderr[-3000:])
                job_id = cluster.running_job(folder)
                rows = watch(url, job_id)
                figures = {"checkpoints": len(rows)}
                for label in OPERATORS:
                    values = np.array([row[label] for row in rows], float)
                    figures[f"{label} p50 ms"] = float(np.median(values))
                    figures[f"{label} max ms"] = float(values.max())
                runs.append(figures)
                print(f"run {repeat + 1}: " + ", ".join(f"{k} {v:.0f}" for k, v in figures.items()), flush=True)
        finally:
            cluster.stop(folder)
    for key in runs[0]:
        values = [r[key] for r in runs]
        print(f"{key}: median {statistics.median(values):.0f} [{min(values):.0f}, {max(values):.0f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
