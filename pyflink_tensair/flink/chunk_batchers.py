"""The Python half of batching a chunk at a time: a chunk of records (grouped on the JVM, one
crossing into Python) becomes one encoded mini-batch and the dead letters of its bad records.

Picklable callables of a chunk, yielding encoded records; they depend only on the chunk (and on
what the first good record of the run settled), so a restored job makes the same batches.
"""

from __future__ import annotations

import pickle
import struct
from typing import Callable, Iterator, List, Optional, Tuple

import numpy as np
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.state import ListStateDescriptor

from ..core import wire
from ..core.columns import records_to_columns
from ..core.messages import Batch, DeadLetter, preview
from .environment import END_OF_TIME
from .pacing import Pacer

PARSE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)
_CHUNK_HEAD = struct.Struct("<qqi")
_LENGTH = struct.Struct("<i")


def split_chunk(data) -> Tuple[int, int, List[bytes]]:
    """``(n, records before chunk n, [record bytes, ...])`` of a chunk of ``ByteChunks`` (Java).

    Example::

        >>> split_chunk(struct.pack("<qqi", 3, 12, 2) + struct.pack("<i", 1) + b"a" + struct.pack("<i", 0))
        (3, 12, [b'a', b''])
    """
    view = memoryview(bytes(data) if isinstance(data, list) else data)
    number, before, count = _CHUNK_HEAD.unpack_from(view, 0)
    at, records = _CHUNK_HEAD.size, []
    for _ in range(count):
        (length,) = _LENGTH.unpack_from(view, at)
        at += _LENGTH.size
        records.append(bytes(view[at:at + length]))
        at += length
    return number, before, records


class ColumnBatcher:
    """Parsed records to batch ``n``: the good ones collated in one go
    (:func:`~pyflink_tensair.core.columns.records_to_columns`), the bad ones dead letters at
    their position. ``features_shape`` and whether records carry labels: given, or the first good
    record's of this run."""

    def __init__(self, features_shape: Optional[tuple], classes: Optional[int], rate: float):
        self.features_shape = features_shape
        self.classes = classes
        self._pacer = Pacer(rate)
        self.labelled: Optional[bool] = None

    def batch(self, number: int, before: int, records: list, unreadable: List[Tuple[int, DeadLetter]]) -> Iterator[bytes]:
        """``records``: ``(index in the chunk, record)`` of the records read; ``unreadable``:
        ``(index, dead letter)`` of those that could not be."""
        columns = read_columns(self, records)
        yield from dead_letters(records, columns, unreadable, before)
        if columns.size:
            yield wire.encode_batch(Batch(columns.x, columns.y, self._pacer.meta(number)))


def read_columns(reader, records: list):
    """The columns of ``records`` (``(index, record)``) as ``reader``'s stream reads them (its
    ``features_shape``, ``labelled`` and ``classes``), and what they settle kept on it."""
    columns = records_to_columns([r for _, r in records], features_shape=reader.features_shape,
                                 labelled=reader.labelled, classes=reader.classes)
    reader.features_shape, reader.labelled = columns.features_shape, columns.labelled
    return columns


def dead_letters(records: list, columns, unreadable: list, before: int) -> Iterator[bytes]:
    """The encoded dead letters of a chunk, in its order: those that could not be read
    (``unreadable``: ``(index, DeadLetter)``) and those ``columns`` refused."""
    letters = list(unreadable) + [
        (records[i][0], DeadLetter(refusal.reason, refusal.detail, "record", "to_batches", before + records[i][0],
                                   preview(records[i][1])))
        for i, refusal in columns.refused]
    for _, letter in sorted(letters, key=lambda pair: pair[0]):
        yield wire.encode_dead_letter(letter)


class TextChunkBatcher(ColumnBatcher):
    """Turns a chunk ``[n, records before it, text, ...]`` (``Chunks`` on the JVM) into batch
    ``n``: each text read with ``parse``; one it raises on (:data:`PARSE_ERRORS`) is a dead letter
    ``not_a_record``, and so is any bad record, so batch ``n`` may hold fewer records."""

    def __init__(self, batch_size: int, parse: Callable, features_shape: Optional[tuple], classes: Optional[int],
                 rate: float):
        super().__init__(features_shape, classes, rate)
        self._parse = parse

    def __call__(self, chunk):
        number, before, texts = int(chunk[0]), int(chunk[1]), chunk[2:]
        return self.batch(number, before, *_parsed(texts, self._parse, before))


def read_pickled(pickles: List[bytes], parse: Optional[Callable], before: int):
    """``(records, dead letters)`` of a chunk's pickled records: ``(index, record)`` of those that
    unpickle (and that ``parse`` reads, when given), ``(index, DeadLetter)`` of the others."""
    records, unreadable = [], []
    for i, data in enumerate(pickles):
        try:
            records.append((i, pickle.loads(data)))
        except Exception as err:  # noqa: BLE001 - any bytes may come; each is one record's fault
            unreadable.append((i, DeadLetter("not_a_record", f"not a pickled record: {type(err).__name__}: {err}"[:300],
                                             "record", "to_batches", before + i, preview(data))))
    if parse is None:
        return records, unreadable
    parsed, more = _parsed([r for _, r in records], parse, before, [i for i, _ in records])
    return parsed, unreadable + more


class PickledBatcher(KeyedProcessFunction):
    """Full batches of pickled records (PyFlink's Python objects, e.g. ``env.from_collection``'s
    without a type) that come a chunk at a time (``ByteChunks`` on the JVM, one key): a chunk's
    records are unpickled, parsed (``parse``, optional) and checked at once
    (:func:`~pyflink_tensair.core.columns.records_to_columns`); the bad ones become dead letters
    and the good ones join the pending examples, of which every full batch goes out, so the good
    records are batched exactly as if the bad ones had not been there. A chunk shorter than
    ``batch_size`` (``max_wait_ms`` ran out, or the input ended) sends what is pending.

    The pending examples, the batch count, the shape and whether records carry labels are one
    Flink state value, written once per chunk: a restored job batches exactly the records it
    would have."""

    def __init__(self, batch_size: int, parse: Optional[Callable], features_shape: Optional[tuple],
                 classes: Optional[int], rate: float):
        self._batch_size = batch_size
        self._parse = parse
        self.features_shape = features_shape
        self.classes = classes
        self._rate = rate

    def open(self, runtime_context):
        from . import types

        # a list of one: an empty ValueState of bytes fails to read in the JVM's Python (PyFlink 2.3)
        self._state = runtime_context.get_list_state(ListStateDescriptor("pending", types.bytes_type()))
        self._pacer = Pacer(self._rate)
        self._loaded = False
        self._timer_registered = False
        self._count, self.labelled = 0, None
        self._x: Optional[np.ndarray] = None
        self._y: Optional[np.ndarray] = None

    def _load(self):
        """Reads the state once, in the first callback (state needs a key; open has none)."""
        if self._loaded:
            return
        self._loaded = True
        saved_list = list(self._state.get() or [])
        if not saved_list:
            return
        saved = wire.decode_batch(saved_list[0])
        self._count, self.labelled = saved.meta["count"], saved.meta["labelled"]
        if saved.meta["shape"] is not None:
            self.features_shape = tuple(saved.meta["shape"])
        if len(saved.x):
            self._x, self._y = np.array(saved.x), None if saved.y is None else np.array(saved.y)

    def _save(self):
        x = self._x if self._x is not None else np.zeros((0,), np.float32)
        shape = None if self.features_shape is None else list(self.features_shape)
        self._state.update([wire.encode_batch(Batch(x, self._y, {"count": self._count, "labelled": self.labelled,
                                                                "shape": shape}))])

    def _take(self, size: int) -> bytes:
        x, y = self._x[:size], None if self._y is None else self._y[:size]
        self._x, self._y = self._x[size:], None if self._y is None else self._y[size:]
        if not len(self._x):
            self._x = self._y = None
        meta = self._pacer.meta(self._count)
        self._count += 1
        return wire.encode_batch(Batch(x, y, meta))

    def process_element(self, value, ctx):
        self._load()
        if not self._timer_registered:
            ctx.timer_service().register_event_time_timer(END_OF_TIME)
            self._timer_registered = True
        number, before, pickles = split_chunk(value)
        records, letters = read_pickled(pickles, self._parse, before)
        columns = read_columns(self, records)
        yield from dead_letters(records, columns, letters, before)
        if columns.size:
            self._x = columns.x if self._x is None else np.concatenate([self._x, columns.x])
            if columns.y is not None:
                self._y = columns.y if self._y is None else np.concatenate([self._y, columns.y])
        while self._x is not None and len(self._x) >= self._batch_size:
            yield self._take(self._batch_size)
        if len(pickles) < self._batch_size and self._x is not None:
            yield self._take(len(self._x))
        self._save()

    def on_timer(self, timestamp, ctx):
        self._load()
        if timestamp == END_OF_TIME and self._x is not None:
            yield self._take(len(self._x))
            self._save()


def _parsed(values, parse: Callable, before: int, indices: Optional[List[int]] = None):
    """``(records, dead letters)``: ``(index, parse(value))`` of the values ``parse`` reads, and
    ``(index, DeadLetter)`` of the others."""
    records, letters = [], []
    for k, value in enumerate(values):
        i = k if indices is None else indices[k]
        try:
            records.append((i, parse(value)))
        except PARSE_ERRORS as err:
            letters.append((i, DeadLetter("not_a_record", f"{type(err).__name__}: {err}"[:300], "record", "to_batches",
                                          before + i, preview(value))))
    return records, letters
