"""The replica's counters: one table, read by everything that lists them.

Each field of :class:`ReplicaCounters` is one counter; its metadata says where else it goes:

- ``total``: it adds up over the replicas (the job's totals): a replica that adopts old replicas'
  states after a rescale adds theirs (:meth:`ReplicaCounters.add_totals`);
- ``metric``: every :class:`~pyflink_tensair.core.events.Metrics` record carries it (its fields
  are made from this table, in this order);
- ``gauge``: the replica's function reports it as a Flink gauge of the same name;
- ``summed``: a run's summary (:mod:`~pyflink_tensair.core.summary`) sums it over the replicas.

Every counter is in a snapshot by name (``counters/<name>``, one int64 each; a flag as 0 or 1):
adding one is a line here. A snapshot without it restores the default; a name this release
does not know is ignored.

Example::

    >>> counts = ReplicaCounters(local_step=3, dead_letters=1)
    >>> ReplicaCounters.from_snapshot(counts.snapshot()) == counts
    True
    >>> [f.name for f in fields(ReplicaCounters) if f.metadata.get("gauge")]
    ['batches_served', 'dead_letters', 'messages_rejected', 'gradients_clipped', 'steps_skipped']
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Dict, Mapping, Tuple

import numpy as np

from ..errors import ProtocolError
from . import wire
from .gradients import dense_nbytes
from .messages import GradientMessage, WeightsMessage

PREFIX = "counters/"


def _counter(default: int = 0, *, total: bool = False, metric: bool = False, gauge: bool = False,
             summed: bool = False):
    return dataclasses.field(default=default, metadata={"total": total, "metric": metric, "gauge": gauge,
                                                        "summed": summed})


@dataclass
class ReplicaCounters:
    """What one replica has counted (see the module docstring for the columns)."""

    local_step: int = _counter()  # own steps trained
    model_version: int = _counter()  # changes of the model: own steps, peer updates applied, merges
    messages_sent: int = _counter(total=True, metric=True)
    bytes_sent: int = _counter(total=True, metric=True)  # tensor bytes on the wire
    dense_bytes_sent: int = _counter(total=True, metric=True)  # what they would take dense
    messages_applied: int = _counter(total=True, metric=True)  # peer gradient messages applied
    duplicates_dropped: int = _counter(total=True, metric=True, summed=True)  # repeats after a restore
    bound_overflows: int = _counter(total=True, metric=True, summed=True)  # batches trained beyond the bound
    messages_resent: int = _counter(total=True)  # after a restore
    batches_served: int = _counter(total=True, gauge=True)  # predicted without training (SERVE, or AUTO serving)
    # Guards: input set aside (batches, records, lines, peer messages), peer messages refused, peer
    # gradients scaled down to the norm bound, own steps whose gradient was not finite
    dead_letters: int = _counter(total=True, metric=True, gauge=True, summed=True)
    messages_rejected: int = _counter(total=True, metric=True, gauge=True, summed=True)
    gradients_clipped: int = _counter(total=True, metric=True, gauge=True, summed=True)
    steps_skipped: int = _counter(total=True, metric=True, gauge=True, summed=True)
    messages_while_serving: int = _counter(total=True)  # peer gradients and weights received while serving
    gradient_messages_sent: int = _counter(total=True, metric=True)  # of messages_sent: gradients only
    weights_mixed: int = _counter(total=True, metric=True)  # peers' weights averaged in (PeerUpdates.average_every)
    input_ended: bool = False
    done_sent: bool = False
    finished: bool = False

    def snapshot(self) -> Dict[str, np.ndarray]:
        """``counters/<name>`` entries, one int64 each."""
        return {PREFIX + f.name: np.array(int(getattr(self, f.name)), np.int64) for f in fields(self)}

    @classmethod
    def from_snapshot(cls, state: Mapping[str, np.ndarray]) -> "ReplicaCounters":
        """The counters of a snapshot (defaults where it has none)."""
        counts = cls()
        values = snapshot_counters(state)
        for f in fields(cls):
            if f.name in values:
                setattr(counts, f.name, bool(values[f.name]) if f.type in (bool, "bool") else values[f.name])
        return counts

    def add_totals(self, state: Mapping[str, np.ndarray]) -> None:
        """Adds an adopted old replica's totals (its snapshot) to these."""
        values = snapshot_counters(state)
        for name in TOTALS:
            setattr(self, name, getattr(self, name) + values.get(name, 0))

    def count_sent(self, message, sparse_values: str) -> None:
        """A message sent to the peers: its tensor bytes on the wire, and what they would take dense."""
        self.messages_sent += 1
        if isinstance(message, GradientMessage):
            self.gradient_messages_sent += 1
            self.bytes_sent += wire.payload_nbytes(message.gradients, sparse_values)
            self.dense_bytes_sent += dense_nbytes(message.gradients)
        elif isinstance(message, WeightsMessage):
            self.bytes_sent += dense_nbytes(message.weights)
            self.dense_bytes_sent += dense_nbytes(message.weights)

    def metric_values(self) -> Dict[str, int]:
        return {name: getattr(self, name) for name in METRIC}


def snapshot_counters(state: Mapping[str, np.ndarray]) -> Dict[str, int]:
    """Every ``counters/<name>`` entry of a snapshot, by name (the update rule's and the AUTO
    controller's too)."""
    return {key[len(PREFIX):]: int(value) for key, value in state.items() if key.startswith(PREFIX)}


def refuse_positional_counters(state: Mapping[str, np.ndarray]) -> None:
    """Refuses a snapshot of a release before 0.2.0 (its counters one positional array), clearly."""
    if "counters" in state and not any(k.startswith("counters/") for k in state):
        raise ProtocolError("this replica state was saved by pyflink_tensair before 0.2.0 (its counters are one "
                            "positional array), which this release no longer reads: resume it with a 0.2.x "
                            "release and take a new savepoint there, or start afresh (CHANGELOG.md)")


def _names(column: str) -> Tuple[str, ...]:
    return tuple(f.name for f in fields(ReplicaCounters) if f.metadata.get(column))


TOTALS, METRIC, GAUGES, SUMMED = _names("total"), _names("metric"), _names("gauge"), _names("summed")
NAMES = tuple(f.name for f in fields(ReplicaCounters))
