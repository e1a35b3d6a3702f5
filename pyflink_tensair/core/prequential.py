"""Prequential (test-then-train) scores: every batch is scored before it is trained on.

The replicas report each batch's loss and accuracy as measured before training on it. These
functions turn those per-batch scores into the curves a person reads: a sliding-window mean in
stream order, and the mean per segment (e.g. per pass over a data set).

Example::

    >>> from types import SimpleNamespace as S
    >>> records = [S(batch_id=i, accuracy=a) for i, a in enumerate([0.0, 0.5, 1.0, 1.0])]
    >>> sliding_mean(records, "accuracy", window=2)
    [(1, 0.0), (2, 0.25), (3, 0.75), (4, 1.0)]
    >>> segment_means(records, "accuracy", segment=2)
    [0.25, 1.0]
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..errors import ConfigError


def in_stream_order(records: Sequence) -> list:
    """Per-batch records that carry a score, ordered by batch id (the order of the input stream)."""
    return sorted((r for r in records if getattr(r, "batch_id", -1) >= 0), key=lambda r: r.batch_id)


def sliding_mean(records: Sequence, field: str, *, window: int) -> List[Tuple[int, float]]:
    """``(batches seen, mean of field over the last window batches)`` after every batch, in stream order.

    Batches whose ``field`` is ``None`` are skipped.
    """
    if window < 1:
        raise ConfigError(f"window must be >= 1. Received: window={window}")
    values = [getattr(r, field) for r in in_stream_order(records)]
    values = [v for v in values if v is not None]
    curve, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        curve.append((i + 1, total / min(i + 1, window)))
    return curve


def segment_means(records: Sequence, field: str, *, segment: int) -> List[Optional[float]]:
    """Mean of ``field`` over batch ids ``[k * segment, (k + 1) * segment)`` for each ``k`` seen."""
    if segment < 1:
        raise ConfigError(f"segment must be >= 1. Received: segment={segment}")
    sums, counts = {}, {}
    for r in in_stream_order(records):
        value = getattr(r, field)
        if value is None:
            continue
        k = r.batch_id // segment
        sums[k] = sums.get(k, 0.0) + value
        counts[k] = counts.get(k, 0) + 1
    last = max(counts, default=-1)
    return [sums[k] / counts[k] if k in counts else None for k in range(last + 1)]
