"""A metrics storm: every metric queried without pause while thread-mode jobs start, train and end.

    python -m benchmarks.metrics_storm --runs 5 --fetcher-interval-ms 0 --dir /tmp/storm-cluster

Issue 24: PyFlink's thread-mode gauges called Python from Flink's metric thread, and a query
that fell between a task closing its Python operators and Flink closing the task's metric group
crashed the TaskManager (docs/reliability.md). Each run starts a standalone cluster of two
TaskManagers (``--fetcher-interval-ms``: Flink's ``metrics.fetcher.update-interval``; at 0 every
REST query makes every TaskManager dump all its metrics, calling every gauge), submits
``--rounds`` x ``--jobs`` short thread-mode jobs (:mod:`benchmarks.metrics_storm_job`), and while
they run ``--pollers`` threads query, without pause, every metric of every TaskManager and of
every vertex and subtask of every job. Printed per run and in all: TaskManagers that died, jobs
that did not finish, queries made. Run it from the checkout whose code is to be tested
(``PYTHONPATH``: the cluster's TaskManagers inherit it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import urllib.error
from dataclasses import dataclass, field
from typing import List

from pyflink_tensair import cluster
from pyflink_tensair.waiting import WaitTimeout, wait_until

JOB_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics_storm_job.py")
MAX_QUERY_CHARS = 3000  # Flink's REST server refuses request lines over 4,096 characters


@dataclass
class StormResult:
    """One storm: the jobs submitted and their final states, the TaskManagers lost, the queries."""
    job_states: dict = field(default_factory=dict)  # job id -> final state
    taskmanagers_lost: List[int] = field(default_factory=list)  # PIDs of TaskManagers that died
    queries: int = 0  # metric queries answered
    refused: int = 0  # queries that failed (a job or subtask gone between listing and asking)
    submit_failures: List[str] = field(default_factory=list)  # the flink run clients that failed
    seconds: float = 0.0

    @property
    def failed_jobs(self) -> int:
        return sum(1 for state in self.job_states.values() if state != "FINISHED")


class MetricsPoller:
    """Threads that query every metric of every TaskManager, job vertex and subtask, without pause."""

    def __init__(self, url: str, threads: int = 2):
        self.url = url
        self.queries = 0
        self.refused = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, name=f"metrics-poller-{i}", daemon=True) for i in range(threads)]

    def __enter__(self) -> "MetricsPoller":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _get(self, path: str):
        try:
            answer = cluster.rest_get(self.url + path, timeout=10)
        except (OSError, ValueError):  # HTTPError, a refused or reset connection, a half answer
            with self._lock:
                self.refused += 1
            return None
        with self._lock:
            self.queries += 1
        return answer

    def _all_values(self, metrics_path: str) -> None:
        """Lists the metrics at ``metrics_path`` and asks for all their values, in chunks."""
        listed = self._get(metrics_path) or []
        chunk: List[str] = []
        for metric in listed:
            chunk.append(metric["id"])
            if sum(len(i) + 1 for i in chunk) > MAX_QUERY_CHARS:
                self._get(f"{metrics_path}?get={','.join(chunk)}")
                chunk = []
        if chunk:
            self._get(f"{metrics_path}?get={','.join(chunk)}")

    def _sweep(self) -> None:
        for tm in (self._get("/taskmanagers") or {}).get("taskmanagers", []):
            self._all_values(f"/taskmanagers/{tm['id']}/metrics")
        for job in (self._get("/jobs/overview") or {}).get("jobs", []):
            if job["state"] not in ("RUNNING", "INITIALIZING", "CREATED"):
                continue
            for vertex in (self._get(f"/jobs/{job['jid']}") or {}).get("vertices", []):
                base = f"/jobs/{job['jid']}/vertices/{vertex['id']}"
                self._all_values(f"{base}/metrics")
                self._all_values(f"{base}/subtasks/metrics")
                for subtask in range(vertex.get("parallelism", 1)):
                    self._all_values(f"{base}/subtasks/{subtask}/metrics")

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sweep()


def _job_ids(output: str) -> List[str]:
    return list(dict.fromkeys(re.findall(r"JobID ([0-9a-f]{32})", output)))  # flink run names them too


def storm(folder: str, *, rounds: int = 1, jobs: int = 4, replicas: int = 2, batches: int = 40,
          pollers: int = 2, timeout: float = 600.0) -> StormResult:
    """One storm on the running cluster in ``folder``: ``rounds`` clients, one after the other, each
    submitting ``jobs`` short thread-mode jobs, while ``pollers`` threads query every metric."""
    folder = os.path.abspath(folder)
    url = cluster.rest_url(folder)
    taskmanagers = cluster.taskmanager_pids(folder)
    result = StormResult()
    began = time.time()
    with MetricsPoller(url, pollers) as poller:
        for _ in range(rounds):
            submitted = cluster.submit(folder, [JOB_SCRIPT, "--jobs", str(jobs), "--replicas", str(replicas),
                                                "--batches", str(batches)], timeout=timeout)
            ids = _job_ids(submitted.stdout)
            if submitted.returncode != 0 or len(ids) != jobs:
                result.submit_failures.append(f"exit code {submitted.returncode}, {len(ids)} of {jobs} job ids\n"
                                              + (submitted.stdout + submitted.stderr)[-4000:])
            for job_id in ids:
                result.job_states[job_id] = _final_state(url, job_id)
            if set(cluster.taskmanager_pids(folder)) != set(taskmanagers):
                break  # a TaskManager died: the storm has its answer
    result.queries, result.refused = poller.queries, poller.refused
    result.taskmanagers_lost = sorted(set(taskmanagers) - set(cluster.taskmanager_pids(folder)))
    result.seconds = round(time.time() - began, 1)
    return result


def _final_state(url: str, job_id: str, timeout: float = 120.0) -> str:
    """The job's state once it has ended (its client has returned, so it has, or is about to)."""
    state = "UNKNOWN"

    def ended():
        nonlocal state
        try:
            state = cluster.rest_get(f"{url}/jobs/{job_id}")["state"]
        except (OSError, ValueError, urllib.error.HTTPError):
            state = "UNKNOWN"
        return state in ("FINISHED", "FAILED", "CANCELED")

    try:
        wait_until(ended, timeout, interval_s=0.5, what=f"job {job_id} to end")
    except WaitTimeout:
        pass  # reported as the state it was last seen in
    return state


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="storms, each on a new cluster (default: 5)")
    parser.add_argument("--fetcher-interval-ms", type=int, default=0,
                        help="metrics.fetcher.update-interval (default 0: the TaskManagers dump on every query)")
    parser.add_argument("--rounds", type=int, default=2, help="flink run clients per storm, one after the other")
    parser.add_argument("--jobs", type=int, default=4, help="jobs per client")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--pollers", type=int, default=2, help="polling threads")
    parser.add_argument("--slots", type=int, default=2, help="slots per TaskManager")
    parser.add_argument("--dir", default="/tmp/metrics-storm-cluster", help="the cluster's folder")
    parser.add_argument("--rest-port", type=int, default=38181)
    parser.add_argument("--rpc-port", type=int, default=36223)
    parser.add_argument("--json", metavar="PATH", help="also write the runs as JSON lines to PATH")
    args = parser.parse_args(argv)

    totals = {"runs": 0, "runs_with_a_crash": 0, "taskmanagers_lost": 0, "jobs": 0, "failed_jobs": 0, "queries": 0}
    for run in range(args.runs):
        cluster.start(args.dir, taskmanagers=2, slots=args.slots, rest_port=args.rest_port, rpc_port=args.rpc_port,
                      metrics_fetcher_interval_ms=args.fetcher_interval_ms)
        try:
            result = storm(args.dir, rounds=args.rounds, jobs=args.jobs, replicas=args.replicas, batches=args.batches,
                           pollers=args.pollers)
        finally:
            crashes = _crash_lines(args.dir)
            cluster.stop(args.dir)
        line = {"run": run, "fetcher_interval_ms": args.fetcher_interval_ms, "seconds": result.seconds,
                "taskmanagers_lost": len(result.taskmanagers_lost), "jobs": len(result.job_states),
                "failed_jobs": result.failed_jobs, "queries": result.queries, "refused": result.refused,
                "submit_failures": len(result.submit_failures), "crash_lines": crashes[:3]}
        print(json.dumps(line), flush=True)
        if result.submit_failures:
            path = os.path.join(os.path.abspath(args.dir), f"client-failures-{run}.log")
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n\n".join(result.submit_failures))
            print(f"  {len(result.submit_failures)} flink run client(s) failed: their output is in {path}", flush=True)
        if args.json:
            with open(args.json, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
        totals["runs"] += 1
        totals["runs_with_a_crash"] += bool(result.taskmanagers_lost)
        totals["taskmanagers_lost"] += len(result.taskmanagers_lost)
        totals["jobs"] += len(result.job_states)
        totals["failed_jobs"] += result.failed_jobs
        totals["queries"] += result.queries
    print("total: " + json.dumps(totals), flush=True)
    return 0


def _crash_lines(folder: str) -> List[str]:
    """The JVM crash reports' first lines (hs_err files and the TaskManagers' .out), if any."""
    lines = []
    for name in sorted(os.listdir(os.path.join(folder, "log"))):
        if not name.endswith(".out"):
            continue
        with open(os.path.join(folder, "log", name), errors="replace") as f:
            lines += [f"{name}: {line.strip()}" for line in f if "SIGSEGV" in line or "Problematic frame" in line
                      or re.search(r"^# [CJ] +\[", line)]
    return lines


if __name__ == "__main__":
    sys.exit(main())
