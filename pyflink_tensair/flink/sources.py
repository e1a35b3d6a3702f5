"""Bounded sources built from Flink's own connectors (PyFlink 2.3 has no ``from_sequence``).

:func:`batch_source` is how the jobs make their streams: batch ``i`` is built from its number
inside the job, optionally paced at a fixed rate the way TensAIR's generator is (an open-loop
source: batch ``i`` is due at ``start + i / rate`` whatever the job does with earlier ones).
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Union

from ..config import PythonIn, python_in_of
from ..core import wire
from ..core.messages import Batch
from ..errors import ConfigError
from ..validation import require_callable, require_int, require_rate


def number_sequence(env, start: int, end: int, *, name: str, uid: str):
    """A parallelism-1 stream of the longs ``start .. end`` (inclusive), ending by itself."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    stream = env.from_source(NumberSequenceSource(start, end), WatermarkStrategy.no_watermarks(), name,
                             type_info=Types.LONG())
    return stream.uid(uid).set_parallelism(1)


class PacedBatches:
    """Turns batch numbers into encoded batches, each sent no earlier than its due time.

    ``make_batch(i)`` returns batch ``i`` as a :class:`~pyflink_tensair.Batch`. With ``rate > 0``
    the first number fixes the start time; batch ``i`` waits until ``start + i / rate`` and carries
    that time as ``meta["scheduled_at"]``, so replicas can report how far behind schedule they
    train (``Metrics.delay_s``). A source that falls behind does not wait: it never skips batches.
    ``meta["id"]`` is set to ``i`` unless ``make_batch`` set it.

    Example::

        >>> import numpy as np
        >>> paced = PacedBatches(lambda i: Batch(np.full((2, 3), i, np.float32)), rate=100.0)
        >>> batch = wire.decode_batch(paced(5))
        >>> batch.meta["id"], batch.x[0, 0], "scheduled_at" in batch.meta
        (5, np.float32(5.0), True)
    """

    def __init__(self, make_batch: Callable[[int], Batch], rate: float = 0.0, clock=time.time, sleep=time.sleep):
        require_callable("make_batch", make_batch, "a function of a batch number, returning a Batch")
        require_rate("rate", rate, "mini-batches per second")
        self._make_batch = make_batch
        self._rate = float(rate)
        self._clock = clock
        self._sleep = sleep
        self._start: Optional[float] = None

    def __call__(self, index: int) -> bytes:
        index = int(index)
        batch = self._make_batch(index)
        meta = dict(batch.meta)
        meta.setdefault("id", index)
        if self._rate > 0:
            if self._start is None:
                self._start = self._clock() - index / self._rate
            due = self._start + index / self._rate
            wait = due - self._clock()
            if wait > 0:
                self._sleep(wait)
            meta["scheduled_at"] = due
        return wire.encode_batch(Batch(batch.x, batch.y, meta))


def batch_source(env, count: int, make_batch: Callable[[int], Batch], *, rate: float = 0.0, name: str = "tensair",
                 python_in: Union[PythonIn, str] = PythonIn.JVM):
    """A stream of ``count`` encoded batches, ``make_batch(0) .. make_batch(count - 1)``, paced at
    ``rate`` batches per second (0: as fast as the job takes them). See :class:`PacedBatches`.

    ``make_batch`` runs where ``python_in`` says (the ``TrainConfig.python_in`` of the ``train()``
    it feeds, so that it runs where the replicas' Python runs): inside the
    TaskManager's JVM by default (no Beam crossing for the batch, 1.23x the dense batches/s of two
    replicas, docs/measurements.md; it shares that TaskManager's GIL with them). Make it a
    module-level function or a ``functools.partial`` of one, and load data sets lazily inside it
    (once per worker). Saturated replicas hold it back through ``train()``'s credit gate
    (``TrainConfig.backpressure``).

    Example::

        batches = batch_source(env, 1000, functools.partial(my_batch, batch_size=64), rate=50)
        out = train(batches, model=build_model)
    """
    from . import types
    from .environment import use_this_interpreter
    from .execution import mapped

    from pyflink.datastream import StreamExecutionEnvironment

    require_int("count", count, 1)
    paced = PacedBatches(make_batch, rate)  # checks make_batch and the rate now
    python_in = python_in_of(python_in)
    if not isinstance(env, StreamExecutionEnvironment):
        raise ConfigError(f"env must be a pyflink StreamExecutionEnvironment. Received: env={env!r:.100}")
    use_this_interpreter(env)
    numbers = number_sequence(env, 0, int(count) - 1, name=f"{name}: batch numbers", uid=f"{name}-batch-numbers")
    made = mapped(numbers, paced, types.bytes_type(), python_in)
    return (made.name(f"{name}: make batches" + (f" at {rate:g}/s" if rate else "")).uid(f"{name}-make-batches")
            .set_parallelism(1))


def with_dead_letters(env, batches, letters, *, name: str = "tensair"):
    """``batches`` with ``letters`` (:class:`~pyflink_tensair.DeadLetter` s found before the job,
    e.g. a corpus's lines that are not UTF-8) joined in, so that ``train()`` reports and counts
    them with the rest (they take no replica's turn); ``batches`` itself when there are none."""
    if not letters:
        return batches
    from . import types

    found = env.from_collection([wire.encode_dead_letter(letter) for letter in letters], type_info=types.bytes_type())
    return batches.union(found.name(f"{name}: dead letters found before the job").uid(f"{name}-dead-letters-before"))

