"""The Flink ML training pattern (``OnlineLogisticRegression``'s), as two state machines without Flink.

Workers hold a copy of the model. Each computes the gradient of its next mini-batch with the model
it has (version ``v``), sends it to the single updater, and waits. The updater, once it holds the
version-``v`` gradient of every worker still running, applies their average with its optimizer
and broadcasts version ``v + 1``; only then do the workers take their next batch. A batch is
finished when the model that includes its gradient is back at its worker (that is when its
``Metrics`` record is emitted).

The broadcast carries every dense weight and, of an embedding table, only the rows the step
changed (the "changed rows" variant: a full 50,000 x 300 x 2 table would be 120 MB per step).

Example (two workers and the updater of a NumPy model, messages routed by hand)::

    >>> from pyflink_tensair.testing import LinearModel, make_regression_batches
    >>> batches = make_regression_batches(4, 3)
    >>> workers = [Worker(i, LinearModel(3, seed=0)) for i in range(2)]
    >>> updater = Updater(2, LinearModel(3, seed=0))
    >>> sent = workers[0].on_batch(batches[0]) + workers[1].on_batch(batches[1])
    >>> [type(e).__name__ for e in sent]
    ['GradientUpdate', 'GradientUpdate']
    >>> update = [e for g in sent for e in updater.on_gradient(g)]
    >>> [(type(e).__name__, e.version) for e in update]
    [('ModelUpdate', 1)]
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Callable, Deque, Dict, List, Optional

import numpy as np

from pyflink_tensair.core.events import Metrics
from pyflink_tensair.core.gradients import average_gradients
from pyflink_tensair.core.messages import Batch, Gradients, SparseGradient


@dataclass(frozen=True)
class GradientUpdate:
    worker: int
    version: int
    gradients: Gradients


@dataclass(frozen=True)
class WorkerDone:
    worker: int


@dataclass(frozen=True)
class ModelUpdate:
    """Version ``version`` of the model: dense arrays, or ``SparseGradient`` holding new row values."""
    version: int
    weights: Dict[str, object]


@dataclass(frozen=True)
class UpdaterDone:
    version: int


class Worker:
    def __init__(self, worker_id: int, model, clock: Callable[[], float] = time.time):
        self.id = worker_id
        self.model = model
        self.version = 0
        self.steps = 0
        self._clock = clock
        self._held: Deque[Batch] = collections.deque()
        self._pending: Optional[tuple] = None  # (batch, loss, accuracy) awaiting the next model
        self.input_ended = False
        self.done_sent = False
        self._times: Deque[float] = collections.deque(maxlen=32)
        self.bytes_sent = 0

    def on_batch(self, batch: Batch) -> list:
        self._held.append(batch)
        return self._step()

    def on_model(self, update: ModelUpdate) -> list:
        self.model.set_weights(update.weights)
        self.version = update.version
        out = []
        if self._pending is not None:
            batch, loss, accuracy = self._pending
            self._pending = None
            self.steps += 1
            now = self._clock()
            self._times.append(now)
            out.append(self._metrics(batch, loss, accuracy, now))
        return out + self._step()

    def on_input_end(self) -> list:
        self.input_ended = True
        return self._step()

    def _step(self) -> list:
        if self._pending is not None:
            return []
        if self._held:
            batch = self._held.popleft()
            result = self.model.compute_gradients(batch)
            self._pending = (batch, result.loss, result.accuracy)
            self.bytes_sent += sum(g.nbytes for g in result.gradients.values())
            return [GradientUpdate(self.id, self.version, result.gradients)]
        if self.input_ended and not self.done_sent:
            self.done_sent = True
            return [WorkerDone(self.id)]
        return []

    def _metrics(self, batch: Batch, loss, accuracy, now: float) -> Metrics:
        rate = (len(self._times) - 1) / (self._times[-1] - self._times[0]) if len(self._times) > 1 else 0.0
        scheduled = batch.meta.get("scheduled_at")
        return Metrics(replica=self.id, phase="batch", time=now, local_step=self.steps, model_version=self.version,
                       loss=loss, accuracy=accuracy, staleness=0, batches_per_s=rate, held_batches=len(self._held),
                       messages_sent=self.steps, bytes_sent=self.bytes_sent, dense_bytes_sent=self.bytes_sent,
                       messages_applied=self.version, duplicates_dropped=0, bound_overflows=0, batch_id=batch.id,
                       delay_s=None if scheduled is None else now - float(scheduled))


class Updater:
    def __init__(self, workers: int, model):
        self.model = model
        self.version = 0
        self._alive = set(range(workers))
        self._pending: Dict[int, Gradients] = {}
        self.bytes_broadcast = 0

    def on_gradient(self, update: GradientUpdate) -> list:
        if update.version != self.version:
            raise RuntimeError(f"worker {update.worker} sent a gradient of version {update.version}, "
                               f"the updater is at {self.version}")
        self._pending[update.worker] = update.gradients
        return self._maybe_apply()

    def on_done(self, done: WorkerDone) -> list:
        self._alive.discard(done.worker)
        self._pending.pop(done.worker, None)
        out = self._maybe_apply()
        if not self._alive:
            out.append(UpdaterDone(self.version))
        return out

    def _maybe_apply(self) -> list:
        if not self._pending or not self._alive <= set(self._pending):
            return []
        average = average_gradients([self._pending[w] for w in sorted(self._pending)])
        self._pending = {}
        self.model.apply_gradients(average)
        self.version += 1
        weights = self.model.get_weights()
        changed = {}
        for name, grad in average.items():
            if isinstance(grad, SparseGradient):
                rows = np.asarray(grad.indices)
                changed[name] = SparseGradient(rows, weights[name][rows], grad.dense_shape)
            else:
                changed[name] = weights[name]
        self.bytes_broadcast += sum(v.nbytes for v in changed.values())
        return [ModelUpdate(self.version, changed)]
