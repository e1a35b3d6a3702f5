"""The figures of a finished run, from its metrics records and final models. Pure: no IO.

:func:`summarize` is what a job's ``--summary`` JSON holds (with the job's own additions);
:func:`latest_per_replica` is each replica's newest record, what progress lines read.

Example::

    >>> from pyflink_tensair.config import TrainConfig
    >>> from pyflink_tensair.core.simulation import simulate
    >>> from pyflink_tensair.testing import LinearModel, make_regression_batches
    >>> run = simulate(lambda r: LinearModel(3), make_regression_batches(8, 3), TrainConfig(replicas=2, staleness_bound=0))
    >>> figures = summarize(run.metrics, run.final_models.values(), TrainConfig(replicas=2, staleness_bound=0), wall_s=1.0)
    >>> figures["batches"], figures["model_versions"], figures["replica_max_weight_diff"]
    (8, [4, 4], 0.0)
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Optional, Sequence

from .counters import SUMMED
from .events import FinalModel, Metrics
from .prequential import sliding_mean
from .simulation import max_weight_diff


def latest_per_replica(records: Iterable[Metrics]) -> Dict[int, Metrics]:
    """Each replica's record of the highest local step (the later one among equal steps)."""
    latest: Dict[int, Metrics] = {}
    for m in records:
        if m.replica not in latest or (m.local_step, m.time) >= (latest[m.replica].local_step, latest[m.replica].time):
            latest[m.replica] = m
    return latest


def tail_mean(values: Sequence[Optional[float]]) -> Optional[float]:
    """The mean of the last tenth (at least one) of the values that are not None."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    window = max(1, math.ceil(len(values) / 10))
    return sum(values[-window:]) / window


def last_value(curve) -> Optional[float]:
    """The value of a :func:`~.prequential.sliding_mean` curve's last point, or None if empty."""
    return curve[-1][1] if curve else None


def summarize(records: List[Metrics], models: Iterable[FinalModel], config, wall_s: float, window: int = 50) -> dict:
    """The run's summary. ``final_loss``/``final_accuracy``: the mean prequential loss/accuracy of
    the last 10% of trained batches; ``window_accuracy``: over the last ``window`` batches in
    stream order, and ``accuracy_curve`` that sliding mean after every batch (``[batches, value]``);
    ``batches_per_s``: trained batches over the time from the first to the last trained batch (job
    start-up excluded; ``wall_s`` includes it). ``config`` is the run's ``TrainConfig``.

    After a restore from a checkpoint a replica trains again the steps it had trained since that
    checkpoint: only the last record of each ``(replica, local_step)`` counts (the steps the final
    state holds); ``retrained_batches`` counts the others and ``restores`` the ``"restored"``
    records."""
    every_batch = [m for m in records if m.phase == "batch"]
    kept: Dict[tuple, Metrics] = {}
    for m in sorted(every_batch, key=lambda m: m.time):
        kept[(m.replica, m.local_step)] = m
    batch_records = sorted(kept.values(), key=lambda m: m.time)
    finals = {m.replica: m for m in records if m.phase == "final"}
    latest = finals or latest_per_replica(records)
    trained = len(batch_records)
    span = batch_records[-1].time - batch_records[0].time if trained > 1 else 0.0
    messages = sum(m.gradient_messages_sent for m in latest.values())
    message_bytes = sum(m.bytes_sent for m in latest.values())
    models = sorted(models, key=lambda m: m.replica)
    loss_curve = sliding_mean(batch_records, "loss", window=window)
    accuracy_curve = sliding_mean(batch_records, "accuracy", window=window)
    return {
        "replicas": config.replicas,
        "staleness_bound": config.staleness_bound,
        "broadcast_every": config.broadcast_every,
        "batches": trained,
        "final_loss": tail_mean([m.loss for m in batch_records]),
        "final_accuracy": tail_mean([m.accuracy for m in batch_records]),
        "score_window": window,
        "window_loss": last_value(loss_curve),
        "window_accuracy": last_value(accuracy_curve),
        "accuracy_curve": [[n, round(v, 5)] for n, v in accuracy_curve],
        "loss_curve": [[n, round(v, 5)] for n, v in loss_curve],
        "wall_s": round(wall_s, 3),
        "batches_per_s": (trained - 1) / span if span > 0 else None,
        "gradient_messages": messages,
        "gradient_bytes": message_bytes,
        "mean_gradient_message_bytes": message_bytes / messages if messages else None,
        "dense_gradient_bytes": sum(m.dense_bytes_sent for m in latest.values()),
        "messages_per_s": messages / span if span > 0 else None,
        "model_versions": [m.model_version for m in models],
        "replica_max_weight_diff": max_weight_diff([m.weights for m in models]) if len(models) > 1 else 0.0,
        "initial_weights_equal": len({m.initial_digest for m in models}) <= 1,
        "max_staleness": max((m.staleness for m in batch_records), default=0),
        "max_delay_s": max((m.delay_s for m in batch_records if m.delay_s is not None), default=None),
        # the counters the table marks "summed" (core.counters): bounds overflowed, repeats, Guards' counts
        **{counter: sum(getattr(m, counter) for m in latest.values()) for counter in SUMMED},
        "finished_replicas": sorted(finals),
        "restores": sum(1 for m in records if m.phase == "restored"),
        "retrained_batches": len(every_batch) - len(batch_records),
    }
