"""CPU time of a process tree over a window, sampled from /proc (Linux), grouped by kind of process.

Example::

    >>> import os, time
    >>> with ProcessCpu([os.getpid()], every=0.05) as cpu:
    ...     began = time.time(); _ = sum(i * i for i in range(2_000_000)); ended = time.time()
    >>> cpu.seconds_between(began, ended)["python_client"] > 0
    True
"""

from __future__ import annotations

import bisect
import os
import time
from typing import Dict, List, Tuple

from pyflink_tensair.processes import tree as process_tree

from .memory import TreeSampler

_TICK = os.sysconf("SC_CLK_TCK")


def stat_cpu_seconds(stat_path: str) -> float:
    """utime + stime of a ``/proc/.../stat`` file (a process's, or a thread's under ``task/``); -1 if gone."""
    try:
        with open(stat_path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return -1.0


def _cpu_seconds(pid: int) -> float:
    return stat_cpu_seconds(f"/proc/{pid}/stat")


class ProcessCpu(TreeSampler):
    """Samples the cumulative CPU time of ``roots`` and all their descendants every ``every``
    seconds; ``seconds_between(t0, t1)`` gives, per kind (``jvm``, ``python_worker``,
    ``python_client``), the CPU seconds used between two wall-clock times (``time.time()``)."""

    def __init__(self, roots, every: float = 0.25, client: int = None):
        super().__init__(roots, every, client)
        self._kinds: Dict[int, str] = {}
        self._samples: List[Tuple[float, Dict[str, float]]] = []
        self._last: Dict[int, float] = {}  # a process that ended keeps its last reading

    def sample(self) -> None:
        for pid in process_tree(self._roots):
            used = _cpu_seconds(pid)
            if used >= 0:
                self._last[pid] = used
                if self._kinds.get(pid, "other") == "other":
                    self._kinds[pid] = self._kind_of(pid)
        totals: Dict[str, float] = {}
        for pid, used in self._last.items():
            kind = self._kinds.get(pid, "other")
            totals[kind] = totals.get(kind, 0.0) + used
        self._samples.append((time.time(), totals))

    def seconds_between(self, t0: float, t1: float) -> Dict[str, float]:
        """CPU seconds per kind between the samples that bracket ``t0`` and ``t1``, scaled to the
        window's length (an average rate: sampled every ``every`` seconds)."""
        times = [t for t, _ in self._samples]
        i = max(0, bisect.bisect_right(times, t0) - 1)
        j = min(len(times) - 1, bisect.bisect_left(times, t1))
        if j <= i:
            return {}
        (ta, a), (tb, b) = self._samples[i], self._samples[j]
        scale = (t1 - t0) / (tb - ta)
        return {kind: round((b.get(kind, 0.0) - a.get(kind, 0.0)) * scale, 3) for kind in b}
