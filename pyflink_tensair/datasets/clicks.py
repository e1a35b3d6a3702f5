"""A generated click stream for the online loop: events now, labels later, a drift half way.

Event ``i`` happens at stream time ``i * gap_ms``: features ``x`` (normal, ``features`` of them)
and a click (label 1) drawn with probability ``sigmoid(sharpness * x . w)``, where the teacher
``w`` turns to ``-w`` at ``drift_at`` (the same users, the opposite taste). A share
``label_share`` of the events is ever labelled; a label arrives a log-uniform delay of
``delay_s`` (stream seconds) after its event. Everything follows from ``seed`` and the event
number, so any run, restored or not, sees the same stream.

The clock is compressed: the stream runs ``compression`` times faster than its own time
(labels minutes late arrive seconds late), with event and label times in stream milliseconds.

Example::

    >>> stream = ClickStream(events=100, seed=0)
    >>> event = json.loads(stream.event_text(3)); sorted(event)
    ['id', 't', 'x']
    >>> label = json.loads(stream.label_text(0)); label["t"] >= stream.event_time_ms(label["id"])
    True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..validation import require_int, require_number


@dataclass(frozen=True)
class ClickStream:
    events: int
    seed: int = 0
    features: int = 8
    gap_ms: float = 600.0
    label_share: float = 0.8
    delay_s: tuple = (2.0, 120.0)
    drift_at: float = 0.5
    sharpness: float = 3.0
    compression: float = 60.0

    def __post_init__(self):
        require_int("events", self.events, 1)
        require_int("features", self.features, 1)
        require_number("gap_ms", self.gap_ms, above=0)
        require_number("label_share", self.label_share, 0, maximum=1)
        require_number("compression", self.compression, above=0)

    @cached_property
    def _teacher(self) -> np.ndarray:
        w = np.random.default_rng([self.seed, 1]).normal(size=self.features)
        return w / np.linalg.norm(w)

    def features_of(self, i: int) -> np.ndarray:
        return np.random.default_rng([self.seed, 2, i]).normal(size=self.features).astype(np.float32)

    def drifted(self, i: int) -> bool:
        return i >= int(self.events * self.drift_at)

    def click(self, i: int) -> int:
        w = -self._teacher if self.drifted(i) else self._teacher
        p = 1.0 / (1.0 + np.exp(-self.sharpness * float(self.features_of(i) @ w)))
        return int(np.random.default_rng([self.seed, 3, i]).random() < p)

    def event_time_ms(self, i: int) -> float:
        return i * self.gap_ms

    @cached_property
    def _labels(self) -> np.ndarray:
        """``(label arrival time ms, event number)`` of every labelled event, in arrival order."""
        rng = np.random.default_rng([self.seed, 4])
        labelled = np.flatnonzero(rng.random(self.events) < self.label_share)
        low, high = np.log(self.delay_s[0]), np.log(self.delay_s[1])
        delays = np.exp(rng.uniform(low, high, size=len(labelled))) * 1000.0
        arrivals = labelled * self.gap_ms + delays
        order = np.argsort(arrivals, kind="stable")
        return np.stack([arrivals[order], labelled[order]], axis=1)

    @property
    def labels(self) -> int:
        return len(self._labels)

    def label_time_ms(self, j: int) -> float:
        return float(self._labels[j, 0])

    def event_text(self, i: int) -> str:
        return json.dumps({"id": int(i), "x": [round(float(v), 5) for v in self.features_of(i)],
                           "t": int(self.event_time_ms(i))}, separators=(",", ":"))

    def label_text(self, j: int) -> str:
        arrival, i = self._labels[j]
        return json.dumps({"id": int(i), "y": self.click(int(i)), "t": int(arrival)}, separators=(",", ":"))

    def outcome(self, timeout_ms: float) -> dict:
        """What :func:`~pyflink_tensair.online.labels.join_labels` makes of this stream with
        ``timeout_ms`` (event time), whatever the job's speed or failures: ``joined`` labels (those
        at most ``timeout_ms`` after their event), ``timeouts`` (the other events) and
        ``late_labels`` (dead letters ``label_after_timeout``).

        >>> ClickStream(events=100).outcome(timeout_ms=90_000)
        {'joined': 72, 'timeouts': 28, 'late_labels': 7}
        """
        late = sum(1 for arrival, i in self._labels
                   if int(arrival) > int(self.event_time_ms(int(i))) + int(timeout_ms))
        joined = self.labels - late
        return {"joined": joined, "timeouts": self.events - joined, "late_labels": late}

    def wall_s(self, stream_ms: float) -> float:
        """Seconds after the stream's start at which stream time ``stream_ms`` is due."""
        return stream_ms / 1000.0 / self.compression
