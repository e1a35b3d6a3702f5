"""A cluster's folder: its Flink configuration (``conf/config.yaml``), ``lib/``, and the
environment Flink's scripts and clients run with."""

from __future__ import annotations

import glob
import os
import shutil
import sys
from typing import Dict

import yaml

from ..config import LatencySettings

DEFAULT_DIR = ".flink"
LOCALHOST = "127.0.0.1"


def flink_home() -> str:
    """The Flink distribution inside the installed pyflink."""
    import pyflink

    return os.path.dirname(os.path.abspath(pyflink.__file__))


def _java_opts() -> str:
    """The JVM options of the package's own config (Java 17 needs its --add-opens)."""
    with open(os.path.join(flink_home(), "conf", "config.yaml"), encoding="utf-8") as f:
        for line in f:
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
        yaml.safe_dump(options, f, sort_keys=False, default_flow_style=False, width=10 ** 6)
    with open(os.path.join(conf, "workers"), "w") as f:
        f.write("\n".join([LOCALHOST] * taskmanagers) + "\n")
    with open(os.path.join(conf, "masters"), "w") as f:
        f.write(f"{LOCALHOST}:{rest_port}\n")
    return conf


def read_config(folder: str) -> dict:
    """The cluster's ``conf/config.yaml``."""
    with open(os.path.join(folder, "conf", "config.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def rest_url(folder: str) -> str:
    """The REST API of the cluster in ``folder``."""
    port = read_config(folder).get("rest.port")
    if port is None:
        raise RuntimeError(f"no rest.port in {folder}/conf/config.yaml")
    return f"http://{LOCALHOST}:{int(port)}"


# Set in a process that has hosted PyFlink's loopback workers, or by its in-process gateway
# (pyflink's find_flink_home writes FLINK_HOME and the FLINK_*_DIR variables into os.environ): a
# child client finds its own Flink, as it would from a user's shell.
_PYFLINK_PROCESS_VARIABLES = ("PYFLINK_GATEWAY_DISABLED", "_python_worker_execution_mode", "PYFLINK_GATEWAY_PORT",
                              "FLINK_HOME", "FLINK_LIB_DIR", "FLINK_OPT_DIR", "FLINK_PLUGINS_DIR", "FLINK_CONF_DIR")


def client_environment() -> Dict[str, str]:
    """This process's environment for a child PyFlink client: less what PyFlink set in this
    process, and less an empty ``JAVA_HOME`` (pyflink would run ``bin/java``)."""
    return {k: v for k, v in os.environ.items()
            if k not in _PYFLINK_PROCESS_VARIABLES and not (k == "JAVA_HOME" and not v)}


def flink_environment(folder: str) -> Dict[str, str]:
    """The environment Flink's scripts and ``flink run`` need for the cluster in ``folder``."""
    env = client_environment()
    env.update(FLINK_HOME=flink_home(), FLINK_CONF_DIR=os.path.join(folder, "conf"),
               FLINK_PID_DIR=os.path.join(folder, "pids"), FLINK_LOG_DIR=os.path.join(folder, "log"),
               PYFLINK_CLIENT_EXECUTABLE=sys.executable)
    if os.path.isdir(os.path.join(folder, "lib")):
        env["FLINK_LIB_DIR"] = os.path.join(folder, "lib")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env
