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

import functools
import time
from dataclasses import dataclass
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


@dataclass
class HostStats:
    """The replica function's own profile: its time in callbacks and codecs, its last snapshot."""

    callback_s: float = 0.0  # inside the Flink callbacks (with an inline trainer: the model too)
    codec_s: float = 0.0  # of it, decoding inputs and encoding outputs
    snapshot_bytes: int = 0  # the last snapshot's size,
    snapshot_written: int = 0  # the bytes of it that changed,
    snapshot_ms: int = 0  # and how long the trainer's drain and the hand-over to PyFlink took


def replica_gauges(group, function) -> ReplicaMetrics:
    """The replica's metrics in ``group`` (``tensair``), read from ``function`` (a
    :class:`~.replica_function.ReplicaFunction`: its ``replica``, ``last_metrics``, ``stats`` and
    ``watch``). Integers only: fractional values are scaled (``loss_x1e6 = loss * 1e6``)."""
    from ..core.counters import GAUGES

    def last(read, scale=1):
        return lambda: int(round((read(function.last_metrics) or 0) * scale)) if function.last_metrics else 0

    def replica(read, none=0):
        return lambda: read(function.replica) if function.replica is not None else none

    # this replica's last own drift: the batch that showed it, when (epoch ms), and the
    # detector's test statistic against its threshold (-1 / 0 before the first drift)
    def drift(read, scale, none):
        def value():
            r = function.replica
            found = read(r.modes) if r is not None and r.modes.last_drift is not None else None
            return none if found is None or found != found else int(round(found * scale))
        return value

    stats = function.stats
    read = {
        "loss_x1e6": last(lambda m: m.loss, 1e6),
        "accuracy_x1e6": last(lambda m: m.accuracy, 1e6),
        "model_version": last(lambda m: m.model_version),
        "local_step": last(lambda m: m.local_step),
        "staleness": last(lambda m: m.staleness),
        "batches_per_s_x1000": last(lambda m: m.batches_per_s, 1e3),
        "held_batches": last(lambda m: m.held_batches),
        "snapshot_bytes": lambda: stats.snapshot_bytes,
        "snapshot_written_bytes": lambda: stats.snapshot_written,
        # the operator's own checkpoint_pause_ms adds the commit of the snapshot's writes to Flink's state
        "snapshot_ms": lambda: stats.snapshot_ms,
        "export_failures": lambda: function.watch.export_failures if function.watch is not None else 0,
        "unacked_messages": replica(lambda r: r.unacked_messages),
        # Mode.AUTO: 1 while training; drifts this replica's detector found
        "training": replica(lambda r: int(r.training)),
        "drifts_detected": replica(lambda r: r.modes.policy.drifts if r.modes.policy else 0),
        "last_drift_batch": drift(lambda m: m.last_drift.batch_id, 1, -1),
        "last_drift_time_ms": drift(lambda m: m.last_drift.time, 1e3, -1),
        "last_drift_statistic_x1e6": drift(lambda m: m.policy.last_drift.test_statistic()[0], 1e6, 0),
        "last_drift_threshold_x1e6": drift(lambda m: m.policy.last_drift.test_statistic()[1], 1e6, 0),
    }
    for counter in GAUGES:  # the counters the table marks (core.counters): served batches, Guards' counts
        read[counter] = replica(functools.partial(lambda name, r: getattr(r.counts, name), counter))
    return ReplicaMetrics(group, read)
