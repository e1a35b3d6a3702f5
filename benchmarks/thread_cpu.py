"""CPU time per thread of a running TaskManager (or any JVM) over a window, by kind of thread.

The replicas' profile (``benchmarks.replica_path``) splits a batch's wall time by the replicas'
own clocks; this splits a process's CPU by who spent it. Threads are named from three sources:
the JVM's own list (``jcmd PID Thread.print``: Flink's task threads, network flushers, JIT
compilers, GC), py-spy's dump where py-spy is installed (the embedded interpreter's Python
threads, e.g. ``tensair-trainer-0``), and otherwise the OS name, marked ``native``: in a
TaskManager that hosts replicas (``python_in="jvm"``) those are TensorFlow's pool threads (they
inherit the name of the task thread that built the model). Digits in names are collapsed, so the rows
are kinds of thread. With ``--metrics DIR`` (a job's metrics files) the figures are also per
trained batch over the same window::

    python benchmarks/throughput/probe_job.py --system dasgd --workload dense --replicas 2 --batches 3000 --outdir /tmp/p &
    python -m benchmarks.thread_cpu --pid JVM_PID --seconds 30 --metrics /tmp/p

Example (this process, a window of 0.2 s)::

    >>> import os, threading
    >>> spin = threading.Thread(target=lambda: sum(i * i for i in range(3_000_000)), name="spinner")
    >>> spin.start(); window = measure(os.getpid(), 0.2, java=False, python=False); spin.join()
    >>> window.seconds > 0 and window.cpu_s >= 0 and isinstance(window.by_kind(), dict)
    True
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from benchmarks.throughput.cpu import stat_cpu_seconds


def thread_cpu(pid: int) -> Dict[int, Tuple[str, float]]:
    """``{tid: (OS thread name, CPU seconds so far)}`` of every thread of ``pid``."""
    threads = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        raise ProcessLookupError(f"process {pid} is gone (did the job end before or during the window?)") from None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # the thread ended between the listing and the read
        used = stat_cpu_seconds(f"/proc/{pid}/task/{tid}/stat")
        if used >= 0:
            threads[int(tid)] = (name, used)
    return threads


def java_thread_names(pid: int) -> Dict[int, str]:
    """``{tid: Java thread name}`` from ``jcmd PID Thread.print`` (empty without jcmd)."""
    if not shutil.which("jcmd"):
        return {}
    try:
        dump = subprocess.run(["jcmd", str(pid), "Thread.print"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(nid, 16): name for name, nid in re.findall(r'^"(.*?)".*?nid=0x([0-9a-f]+)', dump, re.M)}


def python_thread_names(pid: int) -> Dict[int, str]:
    """``{tid: Python thread name}`` from ``py-spy dump`` (empty without py-spy, or without Python)."""
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(spy):
        return {}
    try:
        dump = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(tid): (name or "python") for tid, name in re.findall(r'^Thread (\d+) \(\w+\)(?:: "(.*)")?', dump, re.M)}


@dataclass
class Window:
    seconds: float
    threads: Dict[int, Tuple[str, float]] = field(default_factory=dict)  # tid -> (kind, CPU seconds in the window)

    @property
    def cpu_s(self) -> float:
        return sum(cpu for _, cpu in self.threads.values())

    def by_kind(self) -> Dict[str, float]:
        kinds: Dict[str, float] = {}
        for kind, cpu in self.threads.values():
            kinds[kind] = kinds.get(kind, 0.0) + cpu
        return dict(sorted(kinds.items(), key=lambda kv: -kv[1]))


def _kind(tid: int, os_name: str, java: Dict[int, str], python: Dict[int, str]) -> str:
    if tid in java:  # a task thread that calls into the embedded interpreter is a Java thread first
        return "java: " + re.sub(r"\d+", "#", java[tid])
    if tid in python:
        return "python: " + re.sub(r"\d+", "#", python[tid])
    return "native: " + re.sub(r"\d+", "#", os_name)


def measure(pid: int, seconds: float, *, java: bool = True, python: bool = True) -> Window:
    """CPU seconds per thread of ``pid`` over the next ``seconds``, each thread labelled by kind."""
    before, began = thread_cpu(pid), time.time()
    time.sleep(seconds)
    after, ended = thread_cpu(pid), time.time()
    java_names = java_thread_names(pid) if java else {}
    python_names = python_thread_names(pid) if python else {}
    window = Window(ended - began)
    for tid, (os_name, cpu) in after.items():
        used = cpu - before.get(tid, (os_name, 0.0))[1]
        if used > 0:
            window.threads[tid] = (_kind(tid, os_name, java_names, python_names), used)
    return window


def trained_between(metrics_dir: str, began: float, ended: float) -> Optional[int]:
    """Batches trained by all replicas between two times, from the ``metrics-*.jsonl`` files."""
    total, seen = 0, False
    for path in glob.glob(os.path.join(metrics_dir, "metrics-*.jsonl")):
        steps: Dict[int, list] = {}
        with open(path) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                if record.get("phase") == "batch" and began <= record["time"] <= ended:
                    steps.setdefault(record["replica"], []).append(record["local_step"])
        for own in steps.values():
            total += max(own) - min(own)
            seen = True
    return total if seen else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.thread_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, required=True, help="the JVM (TaskManager or mini-cluster) to watch")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--metrics", help="a job's metrics folder: also report CPU ms per trained batch")
    args = parser.parse_args(argv)
    began = time.time()
    window = measure(args.pid, args.seconds)
    batches = trained_between(args.metrics, began, began + window.seconds) if args.metrics else None
    print(f"pid {args.pid}: {window.cpu_s:.2f} CPU s in {window.seconds:.1f} s ({window.cpu_s / window.seconds:.2f} cores)"
          + (f", {batches} batches trained" if batches else ""))
    print("| thread kind | CPU s | share | " + ("CPU ms per batch |" if batches else "") )
    print("|---|---|---|" + ("---|" if batches else ""))
    for kind, cpu in window.by_kind().items():
        if cpu < 0.005 * window.cpu_s:
            continue
        print(f"| {kind} | {cpu:.2f} | {cpu / window.cpu_s:.1%} |" + (f" {1000 * cpu / batches:.1f} |" if batches else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
