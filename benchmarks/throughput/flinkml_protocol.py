"""The Flink ML training pattern (``OnlineLogisticRegression``'s), as two state machines without Flink.

Workers hold a copy of the model. Each computes the gradient of its next mini-batch with the model
it has (version ``v``), sends it to the single updater, and waits. The updater, once it holds the
version-``v`` gradient of every worker still running, applies their average with its optimizer
and broadcasts version ``v + 1``; only then do the workers take their next batch. A batch is
finished when the model that includes its gradient is back at its worker (that is when its
``Metrics`` record is emitted).

What the updater broadcasts (``broadcast``): ``"model"``, the whole model at every global step, as
Flink ML itself does (its model-data stream; for word2vec's two 50,000 x 300 tables, 120 MB per
step); or ``"changed"``, every dense weight and, of an embedding table, only the rows the step
changed: a faster variant of the pattern that Flink ML does not have.

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

:func:`simulate_flinkml` does that routing for any number of workers, as ``simulate`` does for our
replicas, so ``pyflink_tensair.testing.check_protocol(..., run=simulate_flinkml)`` can check it.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Callable, Deque, Dict, Optional, Sequence

import numpy as np

from pyflink_tensair.config import TrainConfig, as_train_config
from pyflink_tensair.core import wire
from pyflink_tensair.core.events import FinalModel, Metrics, weights_digest
from pyflink_tensair.core.gradients import average_gradients
from pyflink_tensair.core.messages import Batch, DoneMessage, GradientMessage, Gradients, SparseGradient
from pyflink_tensair.core.simulation import DelayLine, SimulationResult
from pyflink_tensair.errors import ConfigError, ProtocolError


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


BROADCASTS = ("changed", "model")


class Updater:
    def __init__(self, workers: int, model, *, broadcast: str = "changed"):
        if broadcast not in BROADCASTS:
            raise ValueError(f"broadcast must be one of {BROADCASTS}. Received: broadcast={broadcast!r}")
        self.broadcast = broadcast
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
        if self.broadcast == "model":
            self.bytes_broadcast += sum(v.nbytes for v in weights.values())
            return [ModelUpdate(self.version, weights)]
        changed = {}
        for name, grad in average.items():
            if isinstance(grad, SparseGradient):
                rows = np.asarray(grad.indices)
                changed[name] = SparseGradient(rows, weights[name][rows], grad.dense_shape)
            else:
                changed[name] = weights[name]
        self.bytes_broadcast += sum(v.nbytes for v in changed.values())
        return [ModelUpdate(self.version, changed)]


def simulate_flinkml(make_model: Callable[[int], object], batches: Sequence[Batch], config: TrainConfig, *,
                     delivery_delay: int = 0, through_wire: bool = True, broadcast: str = "changed") -> SimulationResult:
    """Runs ``config.replicas`` workers and the updater in one process, routed as ``simulate`` routes replicas.

    Batch ``i`` goes to worker ``i % replicas``; gradients go to the updater and each model version
    back to every worker, delivered once batch ``t + delivery_delay`` has been handed out (``t``:
    when it was sent). ``make_model(r)`` builds worker ``r``'s model; the updater's is
    ``make_model(0)``. ``through_wire`` sends every message through the wire format as the Flink job
    (``graphs.py``) does. The pattern is synchronous SGD with a central updater: only
    ``staleness_bound=0`` is accepted. ``final_models`` hold each worker's weights at the end.
    ``broadcast``: what the updater sends (:class:`Updater`).

    Example::

        >>> from pyflink_tensair.testing import LinearModel, make_regression_batches
        >>> result = simulate_flinkml(lambda r: LinearModel(3), make_regression_batches(5, 3),
        ...                           TrainConfig(replicas=2, staleness_bound=0), delivery_delay=1)
        >>> sorted(result.final_models), [w.steps for w in result.replicas], result.replica_max_weight_diff()
        ([0, 1], [3, 2], 0.0)
    """
    config = as_train_config(config)
    if config.staleness_bound != 0:
        raise ConfigError("the Flink ML pattern is synchronous SGD with a central updater: staleness_bound must be 0. "
                          f"Received: staleness_bound={config.staleness_bound!r}")
    n = config.replicas
    workers = [Worker(r, make_model(r)) for r in range(n)]
    digests = [weights_digest(w.model.get_weights()) for w in workers]
    updater = Updater(n, make_model(0), broadcast=broadcast)
    result = SimulationResult(workers)
    line = DelayLine(delivery_delay)
    ended = []

    def send(tick: int, destinations, event) -> None:
        result.messages += 1
        if through_wire:
            event = _wire_round_trip(event, result)
        for destination in destinations:
            line.send(tick, destination, event)

    def collect(events, tick: int) -> None:
        for event in events:
            if isinstance(event, Metrics):
                result.metrics.append(event)
            elif isinstance(event, ModelUpdate):
                send(tick, range(n), event)
            elif isinstance(event, UpdaterDone):
                ended.append(event)
            else:  # GradientUpdate or WorkerDone, for the updater (destination n)
                send(tick, [n], event)

    def on_message(destination: int, event, tick: int) -> None:
        if destination < n:
            collect(workers[destination].on_model(event), tick)
        elif isinstance(event, WorkerDone):
            collect(updater.on_done(event), tick)
        else:
            collect(updater.on_gradient(event), tick)

    for tick, batch in enumerate(batches):
        collect(workers[tick % n].on_batch(batch), tick)
        line.deliver(tick, on_message)
    for worker in workers:
        collect(worker.on_input_end(), len(batches))
    line.deliver(None, on_message)
    stuck = [w.id for w in workers if not w.done_sent]
    if stuck or not ended:
        raise ProtocolError(f"workers {stuck} or the updater never finished: the Flink ML pattern deadlocked")
    for w in workers:
        result.final_models[w.id] = FinalModel(w.id, w.version, w.model.get_weights(), digests[w.id])
    return result


def _wire_round_trip(event, result: SimulationResult):
    """``event`` encoded as ``graphs.py`` sends it (steps count from 1 on the wire) and decoded back."""
    if isinstance(event, GradientUpdate):
        message = GradientMessage(event.worker, event.version + 1, event.version + 1, event.gradients)
    elif isinstance(event, ModelUpdate):
        message = GradientMessage(0, event.version, event.version, event.weights)
    else:
        message = DoneMessage(event.worker, 0)
    data = wire.encode_message(message)
    result.message_bytes += len(data)
    message = wire.decode_message(data)
    if isinstance(message, DoneMessage):
        return WorkerDone(message.sender)
    if isinstance(event, ModelUpdate):
        return ModelUpdate(message.step, message.gradients)
    return GradientUpdate(message.sender, message.step - 1, message.gradients)
