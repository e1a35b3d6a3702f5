"""Peak memory of a process tree, sampled from /proc (Linux), grouped by kind of process."""

from __future__ import annotations

import os
import threading
from typing import Dict

from pyflink_tensair.processes import tree as process_tree


def _status(pid: int) -> Dict[str, str]:
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return {}


def _kind(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    if "java" in cmd.split(" ")[0]:
        return "jvm"
    if "python" in cmd:
        return "python_worker"  # the roots (the job's client) are told apart by the caller
    return "other"


class TreeSampler:
    """Calls ``sample()`` on entry, every ``every`` seconds on a thread of its own, and on exit;
    ``client`` (by default the first root) is the job's client."""

    def __init__(self, roots, every: float = 0.5, client: int = None):
        self._roots = list(roots)
        self._client = client if client is not None else (self._roots[0] if self._roots else None)
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _kind_of(self, pid: int) -> str:
        return "python_client" if pid == self._client else _kind(pid)

    def _run(self):
        while not self._stop.wait(self._every):
            self.sample()

    def __enter__(self):
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()


class PeakMemory(TreeSampler):
    """Samples the resident memory of ``roots`` and all their descendants every ``every`` seconds;
    ``peaks_mb()`` gives, per kind (``jvm``, ``python_worker``, ``python_client``), the largest peak
    resident size (VmHWM) of one process of that kind, in MiB.

    Example::

        >>> with PeakMemory([os.getpid()]) as memory:
        ...     pass
        >>> memory.peaks_mb()["python_client"] > 1
        True
    """

    def __init__(self, roots, every: float = 0.5, client: int = None):
        super().__init__(roots, every, client)
        self._peaks: Dict[int, tuple] = {}

    def sample(self) -> None:
        for pid in process_tree(self._roots):
            status = _status(pid)
            if "VmHWM" in status:
                kb = int(status["VmHWM"].split()[0])
                known, peak = self._peaks.get(pid, ("other", 0))
                kind = self._kind_of(pid)
                # a process seen between fork and exec has no command line yet: keep the best guess
                self._peaks[pid] = (kind if kind != "other" else known, max(kb, peak))

    def peaks_mb(self) -> Dict[str, float]:
        out: Dict[str, float] = {}
        for kind, kb in self._peaks.values():
            out[kind] = max(out.get(kind, 0.0), round(kb / 1024, 1))
        return out
