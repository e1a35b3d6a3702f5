"""Generated data streams, deterministic in (batch number, seed). No pyflink import.

Example::

    >>> batch = teacher_classification_batch(3, batch_size=8, features=20, classes=4, seed=0)
    >>> batch.x.shape, batch.meta["id"]
    ((8, 20), 3)
"""

from __future__ import annotations

import numpy as np

from ..core import wire
from ..core.messages import Batch


def teacher_classification_batch(index: int, *, batch_size: int, features: int, classes: int, seed: int) -> Batch:
    """Batch ``index`` of a noisy linear-teacher classification stream.

    Points are standard normal; each label is a sample of ``softmax(x @ teacher)`` for a fixed random
    ``teacher`` (drawn from ``seed``), so the best achievable loss is the teacher's entropy.
    """
    teacher = np.random.default_rng([seed, 0]).normal(size=(features, classes))
    rng = np.random.default_rng([seed, 1, int(index)])
    x = rng.normal(size=(batch_size, features)).astype(np.float32)
    gumbel = -np.log(-np.log(rng.uniform(1e-12, 1.0, size=(batch_size, classes))))
    y = np.argmax(x @ teacher + gumbel, axis=1).astype(np.int64)  # Gumbel-max: a softmax sample
    return Batch(x, y, {"id": int(index)})


def encoded_teacher_batch(index: int, *, batch_size: int, features: int, classes: int, seed: int) -> bytes:
    """:func:`teacher_classification_batch`, encoded for a Flink stream."""
    return wire.encode_batch(teacher_classification_batch(index, batch_size=batch_size, features=features,
                                                          classes=classes, seed=seed))
