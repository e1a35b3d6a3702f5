"""What a replica reports of itself, beyond its counters: the last loss and accuracy it saw and its
recent training rate; and the metrics record made of them.

Example::

    >>> progress = Progress(window=4)
    >>> for now in (1.0, 1.5, 2.0):
    ...     progress.trained_at(now)
    >>> progress.batches_per_s()
    2.0
"""

from __future__ import annotations

import collections
from typing import Deque, Optional

from .counters import ReplicaCounters
from .events import Metrics
from .messages import Batch
from .model_api import StepResult


class Progress:
    """One replica's scores and rate (see the module docstring)."""

    def __init__(self, window: int = 32):
        self.loss: Optional[float] = None
        self.accuracy: Optional[float] = None
        self._times: Deque[float] = collections.deque(maxlen=window)

    def note(self, result: StepResult) -> None:
        """A step's or a prediction's scores (the last of each is reported)."""
        if result.loss is not None:
            self.loss = result.loss
        if result.accuracy is not None:
            self.accuracy = result.accuracy

    def trained_at(self, now: float) -> None:
        self._times.append(now)

    def batches_per_s(self) -> float:
        """Own steps per second over the last ``window`` of them."""
        times = self._times
        if len(times) < 2 or times[-1] <= times[0]:
            return 0.0
        return (len(times) - 1) / (times[-1] - times[0])

    def metrics(self, replica: int, phase: str, now: float, counts: ReplicaCounters, model_busy_s: float, *, staleness: int,
                held_batches: int, batch: Optional[Batch], trained: Optional[bool]) -> Metrics:
        """The metrics record of this moment (``batch``: the one just handled, if any)."""
        scheduled = batch.meta.get("scheduled_at") if batch is not None else None
        return Metrics(
            replica=replica, phase=phase, time=now, local_step=counts.local_step, model_version=counts.model_version,
            loss=self.loss, accuracy=self.accuracy, staleness=staleness, batches_per_s=self.batches_per_s(),
            held_batches=held_batches, batch_id=batch.id if batch is not None else -1,
            delay_s=(now - scheduled) if isinstance(scheduled, (int, float)) else None,
            model_busy_s=round(model_busy_s, 6), trained=trained, **counts.metric_values())
