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
    >>> curve = [S(batch_id=i, accuracy=a) for i, a in enumerate([0.9] * 4 + [0.1, 0.5, 0.9, 0.9])]
    >>> recovery(curve, "accuracy", points=[4], window=2, fraction=0.9)
    [{'point': 4, 'before': 0.9, 'batches': 4}]
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


def recovery(records: Sequence, field: str, *, points: Sequence[int], window: int, fraction: float = 0.9) -> List[dict]:
    """For each drift point (a batch id): the mean of ``field`` over the ``window`` batches before it
    (``before``), and how many batches after the point the sliding mean over ``window`` batches
    first reaches ``fraction * before`` again (``batches``: counted from the point to the last
    batch of that window; ``None`` if it never does before the next point or the stream's end)."""
    if window < 1 or not 0 < fraction <= 1:
        raise ConfigError(f"window must be >= 1 and fraction in (0, 1]. Received: window={window}, fraction={fraction}")
    values = {r.batch_id: getattr(r, field) for r in in_stream_order(records) if getattr(r, field) is not None}
    ids = sorted(values)
    out = []
    bounds = list(points) + [ids[-1] + 1 if ids else 0]
    for point, end in zip(points, bounds[1:]):
        before = [values[i] for i in ids if point - window <= i < point]
        level = sum(before) / len(before) if before else None
        found = None
        after = [i for i in ids if point <= i < end]
        if level is not None:
            for k in range(window - 1, len(after)):
                recent = [values[i] for i in after[k - window + 1:k + 1]]
                if sum(recent) / window >= fraction * level:
                    found = after[k] - point + 1
                    break
        out.append({"point": point, "before": None if level is None else round(level, 6), "batches": found})
    return out
