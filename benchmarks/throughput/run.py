"""Runs the benchmark: for each system, workload, replica count and mode, the highest sustainable rate.

Each probe is one job (``probe_job.py``) fed ``rate x seconds`` batches by an open-loop source;
its verdict comes from the delays of the trained batches (:mod:`.verdict`), the rates from a
doubling-then-bisection search (:mod:`.search`). One JSON record per run is appended to the
results file as soon as the run ends; a failing run is recorded with its error, not raised.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from pyflink_tensair.core.events import Metrics

from . import search as rate_search
from .cpu import ProcessCpu
from .memory import PeakMemory
from .verdict import judge

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE_JOB = os.path.join(ROOT, "benchmarks", "throughput", "probe_job.py")


RENAMED_FIELDS = {  # spec fields renamed with TrainConfig's (CHANGELOG.md, 0.2.0): what to write instead
    "tf_threads": "'tf_intra_op_threads'",
    "replica_execution": "'python_in' ('thread' is 'jvm', 'process' is 'processes')",
    "source_execution": "'source_python_in' ('thread' is 'jvm', 'process' is 'processes')",
}


@dataclass
class Spec:
    """What to run. ``seconds``: arrival time covered by each probe (batches = rate x seconds)."""

    systems: List[str] = field(default_factory=lambda: ["dasgd", "bounded", "sync", "flinkml", "flinkml_full", "single",
                                                        "limit"])
    workloads: List[str] = field(default_factory=lambda: ["dense", "sparse"])
    replicas: List[int] = field(default_factory=lambda: [1, 2])
    modes: List[str] = field(default_factory=lambda: ["local", "cluster"])
    cluster_systems: List[str] = field(default_factory=lambda: ["dasgd", "flinkml", "flinkml_full"])
    cluster_replicas: List[int] = field(default_factory=lambda: [2])
    seconds: float = 15.0
    min_batches: int = 30
    bisections: int = 1
    staleness_bound: int = 4  # of the system "bounded"
    tf_intra_op_threads: int = 1  # TrainConfig.tf_intra_op_threads of every system
    python_in: str = "jvm"  # TrainConfig.python_in of every system's training operators
    source_python_in: str = "jvm"  # the python_in of batch_source's config: where every system's batches are made
    probe_timeout_s: float = 600.0
    limit_batches: int = 60
    max_probes: Optional[int] = None  # per rate search; a smoke run's cap (its rates are lower bounds)

    @staticmethod
    def unknown_fields(fields) -> List[str]:
        """What is wrong with the names of ``fields`` (a spec file's keys): renamed and unknown ones.

            >>> Spec.unknown_fields({"replica_execution": "thread", "seconds": 4, "secs": 4})
            ["'replica_execution' is now 'python_in' ('thread' is 'jvm', 'process' is 'processes')", "'secs' is no Spec field"]
        """
        known = {f.name for f in dataclasses.fields(Spec)}
        return [f"{name!r} is now {RENAMED_FIELDS[name]}" if name in RENAMED_FIELDS else f"{name!r} is no Spec field"
                for name in fields if name not in known]

    @staticmethod
    def quick() -> "Spec":
        return Spec(systems=["dasgd", "flinkml", "limit"], workloads=["dense"], replicas=[1], modes=["local"],
                    seconds=6.0, min_batches=12, bisections=0, limit_batches=20)


def machine() -> dict:
    with open("/proc/meminfo") as f:
        total_kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    return {"cores": os.cpu_count(), "memory_gib": round(total_kb / 2 ** 20, 1), "platform": platform.platform(),
            "python": platform.python_version()}


def _read_metrics(folder: str) -> List[Metrics]:
    records = []
    for path in glob.glob(os.path.join(folder, "metrics-*.jsonl")):
        with open(path) as f:
            records += [Metrics.from_json(line) for line in f if line.strip()]
    return [m for m in records if m.phase == "batch"]


def _run_probe(spec: Spec, system: str, workload: str, replicas: int, rate: float, batches: int, mode: str,
               cluster_dir: Optional[str], extra: Sequence[str] = ()) -> dict:
    outdir = tempfile.mkdtemp(prefix="tensair-bench-")
    try:
        args = ["--system", system, "--workload", workload, "--replicas", str(replicas), "--rate", str(rate),
                "--batches", str(batches), "--staleness-bound", str(spec.staleness_bound),
                "--tf-intra-op-threads", str(spec.tf_intra_op_threads), "--python-in", spec.python_in,
                "--source-python-in", spec.source_python_in, "--outdir", outdir, *extra]
        from pyflink_tensair import cluster

        if mode == "cluster" and system != "limit":
            command = [os.path.join(cluster.flink_home(), "bin", "flink"), "run", "-pyclientexec", sys.executable,
                       "-pyexec", sys.executable, "-py", PROBE_JOB, *args]
            env = cluster.flink_environment(cluster_dir)
            roots = cluster.recorded_pids(cluster_dir)
        else:
            command, env, roots = [sys.executable, PROBE_JOB, *args], cluster.client_environment(), []
        started = time.time()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        with PeakMemory(roots + [process.pid], client=process.pid) as memory, \
                ProcessCpu(roots + [process.pid], client=process.pid) as cpu:
            try:
                _, stderr = process.communicate(timeout=spec.probe_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
                raise RuntimeError(f"the probe did not finish within {spec.probe_timeout_s} s")
        if process.returncode != 0:
            raise RuntimeError(f"the probe job failed (exit {process.returncode}): {stderr[-1500:]}")
        records = _read_metrics(outdir)
        return {"records": records, "wall_s": round(time.time() - started, 1), "peak_memory_mb": memory.peaks_mb(),
                "cpu": cpu}
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def _rate(records: List[Metrics]) -> Optional[float]:
    times = sorted(m.time for m in records)
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else None


def busy_fraction(records: List[Metrics]) -> Optional[float]:
    """The mean, over replicas, of the share of wall time spent inside the model (from the first to
    the last trained batch); ``None`` for systems that do not measure it."""
    shares = []
    for replica in {m.replica for m in records}:
        own = sorted((m for m in records if m.replica == replica), key=lambda m: m.time)
        if len(own) > 1 and own[-1].time > own[0].time and own[-1].model_busy_s > 0:
            shares.append((own[-1].model_busy_s - own[0].model_busy_s) / (own[-1].time - own[0].time))
    return round(sum(shares) / len(shares), 3) if shares else None


def _curves(records: List[Metrics], points: int = 40) -> dict:
    ordered = sorted(records, key=lambda m: m.time)
    if not ordered:
        return {}
    t0 = ordered[0].time
    step = max(1, len(ordered) // points)
    losses = [(round(m.time - t0, 2), i + 1, m.loss) for i, m in enumerate(ordered) if m.loss is not None][::step]
    latest = {}
    for m in ordered:
        latest[m.replica] = m
    span = ordered[-1].time - t0
    sent = sum(m.bytes_sent for m in latest.values())
    return {"loss_vs_time": [[t, round(l, 5)] for t, _, l in losses], "loss_vs_batches": [[n, round(l, 5)] for _, n, l in losses],
            "gradient_bytes_per_s": round(sent / span, 1) if span > 0 else None,
            "accuracy_last": next((m.accuracy for m in reversed(ordered) if m.accuracy is not None), None)}


def concurrent_rates(record_sets: List[List[Metrics]]) -> List[float]:
    """Each plain loop's rate while all of them ran: over the window from the latest first record
    to the earliest last one, each loop's first fifth left out (its first steps compile).

    Example::

        >>> from types import SimpleNamespace as S
        >>> fast = [S(time=t / 10) for t in range(100)]       # 10/s from 0 to 9.9 s
        >>> slow = [S(time=5 + t / 5) for t in range(50)]     # 5/s from 5 to 14.8 s
        >>> [round(r, 2) for r in concurrent_rates([fast, slow])]
        [10.0, 5.0]
    """
    kept = [sorted(m.time for m in records[len(records) // 5:]) for records in record_sets]
    start, end = max(times[0] for times in kept), min(times[-1] for times in kept)
    if not end > start:
        raise RuntimeError(f"the {len(kept)} plain loops never ran at the same time: make limit_batches larger")
    rates = []
    for times in kept:
        inside = [t for t in times if start <= t <= end]
        rates.append((len(inside) - 1) / (inside[-1] - inside[0]) if len(inside) > 1 and inside[-1] > inside[0] else 0.0)
    return rates


def run_limit(spec: Spec, workload: str, replicas: int, extra: Sequence[str] = ()) -> dict:
    """The machine's ceiling for ``replicas`` replicas, measured: as many plain loops of the same
    compiled step, each in its own process, at once; their rates while all run, summed.
    ``extra``: more ``probe_job.py`` arguments (``--pixels uint8``)."""
    from concurrent.futures import ThreadPoolExecutor

    batches = spec.limit_batches * replicas  # each loop slows down about as many times: they must overlap
    barrier = tempfile.mkdtemp(prefix="tensair-limit-")  # the loops start together, once all are compiled
    extra = [*extra, "--barrier", barrier, "--processes", str(replicas)]
    try:
        with ThreadPoolExecutor(replicas) as pool:
            results = list(pool.map(lambda _: _run_probe(spec, "limit", workload, 1, 0.0, batches, "local", None, extra),
                                    range(replicas)))
    finally:
        shutil.rmtree(barrier, ignore_errors=True)
    rates = concurrent_rates([r["records"] for r in results])
    peaks = {}
    for result in results:  # the largest process of each kind
        for kind, mb in result["peak_memory_mb"].items():
            peaks[kind] = max(peaks.get(kind, 0), mb)
    return {"sustainable_rate": round(sum(rates), 3), "process_rates": [round(r, 3) for r in rates],
            "processes": replicas, "peak_memory_mb": peaks, **_curves(results[0]["records"])}


def run_one(spec: Spec, system: str, workload: str, replicas: int, mode: str, cluster_dir: Optional[str],
            start_rate: float, log=print) -> dict:
    from . import workloads

    record = {"system": system, "workload": workload, "replicas": replicas, "mode": mode,
              "description": workloads.get(workload).description,
              "tf_intra_op_threads": spec.tf_intra_op_threads, "python_in": spec.python_in,
              "source_python_in": spec.source_python_in, "staleness_bound": {"dasgd": None, "bounded": spec.staleness_bound, "sync": 0}.get(system),
              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine()}
    try:
        if system == "limit":
            record.update(run_limit(spec, workload, replicas))
            log(f"  limit {workload} x{replicas}: {record['sustainable_rate']} batches/s "
                f"({' + '.join(map(str, record['process_rates']))} in {record['processes']} processes at once)")
            return record
        details = {}

        def probe(rate):
            batches = max(spec.min_batches, int(math.ceil(rate * spec.seconds)))
            result = _run_probe(spec, system, workload, replicas, rate, batches, mode, cluster_dir)
            delays = [(m.time - m.delay_s, m.delay_s) for m in result["records"] if m.delay_s is not None]
            verdict = judge(delays, expected=batches)
            detail = {"rate": rate, "batches": batches, **verdict.to_dict(), "achieved_rate": _rate(result["records"]),
                      "model_busy_fraction": busy_fraction(result["records"]),
                      "wall_s": result["wall_s"], "peak_memory_mb": result["peak_memory_mb"]}
            details[rate] = (detail, result["records"])
            log(f"  {system} {workload} x{replicas} {mode} at {rate:g}/s: "
                f"{'sustainable' if verdict.sustainable else 'NOT sustainable'} ({verdict.reason}; {result['wall_s']} s)")
            return verdict.sustainable, detail

        probes = rate_search.search(probe, start=start_rate, bisections=spec.bisections, max_probes=spec.max_probes)
        best = rate_search.best_rate(probes)
        record["probes"] = [p.detail for p in probes]
        record["sustainable_rate"] = best
        if best is not None:
            detail, records = details[best]
            record["peak_memory_mb"] = detail["peak_memory_mb"]
            record.update(_curves(records))
    except Exception as err:  # recorded, not raised: one broken run must not lose the others
        record["error"] = f"{type(err).__name__}: {err}"
        record["traceback"] = traceback.format_exc()[-3000:]
        log(f"  {system} {workload} x{replicas} {mode}: FAILED: {record['error'][:300]}")
    return record


def start_cluster() -> str:
    """The benchmark's standalone cluster (two TaskManagers, two slots each) in a new folder; stop
    it with ``pyflink_tensair.cluster.stop(folder)``."""
    from pyflink_tensair import cluster

    folder = tempfile.mkdtemp(prefix="tensair-bench-cluster-")
    cluster.start(folder, taskmanagers=2, slots=2, rest_port=29081, rpc_port=29123)
    return folder


def run(spec: Spec, results_path: str, log=print) -> List[dict]:
    from pyflink_tensair import cluster

    os.makedirs(os.path.dirname(os.path.abspath(results_path)), exist_ok=True)
    records = []
    cluster_dir = None
    try:
        if "cluster" in spec.modes:
            cluster_dir = start_cluster()
        for workload in spec.workloads:
            limits = {}
            for replicas in spec.replicas:  # always measured: the limit also sets where each search starts
                limits[replicas] = run_one(spec, "limit", workload, replicas, "local", None, 0, log)
                if "limit" in spec.systems:
                    records.append(limits[replicas])
                    _append(results_path, limits[replicas])
            for mode in spec.modes:
                for replicas in spec.replicas:
                    for system in spec.systems:
                        if system == "limit" or (system == "single" and replicas != 1):
                            continue
                        if mode == "cluster" and (system not in spec.cluster_systems or replicas not in spec.cluster_replicas):
                            continue
                        if system in ("bounded", "sync") and replicas == 1:
                            continue  # one replica has no peers: the same run as dasgd
                        limit = limits.get(replicas, {}).get("sustainable_rate") or 1.0
                        start = 2.0 ** math.floor(math.log2(max(limit / 4, 0.25)))
                        record = run_one(spec, system, workload, replicas, mode, cluster_dir, start, log)
                        records.append(record)
                        _append(results_path, record)
    finally:
        if cluster_dir:
            cluster.stop(cluster_dir)
    return records


def _append(path: str, record: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
