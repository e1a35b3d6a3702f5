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

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# Loaded on first use: importing a package must not import its submodules (see pyflink_tensair._lazy).
_NAMES = {
    "DEFAULT_DIR": ".configuration", "LOCALHOST": ".configuration", "flink_home": ".configuration",
    "write_config": ".configuration", "read_config": ".configuration", "rest_url": ".configuration",
    "client_environment": ".configuration", "flink_environment": ".configuration",
    "rest_get": ".rest", "rest_post": ".rest", "running_job": ".rest", "savepoint": ".rest",
    "stop_with_savepoint": ".rest", "job_report": ".rest",
    "recorded_pids": ".lifecycle", "require_running": ".lifecycle", "start": ".lifecycle", "stop": ".lifecycle",
    "taskmanager_pids": ".lifecycle", "kill_taskmanager": ".lifecycle", "add_taskmanager": ".lifecycle",
    "ensure_taskmanagers": ".lifecycle", "await_failover": ".lifecycle", "await_ready": ".lifecycle", "submit": ".lifecycle",
    "main": ".cli",
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from .cli import main
    from .configuration import (DEFAULT_DIR, LOCALHOST, client_environment, flink_environment, flink_home,
                                read_config, rest_url, write_config)
    from .lifecycle import (add_taskmanager, await_failover, await_ready, ensure_taskmanagers, kill_taskmanager, recorded_pids,
                            require_running, start, stop, submit, taskmanager_pids)
    from .rest import job_report, rest_get, rest_post, running_job, savepoint, stop_with_savepoint

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
