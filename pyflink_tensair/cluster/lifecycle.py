"""The cluster's processes: start, stop, TaskManagers lost and replaced, jobs submitted.

Every process is known by the PID Flink's scripts record under ``<folder>/pids``; nothing is
found by name (:mod:`pyflink_tensair.processes`)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from typing import List, Optional

from .. import processes
from ..errors import ClusterError
from ..validation import require_int
from ..waiting import WaitTimeout, wait_until
from .configuration import flink_environment, flink_home, rest_url, write_config
from .rest import rest_get


def recorded_pids(folder: str) -> List[int]:
    """Every PID in the cluster's PID files (alive or not)."""
    pids = []
    for path in glob.glob(os.path.join(folder, "pids", "*.pid")):
        with open(path) as f:
            pids += [int(line) for line in f if line.strip().isdigit()]
    return pids


def require_running(folder: str) -> None:
    """Raises ClusterError unless ``folder`` holds a cluster this module started and still runs:
    ``flink run`` against nothing fails with a logging error that says nothing of the cause."""
    if not os.path.exists(os.path.join(folder, "conf", "config.yaml")) or not any(map(processes.alive, recorded_pids(folder))):
        raise ClusterError(f"no running cluster in {folder!r}: start one with 'python -m pyflink_tensair.cluster start "
                           f"--dir {folder}' (or pass the --dir of the one you started)")


def start(folder: str, *, taskmanagers: int = 2, slots: int = 2, rest_port: int = 18081, rpc_port: int = 16123,
          timeout: float = 90.0, metrics_fetcher_interval_ms: int = 1000) -> str:
    """Starts a JobManager and ``taskmanagers`` TaskManagers; returns the REST URL once all registered.
    ``metrics_fetcher_interval_ms``: see :func:`~.configuration.write_config`."""
    require_int("taskmanagers", taskmanagers, 1)
    require_int("slots", slots, 1)
    folder = os.path.abspath(folder)
    if any(processes.alive(pid) for pid in recorded_pids(folder)):
        raise ClusterError(f"a cluster recorded in {folder}/pids is still running: stop it first")
    for path in glob.glob(os.path.join(folder, "pids", "*.pid")):
        os.remove(path)
    write_config(folder, taskmanagers=taskmanagers, slots=slots, rest_port=rest_port, rpc_port=rpc_port,
                 metrics_fetcher_interval_ms=metrics_fetcher_interval_ms)
    env = flink_environment(folder)
    home = flink_home()
    subprocess.run(["bash", os.path.join(home, "bin", "jobmanager.sh"), "start"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    for _ in range(taskmanagers):
        subprocess.run(["bash", os.path.join(home, "bin", "taskmanager.sh"), "start"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    url = rest_url(folder)

    def registered() -> bool:
        try:
            return rest_get(url + "/overview").get("taskmanagers") == taskmanagers
        except OSError:
            return False

    try:
        wait_until(registered, timeout, interval_s=0.5, what=f"{taskmanagers} TaskManagers to register")
    except WaitTimeout:
        stop(folder)
        raise ClusterError(f"the cluster did not come up within {timeout:.0f} s; logs in {folder}/log") from None
    return url


def stop(folder: str, timeout: float = 30.0) -> List[int]:
    """Stops every process recorded in the cluster's PID files (SIGTERM, then SIGKILL)."""
    folder = os.path.abspath(folder)
    pids = recorded_pids(folder)
    processes.terminate(pids, timeout)
    for path in glob.glob(os.path.join(folder, "pids", "*.pid")):
        os.remove(path)
    return pids


def taskmanager_pids(folder: str) -> List[int]:
    """The PIDs of the cluster's TaskManagers that are alive."""
    paths = glob.glob(os.path.join(os.path.abspath(folder), "pids", "*taskexecutor*.pid"))
    pids = []
    for path in paths:
        with open(path) as f:
            pids += [int(line) for line in f if line.strip().isdigit() and processes.alive(int(line))]
    return pids


def kill_taskmanager(folder: str, pid: Optional[int] = None) -> List[int]:
    """Kills TaskManager ``pid`` (default: the first one alive) and its Python workers with
    SIGKILL, as a crashed machine would end; returns the PIDs killed (the TaskManager first).
    A job with checkpoints then restarts from its last one on the slots that remain."""
    alive = taskmanager_pids(folder)
    if pid is None:
        if not alive:
            raise ClusterError(f"no TaskManager of the cluster in {folder} is alive")
        pid = alive[0]
    elif pid not in alive:
        raise ClusterError(f"{pid} is not a live TaskManager of the cluster in {folder}: {alive}")
    victims = processes.tree([pid])  # the TaskManager first
    processes.kill(victims)
    return victims


def add_taskmanager(folder: str, timeout: float = 90.0) -> int:
    """Starts one more TaskManager (e.g. to replace a lost one); returns its PID once the
    JobManager lists at least as many TaskManagers as are alive."""
    folder = os.path.abspath(folder)
    before = set(taskmanager_pids(folder))
    url = rest_url(folder)
    subprocess.run(["bash", os.path.join(flink_home(), "bin", "taskmanager.sh"), "start"], env=flink_environment(folder),
                   check=True, stdout=subprocess.DEVNULL)

    def new_registered() -> Optional[int]:
        alive = taskmanager_pids(folder)
        new = set(alive) - before
        # equal, not at least: a killed TaskManager stays listed until its heartbeats time out
        if new and rest_get(url + "/overview").get("taskmanagers", 0) == len(alive):
            return new.pop()
        return None

    try:
        return wait_until(new_registered, timeout, interval_s=0.5, what="the new TaskManager to register")
    except WaitTimeout:
        raise ClusterError(f"the new TaskManager did not register within {timeout:.0f} s; logs in {folder}/log") from None


def ensure_taskmanagers(folder: str, count: int, timeout: float = 90.0) -> List[int]:
    """Starts TaskManagers until ``count`` are alive; returns the PIDs it started.

    A supervisor's job (Kubernetes, YARN and systemd replace a dead TaskManager by themselves).
    Here it is also the work-around for a Beam bug in Flink 2.3: when a job fails over, a
    TaskManager whose Python tasks are cancelled can die too ("FATAL - exception in exception
    handler of task ... Reference count must not be negative", Beam's DefaultJobBundleFactory).
    """
    started = []
    while len(taskmanager_pids(folder)) < count:
        started.append(add_taskmanager(folder, timeout))
    return started


def await_ready(folder: str, taskmanagers: int, timeout: float = 90.0) -> None:
    """Starts TaskManagers until ``taskmanagers`` are alive, then waits until the JobManager lists
    exactly those and every slot is free: a job submitted next is deployed onto live TaskManagers
    only (one killed a moment ago stays listed until its heartbeats time out) and gets every slot.

    Example (what the cluster tests do before each test)::

        await_ready(".flink/cluster", 2)
    """
    ensure_taskmanagers(folder, taskmanagers, timeout)
    url = rest_url(folder)

    def ready() -> bool:
        if len(taskmanager_pids(folder)) < taskmanagers:  # one died meanwhile (the Beam bug above): replaced
            ensure_taskmanagers(folder, taskmanagers, timeout)
        overview = rest_get(url + "/overview")
        return (overview.get("taskmanagers") == len(taskmanager_pids(folder)) == taskmanagers
                and overview.get("slots-available") == overview.get("slots-total"))

    try:
        wait_until(ready, timeout, interval_s=0.5, what="every TaskManager registered and every slot free")
    except WaitTimeout:
        overview = rest_get(url + "/overview")
        raise ClusterError(f"the cluster in {folder} is not ready after {timeout:.0f} s: "
                           f"{overview.get('taskmanagers')} TaskManagers listed, {len(taskmanager_pids(folder))} alive, "
                           f"{overview.get('slots-available')} of {overview.get('slots-total')} slots free, "
                           f"{overview.get('jobs-running')} jobs running") from None


def await_failover(folder: str, job_id: str, taskmanagers: int = 2, timeout: float = 180.0) -> None:
    """After a TaskManager died: replaces every TaskManager that dies (:func:`ensure_taskmanagers`)
    until the job has restored a checkpoint and runs again with every task running, or has
    finished. Raises ``RuntimeError`` if it ends unrestored or ``TimeoutError`` after ``timeout``.

    The failover cancels the surviving TaskManagers' tasks, which can kill them too: only a
    restarted job with every task running says it did not."""
    url = rest_url(folder)
    deadline = time.time() + timeout
    while True:
        ensure_taskmanagers(folder, taskmanagers)
        restored = rest_get(f"{url}/jobs/{job_id}/checkpoints")["latest"]["restored"]
        job = rest_get(f"{url}/jobs/{job_id}")
        if restored is None and job["state"] in ("FINISHED", "FAILED", "CANCELED"):
            raise RuntimeError(f"job {job_id} ended {job['state']} without restoring a checkpoint")
        if restored is not None and (job["state"] == "FINISHED" or (
                job["state"] == "RUNNING" and all(v["status"] in ("RUNNING", "FINISHED") for v in job["vertices"]))):
            return
        if time.time() > deadline:
            raise TimeoutError(f"job {job_id} did not run again from a checkpoint within {timeout:.0f} s "
                               f"(state {job['state']}, restored {restored})")
        time.sleep(0.5)


def submit(folder: str, script_args: List[str], *, detached: bool = False, timeout: Optional[float] = None,
           savepoint: Optional[str] = None) -> subprocess.CompletedProcess:
    """``flink run -py`` a job on the cluster with this interpreter; returns the finished process.
    ``savepoint``: start from this savepoint (or retained checkpoint) instead of from scratch."""
    folder = os.path.abspath(folder)
    require_running(folder)
    command = [os.path.join(flink_home(), "bin", "flink"), "run", *(["-d"] if detached else []),
               *(["-s", savepoint] if savepoint else []),
               "-pyclientexec", sys.executable, "-pyexec", sys.executable, "-py", *script_args]
    return subprocess.run(command, env=flink_environment(folder), capture_output=True, text=True, timeout=timeout)
