"""A standalone Flink cluster started from the pip package, bound to 127.0.0.1, stopped by PID.

    python -m pyflink_tensair.cluster start --dir .flink --taskmanagers 2
    python -m pyflink_tensair.cluster submit --dir .flink -- jobs/quickstart.py --replicas 2
    python -m pyflink_tensair.cluster stop-with-savepoint --dir .flink     # prints the savepoint's path
    python -m pyflink_tensair.cluster resume --dir .flink --savepoint PATH -- jobs/quickstart.py --replicas 2
    python -m pyflink_tensair.cluster stop --dir .flink

The cluster keeps its configuration, logs and PID files under ``--dir``; ``stop`` kills exactly
the PIDs recorded there (never processes found by name). ``submit`` runs ``flink run -py`` with
this cluster's configuration and the current Python interpreter.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Dict, Iterable, List

from .config import LatencySettings
from .errors import ClusterError, TensairError

DEFAULT_DIR = ".flink"
LOCALHOST = "127.0.0.1"


def flink_home() -> str:
    import pyflink

    return os.path.dirname(os.path.abspath(pyflink.__file__))


def _java_opts() -> str:
    """The JVM options of the package's own config (Java 17 needs its --add-opens)."""
    text = open(os.path.join(flink_home(), "conf", "config.yaml"), encoding="utf-8").read()
    for line in text.splitlines():
        if line.strip().startswith("all:") and "--add-" in line:
            return line.split("all:", 1)[1].strip()
    return ""


def _link_lib(folder: str) -> str:
    """``folder/lib``: the package's jars and its ``opt/flink-python`` jar (links). Thread-mode
    Python operators need PEMJA's classes loaded once per TaskManager: shipped with each job
    instead, a second job's PEMJA cannot load its native library, already loaded by the first
    job's class loader (``NoSuchFieldException: loadedLibraryNames``)."""
    lib = os.path.join(folder, "lib")
    os.makedirs(lib, exist_ok=True)
    jars = glob.glob(os.path.join(flink_home(), "lib", "*.jar")) + glob.glob(os.path.join(flink_home(), "opt", "flink-python*.jar"))
    for jar in jars:
        link = os.path.join(lib, os.path.basename(jar))
        if not os.path.lexists(link):
            os.symlink(jar, link)
    return lib


def write_config(folder: str, *, taskmanagers: int, slots: int, rest_port: int, rpc_port: int,
                 metrics_fetcher_interval_ms: int = 1000) -> str:
    """Writes the cluster's ``conf/`` (and links its ``lib/``); returns the ``conf`` folder.

    ``metrics_fetcher_interval_ms``: how often, at most, the REST server asks the TaskManagers for
    their metrics (``metrics.fetcher.update-interval``); 0 asks on every metrics query."""
    if not isinstance(metrics_fetcher_interval_ms, int) or metrics_fetcher_interval_ms < 0:
        raise ValueError(f"metrics_fetcher_interval_ms must be an int >= 0, got {metrics_fetcher_interval_ms!r}")
    conf = os.path.join(folder, "conf")
    for sub in ("conf", "pids", "log"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    _link_lib(folder)
    for name in glob.glob(os.path.join(flink_home(), "conf", "log*")):
        shutil.copy(name, conf)
    options = {
        "env.java.opts.all": _java_opts(),
        "env.pid.dir": os.path.join(folder, "pids"),
        "env.log.dir": os.path.join(folder, "log"),
        "jobmanager.bind-host": LOCALHOST,
        "jobmanager.rpc.address": LOCALHOST,
        "jobmanager.rpc.port": rpc_port,
        "jobmanager.memory.process.size": "1024m",
        "taskmanager.bind-host": LOCALHOST,
        "taskmanager.host": LOCALHOST,
        "taskmanager.numberOfTaskSlots": slots,
        # Sized for the models' messages, not Flink's defaults: the Beam gRPC channel to the Python
        # workers buffers records in direct (task off-heap) memory; with word2vec's 6.6 MB gradients
        # a 2 GB TaskManager ran out of it and the job hung with every process idle. The heap holds
        # the loop's queued messages and each replica's final model (120 MB for word2vec).
        "taskmanager.memory.task.heap.size": "2048m",
        "taskmanager.memory.task.off-heap.size": "1024m",
        "taskmanager.memory.managed.size": "1024m",
        "taskmanager.memory.segment-size": f"{LatencySettings().network_buffer_kb}kb",  # see LatencySettings
        "taskmanager.rpc.port": f"{rpc_port + 10}-{rpc_port + 30}",
        "taskmanager.data.port": 0,
        "taskmanager.load-balance.mode": "slots",
        "blob.server.port": f"{rpc_port + 40}-{rpc_port + 60}",
        "rest.address": LOCALHOST,
        "rest.bind-address": LOCALHOST,
        "rest.port": rest_port,
        "metrics.fetcher.update-interval": metrics_fetcher_interval_ms,
        # A lost TaskManager is noticed by its missed heartbeats: 15 s, not Flink's 50 s, so that a
        # restart does not first deploy onto the dead one's slots and use up a restart attempt.
        "heartbeat.interval": 3000,
        "heartbeat.timeout": 15000,
        "parallelism.default": 1,
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "classloader.parent-first-patterns.additional": "pemja.",  # PEMJA from lib/, see _link_lib
    }
    with open(os.path.join(conf, "config.yaml"), "w", encoding="utf-8") as f:
        for key, value in options.items():
            f.write(f"{key}: {json.dumps(value) if isinstance(value, str) else value}\n")
    with open(os.path.join(conf, "workers"), "w") as f:
        f.write("\n".join([LOCALHOST] * taskmanagers) + "\n")
    with open(os.path.join(conf, "masters"), "w") as f:
        f.write(f"{LOCALHOST}:{rest_port}\n")
    return conf


# Set in a process that has hosted PyFlink's loopback workers; a child client must not inherit them.
_PYFLINK_WORKER_VARIABLES = ("PYFLINK_GATEWAY_DISABLED", "_python_worker_execution_mode")


def client_environment() -> Dict[str, str]:
    """This process's environment, less PyFlink's worker-only variables, for a child PyFlink client."""
    return {k: v for k, v in os.environ.items() if k not in _PYFLINK_WORKER_VARIABLES}


def _environment(folder: str) -> Dict[str, str]:
    env = client_environment()
    env.update(FLINK_HOME=flink_home(), FLINK_CONF_DIR=os.path.join(folder, "conf"),
               FLINK_PID_DIR=os.path.join(folder, "pids"), FLINK_LOG_DIR=os.path.join(folder, "log"),
               PYFLINK_CLIENT_EXECUTABLE=sys.executable)
    if os.path.isdir(os.path.join(folder, "lib")):
        env["FLINK_LIB_DIR"] = os.path.join(folder, "lib")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def rest_url(folder: str) -> str:
    for line in open(os.path.join(folder, "conf", "config.yaml"), encoding="utf-8"):
        if line.startswith("rest.port:"):
            return f"http://{LOCALHOST}:{int(line.split(':', 1)[1])}"
    raise RuntimeError(f"no rest.port in {folder}/conf/config.yaml")


def rest_get(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


def rest_post(url: str, body: dict, timeout: float = 5.0):
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as err:  # Flink says why in its body's "errors"
        detail = err.read().decode("utf-8", "replace")
        try:
            detail = "; ".join(str(e).splitlines()[0] for e in json.loads(detail).get("errors", [])) or detail
        except ValueError:
            pass
        raise RuntimeError(f"Flink refused POST {url} (HTTP {err.code}): {detail}") from None


def _the_running_job(folder: str) -> str:
    """The one running job's id; an error naming them all if several run."""
    running = [j["jid"] for j in rest_get(f"{rest_url(folder)}/jobs/overview")["jobs"] if j["state"] == "RUNNING"]
    if len(running) != 1:
        raise RuntimeError(f"{len(running)} jobs are running on the cluster in {folder} ({', '.join(running) or 'none'}): "
                           "name one with --job JOBID")
    return running[0]


def require_running(folder: str) -> None:
    """Raises ClusterError unless ``folder`` holds a cluster this module started and still runs:
    ``flink run`` against nothing fails with a logging error that says nothing of the cause."""
    if not os.path.exists(os.path.join(folder, "conf", "config.yaml")) or not any(map(_alive, recorded_pids(folder))):
        raise ClusterError(f"no running cluster in {folder!r}: start one with 'python -m pyflink_tensair.cluster start "
                           f"--dir {folder}' (or pass the --dir of the one you started)")


def recorded_pids(folder: str) -> List[int]:
    pids = []
    for path in glob.glob(os.path.join(folder, "pids", "*.pid")):
        pids += [int(line) for line in open(path) if line.strip().isdigit()]
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited already
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def start(folder: str, *, taskmanagers: int = 2, slots: int = 2, rest_port: int = 18081, rpc_port: int = 16123,
          timeout: float = 90.0, metrics_fetcher_interval_ms: int = 1000) -> str:
    """Starts a JobManager and ``taskmanagers`` TaskManagers; returns the REST URL once all registered.
    ``metrics_fetcher_interval_ms``: see :func:`write_config`."""
    folder = os.path.abspath(folder)
    if any(_alive(pid) for pid in recorded_pids(folder)):
        raise RuntimeError(f"a cluster recorded in {folder}/pids is still running: stop it first")
    for path in glob.glob(os.path.join(folder, "pids", "*.pid")):
        os.remove(path)
    write_config(folder, taskmanagers=taskmanagers, slots=slots, rest_port=rest_port, rpc_port=rpc_port,
                 metrics_fetcher_interval_ms=metrics_fetcher_interval_ms)
    env = _environment(folder)
    home = flink_home()
    subprocess.run(["bash", os.path.join(home, "bin", "jobmanager.sh"), "start"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    for _ in range(taskmanagers):
        subprocess.run(["bash", os.path.join(home, "bin", "taskmanager.sh"), "start"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    url = rest_url(folder)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if rest_get(url + "/overview").get("taskmanagers") == taskmanagers:
                return url
        except OSError:
            pass
        time.sleep(0.5)
    stop(folder)
    raise RuntimeError(f"the cluster did not come up within {timeout:.0f} s; logs in {folder}/log")


def stop(folder: str, timeout: float = 30.0) -> List[int]:
    """Stops every process recorded in the cluster's PID files (SIGTERM, then SIGKILL)."""
    folder = os.path.abspath(folder)
    pids = recorded_pids(folder)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.time() + timeout
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    for path in glob.glob(os.path.join(folder, "pids", "*.pid")):
        os.remove(path)
    return pids


def running_job(folder: str, timeout: float = 180.0) -> str:
    """The id of a job running on the cluster, once one is (e.g. one submitted by another thread)."""
    url = rest_url(folder)
    deadline = time.time() + timeout
    while time.time() < deadline:
        running = [j for j in rest_get(f"{url}/jobs/overview")["jobs"] if j["state"] == "RUNNING"]
        if running:
            return running[0]["jid"]
        time.sleep(0.5)
    raise RuntimeError(f"no job running on the cluster in {folder} after {timeout:.0f} s")


def taskmanager_pids(folder: str) -> List[int]:
    """The PIDs of the cluster's TaskManagers that are alive."""
    paths = glob.glob(os.path.join(os.path.abspath(folder), "pids", "*taskexecutor*.pid"))
    return [int(line) for path in paths for line in open(path) if line.strip().isdigit() and _alive(int(line))]


def _children(pid: int) -> Iterable[int]:
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                yield from (int(c) for c in f.read().split())
    except OSError:
        return


def process_tree(roots) -> Iterable[int]:
    """``roots`` and all their descendants (each once), from /proc (Linux)."""
    seen, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        yield pid
        todo.extend(_children(pid))


def kill_taskmanager(folder: str, pid: int = None) -> List[int]:
    """Kills TaskManager ``pid`` (default: the first one alive) and its Python workers with
    SIGKILL, as a crashed machine would end; returns the PIDs killed (the TaskManager first).
    A job with checkpoints then restarts from its last one on the slots that remain."""
    alive = taskmanager_pids(folder)
    if pid is None:
        if not alive:
            raise RuntimeError(f"no TaskManager of the cluster in {folder} is alive")
        pid = alive[0]
    elif pid not in alive:
        raise RuntimeError(f"{pid} is not a live TaskManager of the cluster in {folder}: {alive}")
    victims = list(process_tree([pid]))  # the TaskManager first
    for victim in victims:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return victims


def add_taskmanager(folder: str, timeout: float = 90.0) -> int:
    """Starts one more TaskManager (e.g. to replace a lost one); returns its PID once the
    JobManager lists at least as many TaskManagers as are alive."""
    folder = os.path.abspath(folder)
    before = set(taskmanager_pids(folder))
    url = rest_url(folder)
    subprocess.run(["bash", os.path.join(flink_home(), "bin", "taskmanager.sh"), "start"], env=_environment(folder),
                   check=True, stdout=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline:
        alive = taskmanager_pids(folder)
        new = set(alive) - before
        if new and rest_get(url + "/overview").get("taskmanagers", 0) >= len(alive):
            return new.pop()
        time.sleep(0.5)
    raise RuntimeError(f"the new TaskManager did not register within {timeout:.0f} s; logs in {folder}/log")


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


def submit(folder: str, script_args: List[str], *, detached: bool = False, timeout: float = None,
           savepoint: str = None) -> subprocess.CompletedProcess:
    """``flink run -py`` a job on the cluster with this interpreter; returns the finished process.
    ``savepoint``: start from this savepoint (or retained checkpoint) instead of from scratch."""
    folder = os.path.abspath(folder)
    require_running(folder)
    command = [os.path.join(flink_home(), "bin", "flink"), "run", *(["-d"] if detached else []),
               *(["-s", savepoint] if savepoint else []),
               "-pyclientexec", sys.executable, "-pyexec", sys.executable, "-py", *script_args]
    return subprocess.run(command, env=_environment(folder), capture_output=True, text=True, timeout=timeout)


# A savepoint that reaches a task while it finishes (e.g. the one-shot start-markers source) is
# declined, or refused by its TaskManager if the task has just gone; the job runs on, and the
# same savepoint a moment later succeeds.
_TRANSIENT_DECLINES = ("task is closing", "checkpoint request for unknown task")


class _SavepointDeclined(RuntimeError):
    pass


def _await_savepoint(url: str, job_id: str, trigger: dict, deadline: float) -> str:
    while time.time() < deadline:
        status = rest_get(f"{url}/jobs/{job_id}/savepoints/{trigger['request-id']}")
        if status["status"]["id"] == "COMPLETED":
            operation = status.get("operation", {})
            if "location" in operation:
                return operation["location"]
            cause = operation.get("failure-cause", {})
            message = (cause.get("stack-trace") or cause.get("class")) if isinstance(cause, dict) else cause  # its first line says why
            line = str(message).splitlines()[0] if message else str(operation)
            error = _SavepointDeclined if any(d in str(message) for d in _TRANSIENT_DECLINES) else RuntimeError
            raise error(f"the savepoint of job {job_id} failed: {line}")
        time.sleep(0.5)
    raise RuntimeError(f"the savepoint of job {job_id} did not complete in time")


def _savepoint(url: str, job_id: str, path: str, body: dict, timeout: float) -> str:
    """Triggers a savepoint (``path``: its REST resource) and waits for it, again while a task
    that is finishing declines it and the job still runs."""
    deadline = time.time() + timeout
    while True:
        try:
            return _await_savepoint(url, job_id, rest_post(f"{url}/jobs/{job_id}/{path}", body), deadline)
        except _SavepointDeclined:
            if time.time() + 1 >= deadline or rest_get(f"{url}/jobs/{job_id}")["state"] != "RUNNING":
                raise
            time.sleep(1)


def savepoint(folder: str, target_dir: str, job_id: str = None, timeout: float = 600.0) -> str:
    """Takes a savepoint of a running job (it keeps running); returns the savepoint's path."""
    url, job_id = rest_url(folder), job_id or _the_running_job(folder)
    return _savepoint(url, job_id, "savepoints", {"target-directory": os.path.abspath(target_dir), "cancel-job": False},
                      timeout)


def stop_with_savepoint(folder: str, target_dir: str, job_id: str = None, timeout: float = 600.0) -> str:
    """Stops a running job with a savepoint, without draining (no end-of-input: the replicas stop
    where they are instead of finishing, and ``resume`` continues them); returns its path."""
    url, job_id = rest_url(folder), job_id or _the_running_job(folder)
    return _savepoint(url, job_id, "stop", {"targetDirectory": os.path.abspath(target_dir), "drain": False}, timeout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyflink_tensair.cluster", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="start a JobManager and TaskManagers")
    p_start.add_argument("--taskmanagers", type=int, default=2)
    p_start.add_argument("--slots", type=int, default=2, help="slots per TaskManager")
    p_start.add_argument("--rest-port", type=int, default=18081)
    p_start.add_argument("--rpc-port", type=int, default=16123)
    p_start.add_argument("--metrics-fetcher-interval-ms", type=int, default=1000,
                         help="how often, at most, the REST API asks the TaskManagers for metrics (0: on every query)")
    p_stop = sub.add_parser("stop", help="stop the processes recorded in the PID files")
    p_kill = sub.add_parser("kill-taskmanager", help="SIGKILL a TaskManager and its Python workers (a crash)")
    p_kill.add_argument("--pid", type=int, help="which TaskManager (default: the first one alive)")
    p_add = sub.add_parser("add-taskmanager", help="start one more TaskManager")
    p_submit = sub.add_parser("submit", help="flink run -py SCRIPT [ARGS...] on this cluster")
    p_submit.add_argument("--detached", action="store_true")
    p_submit.add_argument("script_args", nargs=argparse.REMAINDER)
    p_save = sub.add_parser("savepoint", help="take a savepoint of the running job (it keeps running)")
    p_halt = sub.add_parser("stop-with-savepoint", help="stop the running job with a savepoint, without draining")
    for p in (p_save, p_halt):
        p.add_argument("--job", help="the job's id (default: the one running)")
        p.add_argument("--target", default="savepoints", help="the folder savepoints go to (default: ./savepoints)")
    p_resume = sub.add_parser("resume", help="flink run -py SCRIPT [ARGS...] from a savepoint")
    p_resume.add_argument("--savepoint", required=True, help="the path savepoint/stop-with-savepoint printed")
    p_resume.add_argument("--detached", action="store_true")
    p_resume.add_argument("script_args", nargs=argparse.REMAINDER)
    for p in (p_start, p_stop, p_submit, p_kill, p_add, p_save, p_halt, p_resume):
        p.add_argument("--dir", default=DEFAULT_DIR, help=f"the cluster's folder (default: {DEFAULT_DIR})")
    args = parser.parse_args(argv)
    try:
        return _run_command(args)
    except TensairError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _run_command(args) -> int:
    if args.command == "start":
        url = start(args.dir, taskmanagers=args.taskmanagers, slots=args.slots, rest_port=args.rest_port,
                    rpc_port=args.rpc_port, metrics_fetcher_interval_ms=args.metrics_fetcher_interval_ms)
        print(f"cluster up: {url} (PIDs {recorded_pids(os.path.abspath(args.dir))})")
    elif args.command == "stop":
        print(f"stopped PIDs {stop(args.dir)}")
    elif args.command == "kill-taskmanager":
        print(f"killed PIDs {kill_taskmanager(args.dir, args.pid)}")
    elif args.command == "add-taskmanager":
        print(f"TaskManager up: PID {add_taskmanager(args.dir)}")
    elif args.command in ("savepoint", "stop-with-savepoint"):
        take = savepoint if args.command == "savepoint" else stop_with_savepoint
        print(take(args.dir, args.target, job_id=args.job))
    else:
        script_args = [a for a in args.script_args if a != "--"]
        result = submit(args.dir, script_args, detached=args.detached, savepoint=getattr(args, "savepoint", None))
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        return result.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
