"""The processes this package starts and stops (a Flink cluster, a Kafka broker): always by PID,
never found by name.

Example::

    >>> import os
    >>> alive(os.getpid()), alive(2 ** 22 + 1)
    (True, False)
"""

from __future__ import annotations

import os
import signal
from typing import Iterable, List, Optional

import psutil


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has exited already)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def command_line(pid: int) -> Optional[List[str]]:
    """``pid``'s command line, or ``None`` if it is gone or not ours to read."""
    try:
        return psutil.Process(pid).cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def tree(roots: Iterable[int]) -> List[int]:
    """``roots`` and all their descendants, each once, every root before its descendants."""
    seen: List[int] = []
    for root in roots:
        if root in seen:
            continue
        seen.append(root)
        try:
            descendants = psutil.Process(root).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        seen += [child.pid for child in descendants if child.pid not in seen]
    return seen


def kill(pids: Iterable[int]) -> None:
    """SIGKILL each of ``pids`` that still runs (a crash, not a shutdown)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def terminate(pids: Iterable[int], timeout: float = 30.0) -> None:
    """SIGTERM each of ``pids`` that runs, wait up to ``timeout`` seconds for all of them, then
    SIGKILL the rest; children of this process are reaped."""
    running = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            process.terminate()
            running.append(process)
        except psutil.NoSuchProcess:
            pass
    _, left = psutil.wait_procs(running, timeout=timeout)
    for process in left:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=5)
