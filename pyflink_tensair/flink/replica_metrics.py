"""The replica's values as Flink metrics, without a Python call from Flink's metric threads.

A PyFlink gauge is a Python callable. In process mode Beam calls it in the Python worker and sends
the value to Flink: safe. In thread mode PyFlink 2.3 registers a Java ``MetricGauge`` that calls the
callable through PEMJA with the task's own interpreter thread state, from whichever thread reads
metrics (the ``MetricQueryService`` behind the REST API and the web UI, a metrics reporter). That
call shares the task's thread state with the task thread, and once the operator has closed its
interpreter it enters a freed one: PEMJA's ``PyEval_AcquireThread`` on it kills the TaskManager
(``SIGSEGV ... take_gil``). Flink unregisters the gauge only later, when the task's metric group
closes; a metrics query in between crashes the process (docs/reliability.md, "Fixed").

:class:`ReplicaMetrics` therefore registers callables as gauges only on PyFlink's process-mode
(Beam) metric group. Elsewhere (thread mode) it registers PyFlink's ``distribution``, which in
thread mode is Java's ``MetricDistribution``: a ``Gauge<Long>`` that holds the last value it was
given, read by Flink without Python. :meth:`ReplicaMetrics.publish`, called by the task thread
from its callbacks, reads the callables and hands over the values that changed. The metrics keep
their names and stay gauges.

Example, with a stand-in for a thread-mode metric group::

    >>> class Held:
    ...     def update(self, value): self.value = value
    >>> class Group:
    ...     def __init__(self): self.metrics = {}
    ...     def distribution(self, name): return self.metrics.setdefault(name, Held())
    >>> steps = [0]
    >>> group = Group()
    >>> metrics = ReplicaMetrics(group, {"local_step": lambda: steps[0]}, every_s=0)
    >>> metrics.pushed, group.metrics["local_step"].value
    (True, 0)
    >>> steps[0] = 7; metrics.publish(); group.metrics["local_step"].value
    7
"""

from __future__ import annotations

import time
from typing import Callable, Dict

# How often, at most, the task thread reads the values in its callbacks (``force`` bypasses it).
# Flink's REST API asks the TaskManagers once a second (metrics.fetcher.update-interval) and
# reporters every 10 s or more: 0.1 s keeps the metrics current at a negligible cost per callback.
PUBLISH_EVERY_S = 0.1

_BEAM_METRIC_GROUPS = "pyflink.fn_execution.metrics.process."  # process mode: gauges are read by Beam


def calls_gauges_from_the_python_worker(group) -> bool:
    """True for PyFlink's process-mode metric group, whose gauges Beam reads in the Python worker."""
    return type(group).__module__.startswith(_BEAM_METRIC_GROUPS)


class ReplicaMetrics:
    """Integer metrics named by ``read``'s keys in ``group``, each the value of its callable.

    On a process-mode group they are gauges; on any other group (thread mode) they are Java
    gauges that :meth:`publish` sets from the calling thread, which must be the task's thread
    (an operator callback, ``open`` or ``close``): never a thread of the function's own.
    """

    def __init__(self, group, read: Dict[str, Callable[[], int]], every_s: float = PUBLISH_EVERY_S):
        if every_s < 0:
            raise ValueError(f"every_s must be >= 0, got {every_s!r}")
        self._read = dict(read)
        self._every_s = every_s
        self.pushed = not calls_gauges_from_the_python_worker(group)
        self._held: Dict[str, object] = {}
        self._values: Dict[str, int] = {}
        self._next = 0.0
        if self.pushed:
            self._held = {name: group.distribution(name) for name in self._read}
            self.publish(force=True)
        else:
            for name, value in self._read.items():
                group.gauge(name, value)

    def publish(self, force: bool = False) -> None:
        """Hands the values that changed to Flink (thread mode; nothing to do in process mode).
        At most every ``every_s`` seconds unless ``force``. Call it from the task's thread only."""
        if not self.pushed:
            return
        now = time.monotonic()
        if not force and now < self._next:
            return
        self._next = now + self._every_s
        for name, read in self._read.items():
            value = int(read())
            if self._values.get(name) != value:
                self._held[name].update(value)
                self._values[name] = value
