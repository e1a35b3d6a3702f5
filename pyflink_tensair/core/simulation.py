"""Runs N replicas in one process and routes their messages deterministically: the protocol without Flink.

Batch ``i`` goes to replica ``i % replicas`` (as the Flink job routes them). A message broadcast
while batch ``t`` is handled is delivered to each peer once batch ``t + delivery_delay`` has been
handed out, in the order messages were sent, so a larger delay models a slower feedback loop.
Messages go through the wire format by default, so byte counts are those Flink would carry.

Example::

    >>> from pyflink_tensair.testing import LinearModel, make_regression_batches
    >>> result = simulate(lambda r: LinearModel(3, seed=0), make_regression_batches(8, 3),
    ...                   replicas=2, staleness_bound=0)
    >>> result.replica_max_weight_diff()
    0.0
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Sequence

import numpy as np

from ..config import Mode
from . import wire
from .events import Broadcast, FinalModel, Metrics, Prediction
from .messages import Batch
from .model_api import TrainableModel
from .replica import Replica


@dataclass
class SimulationResult:
    replicas: List[Replica]
    predictions: List[Prediction] = field(default_factory=list)
    metrics: List[Metrics] = field(default_factory=list)
    final_models: Dict[int, FinalModel] = field(default_factory=dict)
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


def simulate(make_model: Callable[[int], TrainableModel], batches: Sequence[Batch], *,
             replicas: int = 2, staleness_bound=None, broadcast_every: int = 1,
             buffer_capacity: int = 64, delivery_delay: int = 0, mode: Mode = Mode.TRAIN,
             through_wire: bool = True) -> SimulationResult:
    """Trains ``replicas`` replicas (``make_model(r)`` builds replica ``r``'s model) on ``batches``."""
    nodes = [Replica(r, replicas, make_model(r), staleness_bound=staleness_bound,
                     broadcast_every=broadcast_every, buffer_capacity=buffer_capacity, mode=mode)
             for r in range(replicas)]
    result = SimulationResult(nodes)
    in_flight = collections.deque()  # (due_tick, destination, message)

    def collect(sender: int, events, tick: int) -> None:
        for event in events:
            if isinstance(event, Broadcast):
                message = event.message
                if through_wire:
                    data = wire.encode_message(message)
                    result.message_bytes += len(data)
                    message = wire.decode_message(data)
                result.messages += 1
                for peer in range(replicas):
                    if peer != sender:
                        in_flight.append((tick + delivery_delay, peer, message))
            elif isinstance(event, Prediction):
                result.predictions.append(event)
            elif isinstance(event, Metrics):
                result.metrics.append(event)
            elif isinstance(event, FinalModel):
                result.final_models[event.replica] = event

    def deliver(until_tick) -> None:
        while in_flight and (until_tick is None or in_flight[0][0] <= until_tick):
            tick, peer, message = in_flight.popleft()
            collect(peer, nodes[peer].on_gradient(message), tick)

    for tick, batch in enumerate(batches):
        r = tick % replicas
        collect(r, nodes[r].on_batch(batch), tick)
        deliver(tick)
    end_tick = len(batches)
    for node in nodes:
        collect(node.id, node.on_input_end(), end_tick)
    deliver(None)
    stuck = [n.id for n in nodes if not n.finished]
    if stuck:
        raise RuntimeError(f"replicas {stuck} never finished: the protocol deadlocked")
    return result
