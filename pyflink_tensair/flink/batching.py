"""``to_batches``: turns a stream of single records into a stream of encoded mini-batches."""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import numpy as np
from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction

from ..core import wire
from ..core.guards import check_record
from ..core.messages import Batch, DeadLetter, preview
from ..errors import ConfigError
from . import types
from .environment import use_this_interpreter
from .functions import END_OF_TIME


def collate_pairs(records: Sequence) -> Batch:
    """Default collate: each record is ``(features, label)`` (a tuple, list or Row); labels optional."""
    if not all(len(r) in (1, 2) for r in records):
        raise ConfigError("to_batches' default collate takes records of the form (features, label). "
                          f"Received: {records[0]!r}")
    x = np.asarray([r[0] for r in records], dtype=np.float32)
    y = np.asarray([r[1] for r in records]) if len(records[0]) == 2 else None
    return Batch(x=x, y=y)


class _Batcher(KeyedProcessFunction):
    def __init__(self, batch_size: int, collate: Callable, max_wait_ms: Optional[int],
                 features_shape: Optional[tuple], classes: Optional[int]):
        self._batch_size = batch_size
        self._collate = collate
        self._max_wait_ms = max_wait_ms
        self._features_shape = features_shape
        self._classes = classes

    def open(self, runtime_context):
        self._buffer: List = []
        self._count = 0
        self._seen = 0  # records so far: a dead letter's position
        self._labelled: Optional[bool] = None
        self._timer_registered = False
        self._deadline = None

    def _checked(self, value):
        """The record as the default collate takes it, or a dead-letter record in its place."""
        refusal, features, label = check_record(value, features_shape=self._features_shape,
                                                labelled=self._labelled, classes=self._classes)
        if refusal is not None:
            return None, wire.encode_dead_letter(DeadLetter(refusal.reason, refusal.detail, "record", "to_batches",
                                                            self._seen, preview(value)))
        if self._features_shape is None:  # the first good record sets the stream's shape
            self._features_shape = features.shape
        if self._labelled is None:
            self._labelled = label is not None
        return (features,) if label is None else (features, label), None

    def _flush(self):
        batch = self._collate(self._buffer)
        self._buffer = []
        self._deadline = None
        meta = dict(batch.meta)
        meta.setdefault("id", self._count)
        self._count += 1
        return wire.encode_batch(Batch(batch.x, batch.y, meta))

    def process_element(self, value, ctx):
        if not self._timer_registered:
            ctx.timer_service().register_event_time_timer(END_OF_TIME)
            self._timer_registered = True
        dead_letter = None
        if self._collate is collate_pairs:
            value, dead_letter = self._checked(value)
        self._seen += 1
        if dead_letter is not None:
            yield dead_letter
            return
        self._buffer.append(value)
        if len(self._buffer) >= self._batch_size:
            yield self._flush()
        elif self._max_wait_ms and self._deadline is None:
            self._deadline = ctx.timer_service().current_processing_time() + self._max_wait_ms
            ctx.timer_service().register_processing_time_timer(self._deadline)

    def on_timer(self, timestamp, ctx):
        due = timestamp == END_OF_TIME or (self._deadline is not None and timestamp >= self._deadline)
        if self._buffer and due:
            yield self._flush()


def to_batches(records, batch_size: int, *, collate: Callable[[Sequence], Batch] = collate_pairs,
               max_wait_ms: Optional[int] = None, features_shape: Optional[Sequence[int]] = None,
               classes: Optional[int] = None, name: str = "tensair"):
    """Groups ``records`` into mini-batches of ``batch_size`` (the last one may be smaller).

    ``collate`` turns a list of records into a :class:`~pyflink_tensair.Batch`. With
    ``max_wait_ms``, a partial batch is also sent once its first record has waited that long, so a
    slow stream still trains. Batches get consecutive ids. Runs as one subtask (batch order is
    the arrival order).

    With the default collate every record is checked first: a record that is not
    ``(features, label)``, whose features are not numbers, are NaN or infinite or do not have
    ``features_shape`` (default: the first good record's shape), or whose label is missing, not
    a finite number or (with ``classes``) not one of ``0 .. classes - 1``, becomes a dead letter
    (:class:`~pyflink_tensair.DeadLetter`, its position the record's index in this stream)
    instead of part of a batch. It travels down the batch stream to ``train()``, which reports
    it in ``TrainOutput.dead_letters`` (or fails the job, with ``Guards(bad_input="fail")``)
    without giving it a replica's turn: the good records are batched, and dealt, exactly as
    if the bad ones had not been there. A custom ``collate`` gets the records unchecked.

    Records from ``env.from_collection`` need no ``type_info`` (they travel pickled; NumPy
    features too); with one, use Java doubles, e.g. ``Types.TUPLE([Types.PRIMITIVE_ARRAY(
    Types.DOUBLE()), Types.LONG()])`` (``Types.PICKLED_BYTE_ARRAY()`` fails there with a
    ``ClassCastException``).

    Example (``tests/test_examples.py`` runs it)::

        from pyflink.datastream import StreamExecutionEnvironment
        from pyflink_tensair import decode_batch, to_batches

        env = StreamExecutionEnvironment.get_execution_environment()
        records = env.from_collection([([0.1, 0.2], 1), ([0.3, 0.4], 0), ([0.5, 0.6], 1)])
        batches = to_batches(records, batch_size=2)
        with batches.execute_and_collect() as collected:
            print([decode_batch(b).y.tolist() for b in collected])    # [[1, 0], [1]]
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ConfigError(f"batch_size must be an int >= 1. Received: batch_size={batch_size!r}")
    if max_wait_ms is not None and (not isinstance(max_wait_ms, int) or max_wait_ms < 1):
        raise ConfigError(f"max_wait_ms must be an int >= 1 or None. Received: max_wait_ms={max_wait_ms!r}")
    if classes is not None and (not isinstance(classes, int) or isinstance(classes, bool) or classes < 1):
        raise ConfigError(f"classes must be an int >= 1 or None. Received: classes={classes!r}")
    if features_shape is not None:
        if not isinstance(features_shape, (tuple, list)) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in features_shape):
            raise ConfigError(f"features_shape must be a tuple of ints >= 0 or None. Received: "
                              f"features_shape={features_shape!r}")
        features_shape = tuple(features_shape)
    use_this_interpreter(records._j_data_stream.getExecutionEnvironment())
    keyed = records.key_by(lambda _: 0, key_type=Types.INT())
    keyed._j_data_stream.getTransformation().getInputs()[0].setUid(f"{name}-batcher-key")
    return (keyed.process(_Batcher(batch_size, collate, max_wait_ms, features_shape, classes), output_type=types.bytes_type())
            .name(f"{name}: to mini-batches").uid(f"{name}-batcher").set_parallelism(1))
