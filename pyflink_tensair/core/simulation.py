"""Runs N replicas in one process and routes their messages deterministically: the protocol without Flink.

Batch ``i`` goes to replica ``i % replicas`` (as the Flink job routes them). A message broadcast
while batch ``t`` is handled is delivered to each peer once batch ``t + delivery_delay`` has been
handed out, in the order messages were sent, so a larger delay models a slower feedback loop.
Messages go through the wire format by default, so byte counts are those Flink would carry.

:func:`simulate` takes the :class:`~pyflink_tensair.config.TrainConfig` that ``train()`` takes; the
fields that mean nothing in one process (``latency``, ``workers``, ``tf_intra_op_threads``,
``name``) are ignored, and ``seed`` is the model factory's business.

Example::

    >>> from pyflink_tensair.config import TrainConfig
    >>> from pyflink_tensair.testing import LinearModel, make_regression_batches
    >>> result = simulate(lambda r: LinearModel(3, seed=0), make_regression_batches(8, 3),
    ...                   TrainConfig(replicas=2, staleness_bound=0))
    >>> result.replica_max_weight_diff()
    0.0
"""

from __future__ import annotations

import collections
import collections.abc
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..config import TrainConfig, as_train_config
from ..errors import ConfigError, ProtocolError
from ..validation import require_bool, require_callable, require_int
from . import wire
from .events import Broadcast, FinalModel, Metrics, ModeChange, Prediction
from .messages import Batch, DeadLetter
from .model_api import TrainableModel
from .replica import Replica


@dataclass
class SimulationResult:
    """What an in-process run gives back.

    :func:`~pyflink_tensair.testing.check_protocol` reads only ``metrics`` (the ``"batch"``
    records' ``replica``, ``local_step``, ``batch_id``, ``staleness`` and ``bound_overflows``) and
    ``final_models`` (one :class:`FinalModel` per replica id ``0 .. n - 1``): another runner's
    result needs those two attributes only. ``replicas`` holds the runner's state machines
    (:class:`Replica` here).
    """

    replicas: List[Any]
    predictions: List[Prediction] = field(default_factory=list)
    metrics: List[Metrics] = field(default_factory=list)
    final_models: Dict[int, FinalModel] = field(default_factory=dict)
    mode_changes: List[ModeChange] = field(default_factory=list)  # Mode.AUTO's converged / drift events
    dead_letters: List[DeadLetter] = field(default_factory=list)  # input set aside (TrainConfig.guards)
    updates: list = field(default_factory=list)  # ModelUpdates replica 0 published (TrainConfig.updates)
    messages: int = 0
    message_bytes: int = 0

    def replica_max_weight_diff(self) -> float:
        """The largest absolute difference between any two replicas' final weights."""
        weights = [self.final_models[r].weights for r in sorted(self.final_models)]
        return max_weight_diff(weights)


def max_weight_diff(weight_sets: Sequence[Dict[str, np.ndarray]]) -> float:
    diff = 0.0
    for other in weight_sets[1:]:
        for name, value in weight_sets[0].items():
            diff = max(diff, float(np.max(np.abs(np.asarray(value, np.float64) - np.asarray(other[name], np.float64)), initial=0.0)))
    return diff


class DelayLine:
    """Messages in flight: each is delivered once the tick ``delay`` after its sending has come.

    Messages due by the same tick are delivered in the order they were sent.
    """

    def __init__(self, delay: int):
        self.delay = require_int("delivery_delay", delay, 0)
        self._queue: Deque[Tuple[int, int, object]] = collections.deque()  # (due_tick, destination, message)

    def send(self, tick: int, destination: int, message) -> None:
        self._queue.append((tick + self.delay, destination, message))

    def deliver(self, until_tick: Optional[int], handle: Callable[[int, Any, int], None]) -> None:
        """Calls ``handle(destination, message, tick)`` for every message due by ``until_tick``
        (``None``: until nothing is in flight, including what the handler sends)."""
        while self._queue and (until_tick is None or self._queue[0][0] <= until_tick):
            tick, destination, message = self._queue.popleft()
            handle(destination, message, tick)


def simulate(make_model: Callable[[int], TrainableModel], batches: Sequence[Batch],
             config: TrainConfig = TrainConfig(), *, delivery_delay: int = 0,
             through_wire: bool = True) -> SimulationResult:
    """Trains ``config.replicas`` replicas (``make_model(r)`` builds replica ``r``'s model) on ``batches``.

    Raises :class:`~pyflink_tensair.errors.ProtocolError` if a replica never finishes, and a
    ``ConfigError`` naming a bad argument before anything runs.
    """
    config = as_train_config(config)
    require_callable("make_model", make_model, "a function of the replica id, returning a model")
    if not isinstance(batches, collections.abc.Sequence) or isinstance(batches, (str, bytes)):
        raise ConfigError(f"batches must be a sequence of Batch (a list). Received: batches={batches!r:.100}")
    require_bool("through_wire", through_wire)
    replicas = config.replicas
    nodes = [Replica(r, make_model(r), config) for r in range(replicas)]
    result = SimulationResult(nodes)
    line = DelayLine(delivery_delay)

    def collect(sender: int, events, tick: int) -> None:
        for event in events:
            if isinstance(event, Broadcast):
                message = event.message
                if through_wire:
                    data = wire.encode_message(message, config.sparse_values)
                    result.message_bytes += len(data)
                    message = wire.decode_message(data)
                result.messages += 1
                for peer in range(replicas):
                    if peer != sender:
                        line.send(tick, peer, message)
            elif isinstance(event, Prediction):
                result.predictions.append(event)
            elif isinstance(event, Metrics):
                result.metrics.append(event)
            elif isinstance(event, FinalModel):
                result.final_models[event.replica] = event
            elif isinstance(event, ModeChange):
                result.mode_changes.append(event)
            elif isinstance(event, DeadLetter):
                result.dead_letters.append(event)
            elif type(event).__name__ == "ModelUpdate":
                result.updates.append(event)

    def on_message(peer: int, message, tick: int) -> None:
        collect(peer, nodes[peer].on_gradient(message), tick)

    for tick, batch in enumerate(batches):
        r = tick % replicas
        collect(r, nodes[r].on_batch(batch), tick)
        line.deliver(tick, on_message)
    end_tick = len(batches)
    for node in nodes:
        collect(node.id, node.on_input_end(), end_tick)
    line.deliver(None, on_message)
    stuck = [n.id for n in nodes if not n.counts.finished]
    if stuck:
        raise ProtocolError(f"replicas {stuck} never finished: the protocol deadlocked")
    return result
