"""An image stream whose labels are permuted every ``every`` batches: concept drift with known points.

TensAIR's drift demo: the images stay the same, what they mean changes. Segment ``k`` (batches
``k * every`` to ``(k + 1) * every - 1``) maps each true class ``c`` to ``permutation_k[c]``;
segment 0 keeps the labels, every later one draws a permutation that moves every class
(seeded by ``seed`` and ``k``), so a model of the previous segment is wrong on every image.

Example::

    >>> stream = PermutedLabels("digits", batch_size=16, every=100)
    >>> stream.drift_points(350)
    [100, 200, 300]
    >>> a, b = stream.base(150), stream(150)
    >>> bool((a.x == b.x).all()), bool((a.y != b.y).all()), b.meta["segment"]
    (True, True, 1)
"""

from __future__ import annotations

from typing import List

import numpy as np

from ..core.messages import Batch
from ..errors import ConfigError
from ..validation import is_int
from .images import ImageStream

CLASSES = 10


class PermutedLabels:
    """A callable ``index -> Batch`` for ``batch_source`` (see the module)."""

    def __init__(self, spec: str, *, batch_size: int, every: int, seed: int = 0):
        if not is_int(every) or every < 1:
            raise ConfigError(f"every must be an int >= 1 (batches between drifts). Received: every={every!r}")
        self.base = ImageStream(spec, batch_size=batch_size, seed=seed)
        self.every, self.seed = int(every), seed  # int(): "segment" goes into meta, where the wire refuses NumPy ints

    @property
    def input_shape(self):
        return self.base.input_shape

    @property
    def batches_per_pass(self) -> int:
        return self.base.batches_per_pass

    def permutation(self, segment: int) -> np.ndarray:
        if segment == 0:
            return np.arange(CLASSES)
        rng = np.random.default_rng([self.seed, 7, segment])
        while True:  # a derangement: no class keeps its label
            order = rng.permutation(CLASSES)
            if not (order == np.arange(CLASSES)).any():
                return order

    def drift_points(self, batches: int) -> List[int]:
        return list(range(self.every, batches, self.every))

    def __call__(self, index: int) -> Batch:
        batch = self.base(index)
        segment = int(index) // self.every
        y = self.permutation(segment)[np.asarray(batch.y, np.int64)]
        return Batch(batch.x, y.astype(np.asarray(batch.y).dtype), {**batch.meta, "segment": segment})
