"""Streams with known drift points, and the score of a detector's detections on them.

A stream is a sequence of concepts, each a distribution of the monitored value: ``gaussian``
(standard deviation 1, concept ``k`` has mean ``k * magnitude``: a loss that steps up) or
``binary`` (0/1 errors, concept ``k`` has error rate ``base + k * magnitude``). Concept ``k``
starts at ``k * drift_every``. ``abrupt``: it replaces the previous one at once; ``gradual``: over
``width`` values each value comes from the new concept with a probability that rises linearly
from 0 to 1 (MOA's gradual drift); ``none``: one concept throughout.

Example::

    >>> stream = generate("binary", "abrupt", magnitude=0.5, length=40, drift_every=20, seed=0, base=0.0)
    >>> stream.drifts, float(stream.values[:20].sum()), bool(stream.values[20:].mean() > 0.2)
    ((20,), 0.0, True)
    >>> score([3, 25, 30], stream)
    {'drifts': 1, 'detected': 1, 'missed': 0, 'false_positives': 2, 'delays': [5]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

from ..errors import ConfigError

VALUES = ("gaussian", "binary")
SHAPES = ("abrupt", "gradual", "none")


@dataclass(frozen=True)
class DriftStream:
    values: np.ndarray
    drifts: Tuple[int, ...]  # where each new concept starts (its transition, if gradual)
    width: int  # values over which a gradual drift replaces the concept (1: abrupt)


def generate(values: str, shape: str, *, magnitude: float, length: int, drift_every: int, seed: int,
             width: int = 500, base: float = 0.1) -> DriftStream:
    """A stream of ``length`` values with a drift every ``drift_every`` values; see the module."""
    if values not in VALUES or shape not in SHAPES:
        raise ConfigError(f"values must be one of {VALUES} and shape one of {SHAPES}. "
                          f"Received: values={values!r}, shape={shape!r}")
    if length < 1 or drift_every < 1 or width < 1:
        raise ConfigError(f"length, drift_every and width must be >= 1. Received: length={length}, "
                          f"drift_every={drift_every}, width={width}")
    drifts = tuple(range(drift_every, length, drift_every)) if shape != "none" else ()
    rng = np.random.default_rng(seed)
    index = np.arange(length)
    concept = np.zeros(length, dtype=np.int64)
    for k, start in enumerate(drifts, start=1):
        if shape == "gradual":
            chance = np.clip((index - start + 1) / width, 0.0, 1.0)
            concept += (rng.random(length) < chance) & (concept == k - 1)
        else:
            concept[start:] = k
    if shape == "gradual":  # every later concept has replaced the earlier one by its own start
        for k, start in enumerate(drifts, start=1):
            concept[start + width:] = np.maximum(concept[start + width:], k)
    if values == "gaussian":
        out = rng.standard_normal(length) + concept * magnitude
    else:
        highest = base + len(drifts) * magnitude
        if not 0.0 <= base <= 1.0 or highest > 1.0:
            raise ConfigError(f"binary error rates must stay within [0, 1]. Received: base={base}, "
                              f"magnitude={magnitude}, {len(drifts)} drifts (last rate {highest:g})")
        out = (rng.random(length) < base + concept * magnitude).astype(np.float64)
    return DriftStream(out, drifts, width if shape == "gradual" else 1)


def detections(detector, stream: DriftStream) -> list:
    """Indices of the values at which ``detector`` reported a drift."""
    update = detector.update
    return [i for i, value in enumerate(stream.values.tolist()) if update(value)]


def score(found: Sequence[int], stream: DriftStream) -> dict:
    """A drift is detected by the first detection from its start up to the next drift's start
    (delay: that detection's index less the start); every other detection is a false positive."""
    bounds = list(stream.drifts) + [len(stream.values)]
    delays, false_positives = [], 0
    found = sorted(found)
    false_positives += sum(1 for i in found if i < (stream.drifts[0] if stream.drifts else len(stream.values)))
    for start, end in zip(bounds, bounds[1:]):
        inside = [i for i in found if start <= i < end]
        if inside:
            delays.append(inside[0] - start)
        false_positives += max(len(inside) - 1, 0)
    return {"drifts": len(stream.drifts), "detected": len(delays), "missed": len(stream.drifts) - len(delays),
            "false_positives": false_positives, "delays": delays}
