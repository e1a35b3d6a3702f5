"""``to_batches``: turns a stream of single records into a stream of encoded mini-batches."""

from __future__ import annotations

import json
import time
from typing import Callable, Dict, List, Optional, Sequence, Union, cast

import numpy as np
from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

from ..core import wire
from ..core.guards import check_record
from ..core.messages import Batch, DeadLetter, preview
from ..config import TrainConfig, as_train_config
from ..errors import ConfigError
from ..validation import is_int, require_callable, require_int, require_rate
from . import types
from .environment import add_channel_jar, use_this_interpreter
from .execution import in_jvm, keyed_process
from .functions import END_OF_TIME


def collate_pairs(records: Sequence) -> Batch:
    """Default collate: each record is ``(features, label)`` (a tuple, list or Row); labels optional."""
    if not all(len(r) in (1, 2) for r in records):
        raise ConfigError("to_batches' default collate takes records of the form (features, label). "
                          f"Received: {records[0]!r}")
    x = np.asarray([r[0] for r in records], dtype=np.float32)
    y = np.asarray([r[1] for r in records]) if len(records[0]) == 2 else None
    return Batch(x=x, y=y)


def _encode_pending(record) -> bytes:
    """A checked ``(features[, label])`` record as Flink state holds it (no pickle on a data path)."""
    features = np.asarray(record[0])[np.newaxis]
    return wire.encode_batch(Batch(features, np.asarray([record[1]]) if len(record) == 2 else None))


def _decode_pending(data: bytes):
    batch = wire.decode_batch(data)
    features = cast(np.ndarray, batch.x)  # _encode_pending wrote one array
    return (features[0],) if batch.y is None else (features[0], batch.y[0].item())


class _Batcher(KeyedProcessFunction):
    """With the default collate, its position and the records of its partial batch are Flink
    state: a job restored from a checkpoint batches exactly the records it would have (a replayed
    source, such as Kafka's, resumes after the last record in that state)."""

    def __init__(self, batch_size: int, collate: Callable, max_wait_ms: Optional[int],
                 features_shape: Optional[tuple], classes: Optional[int], parse: Optional[Callable], rate: float = 0.0):
        self._pacer = Pacer(rate)
        self._batch_size = batch_size
        self._collate = collate
        self._max_wait_ms = max_wait_ms
        self._features_shape = features_shape
        self._classes = classes
        self._parse = parse

    def open(self, runtime_context):
        self._buffer: List = []
        self._count = 0
        self._seen = 0  # records so far: a dead letter's position
        self._labelled: Optional[bool] = None
        self._timer_registered = False
        self._deadline = None
        self._stateful = self._collate is collate_pairs
        self._progress_state = runtime_context.get_state(ValueStateDescriptor("progress", Types.STRING()))
        self._pending_state = runtime_context.get_list_state(ListStateDescriptor("pending", types.bytes_type()))
        self._loaded = False
        self._restored = False  # a restored partial batch: its max_wait_ms deadline was not kept

    def _load(self):
        """Reads the state once, in the first callback (state needs a key; open has none)."""
        if self._loaded or not self._stateful:
            return
        self._loaded = True
        self._buffer = [_decode_pending(data) for data in (self._pending_state.get() or [])]
        progress = self._progress_state.value()
        if progress is not None:
            saved = json.loads(progress)
            self._count, self._labelled = saved["count"], saved["labelled"]
            self._seen = saved["seen"] + len(self._buffer)
            if saved["shape"] is not None:
                self._features_shape = tuple(saved["shape"])
        if self._buffer:  # restored records, perhaps before the first save
            self._restored = True
            self._seen = max(self._seen, len(self._buffer))
            if self._features_shape is None:
                self._features_shape = np.shape(self._buffer[0][0])
            if self._labelled is None:
                self._labelled = len(self._buffer[0]) == 2

    def _save(self, record=None):
        """One state write per pending record; the position only when a batch or dead letter
        goes out (records seen, less the pending ones, which the state holds anyway)."""
        if not self._stateful:
            return
        if record is not None:
            self._pending_state.add(_encode_pending(record))
            return
        shape = None if self._features_shape is None else list(self._features_shape)
        self._progress_state.update(json.dumps({"count": self._count, "seen": self._seen - len(self._buffer),
                                                "labelled": self._labelled, "shape": shape}))

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
        self._restored = False
        if self._stateful:
            self._pending_state.clear()
        self._deadline = None
        meta = dict(batch.meta)
        paced = self._pacer.meta(meta.get("id", self._count), position=self._count)
        meta.update({k: v for k, v in paced.items() if k not in meta})
        self._count += 1
        return wire.encode_batch(Batch(batch.x, batch.y, meta))

    def process_element(self, value, ctx):
        self._load()
        if not self._timer_registered:
            ctx.timer_service().register_event_time_timer(END_OF_TIME)
            self._timer_registered = True
        dead_letter = None
        if self._parse is not None:
            try:
                value = self._parse(value)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
                dead_letter = wire.encode_dead_letter(DeadLetter("not_a_record", f"{type(err).__name__}: {err}"[:300],
                                                                 "record", "to_batches", self._seen, preview(value)))
        if dead_letter is None and self._collate is collate_pairs:
            value, dead_letter = self._checked(value)
        self._seen += 1
        if dead_letter is not None:
            self._save()
            yield dead_letter
            return
        self._buffer.append(value)
        if len(self._buffer) >= self._batch_size:
            out = self._flush()
            self._save()
            yield out
            return
        self._save(value)
        if self._max_wait_ms and self._deadline is None:
            self._deadline = ctx.timer_service().current_processing_time() + self._max_wait_ms
            ctx.timer_service().register_processing_time_timer(self._deadline)

    def on_timer(self, timestamp, ctx):
        self._load()
        due = (timestamp == END_OF_TIME or (self._deadline is not None and timestamp >= self._deadline)
               or (self._restored and self._deadline is None))  # the restored timer of a restored batch
        if self._buffer and due:
            self._restored = False
            out = self._flush()
            self._save()
            yield out


def _checked_arguments(batch_size, features_shape, classes, max_wait_ms, parse, rate, *,
                       optional: bool) -> Optional[tuple]:
    """``features_shape`` as a tuple (or ``None``), once the batchers' arguments are checked; ``parse``
    may be ``None`` when ``optional``."""
    require_int("batch_size", batch_size, 1)
    require_int("classes", classes, 1, optional=True)
    require_int("max_wait_ms", max_wait_ms, 1, optional=True)
    require_callable("parse", parse, "a function of one record", optional=optional)
    require_rate("rate", rate)
    if features_shape is None:
        return None
    if not isinstance(features_shape, (tuple, list)) or not all(is_int(d) and d >= 0 for d in features_shape):
        raise ConfigError("features_shape must be a tuple of ints >= 0 or None. "
                          f"Received: features_shape={features_shape!r}")
    return tuple(features_shape)


def _is_text(records) -> bool:
    """Whether ``records`` are strings, which the JVM's Python reads as they are (pickled Python
    objects it cannot unpickle; other Flink types it was not tried with)."""
    return records._j_data_stream.getType().equals(Types.STRING().get_java_type_info())


def _one_key(records, name: str):
    """``records`` keyed by one key on the JVM (``Row(0, record)``; no Python key selector)."""
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    from .routing import keyed_by_replica

    gateway = get_gateway()
    j_records = records._j_data_stream
    fields = gateway.new_array(gateway.jvm.org.apache.flink.api.common.typeinfo.TypeInformation, 2)
    fields[0], fields[1] = Types.INT().get_java_type_info(), j_records.getTransformation().getOutputType()
    row_type = gateway.jvm.org.apache.flink.api.java.typeutils.RowTypeInfo(fields)
    keyed_rows = DataStream(j_records.map(gateway.jvm.pyflinktensair.feedback.Keying.OneKey(), row_type))
    keyed_rows = keyed_rows.name(f"{name}: one key").uid(f"{name}-batcher-key")
    parallelism = j_records.getTransformation().getParallelism()
    if parallelism > 0:
        keyed_rows = keyed_rows.set_parallelism(parallelism)
    return keyed_by_replica(keyed_rows)


def to_batches(records, batch_size: int, *, collate: Callable[[Sequence], Batch] = collate_pairs,
               max_wait_ms: Optional[int] = None, features_shape: Optional[Sequence[int]] = None,
               classes: Optional[int] = None, parse: Optional[Callable] = None, rate: float = 0.0,
               config: Optional[TrainConfig] = None, name: str = "tensair"):
    """Groups ``records`` into mini-batches of ``batch_size`` (the last one may be smaller).

    ``collate`` turns a list of records into a :class:`~pyflink_tensair.Batch`. With
    ``max_wait_ms``, a partial batch is also sent once its first record has waited that long, so a
    slow stream still trains. Batches get consecutive ids. Runs as one subtask (batch order is
    the arrival order). ``parse`` (optional) turns each record into what ``collate`` takes first,
    e.g. :func:`~pyflink_tensair.kafka.source.json_example` for JSON text; a record it raises
    ``ValueError``, ``TypeError``, ``KeyError``, ``IndexError`` or ``AttributeError`` on becomes a
    dead letter (``not_a_record``). ``rate`` > 0 paces the batches (at most that many per second,
    e.g. to replay a topic as a live stream, as ``batch_source`` does). The batcher runs where
    ``config`` (the :class:`~pyflink_tensair.TrainConfig` of the ``train()`` it feeds) runs
    Python: with ``python_in="jvm"`` (the default), text records (e.g. a Kafka source's strings)
    are keyed and batched inside the TaskManager's JVM (no Beam bundle per record, which caps a
    batcher in a worker process near 150 records/s here); records of any other type (pickled
    Python objects, say) are batched in a Python worker process.

    With the default collate, the batcher's position and its partial batch are Flink state, so a
    job restored from a checkpoint loses no record and batches none twice; with a custom
    ``collate`` (records of any type, which Flink state would have to pickle) a partial batch
    at a checkpoint is not in it.

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
    shape = _checked_arguments(batch_size, features_shape, classes, max_wait_ms, parse, rate, optional=True)
    require_callable("collate", collate, "a function of a list of records, returning a Batch")
    config = as_train_config(TrainConfig() if config is None else config)
    types.require_stream("records", records, None, "records (of any type; (features, label) for the default collate)")
    use_this_interpreter(records._j_data_stream.getExecutionEnvironment())
    batcher = _Batcher(batch_size, collate, max_wait_ms, shape, classes, parse, float(rate))
    if in_jvm(config.python_in) and _is_text(records):
        add_channel_jar(records._j_data_stream.getExecutionEnvironment())  # Keying.OneKey
        batches = keyed_process(_one_key(records, name), batcher, types.bytes_type(), config.python_in)
    else:
        keyed = records.key_by(lambda _: 0, key_type=Types.INT())
        keyed._j_data_stream.getTransformation().getInputs()[0].setUid(f"{name}-batcher-key")
        batches = keyed.process(batcher, output_type=types.bytes_type())
    return batches.name(f"{name}: to mini-batches").uid(f"{name}-batcher").set_parallelism(1)


class Pacer:
    """Paces numbered batches at ``rate`` per second (0: unpaced): batch ``n`` goes out no earlier
    than ``start + n / rate``, ``start`` taken from the first batch this process sees (after a
    restore: paced from then on). :meth:`meta` waits until the batch is due and returns its
    ``{"id": n, "scheduled_at": due}``.

    Example::

        >>> Pacer(0).meta(7)
        {'id': 7}
    """

    def __init__(self, rate: float):
        self.rate = float(rate)
        self._start: Optional[float] = None

    def meta(self, number: int, position: Optional[float] = None) -> dict:
        """``position``: where the batch falls in the paced sequence (default: ``number``)."""
        meta: Dict[str, Union[int, float]] = {"id": int(number)}
        if self.rate > 0:
            at = number if position is None else position
            if self._start is None:
                self._start = time.time() - at / self.rate
            due = self._start + at / self.rate
            wait = due - time.time()  # read the clock once: a second read may be past due
            if wait > 0:
                time.sleep(wait)
            meta["scheduled_at"] = due
        return meta


class _ChunkBatcher:
    """Turns a chunk ``[n, records before it, record, ...]`` (``Chunks`` on the JVM) into batch ``n``: each record
    parsed and checked as ``to_batches`` does, the bad ones set aside as dead letters (so batch ``n``
    may hold fewer records), the good ones collated and encoded once."""

    def __init__(self, batch_size: int, parse: Callable, features_shape: Optional[tuple], classes: Optional[int],
                 rate: float):
        self._batch_size = batch_size
        self._parse = parse
        self._features_shape = features_shape
        self._classes = classes
        self._pacer = Pacer(rate)
        self._labelled: Optional[bool] = None

    def __call__(self, chunk):
        number, before, records = int(chunk[0]), int(chunk[1]), chunk[2:]
        good = []
        for i, text in enumerate(records):
            position = before + i
            try:
                record = self._parse(text)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
                yield wire.encode_dead_letter(DeadLetter("not_a_record", f"{type(err).__name__}: {err}"[:300], "record",
                                                         "to_batches", position, preview(text)))
                continue
            refusal, features, label = check_record(record, features_shape=self._features_shape,
                                                    labelled=self._labelled, classes=self._classes)
            if refusal is not None:
                yield wire.encode_dead_letter(DeadLetter(refusal.reason, refusal.detail, "record", "to_batches",
                                                         position, preview(record)))
                continue
            if self._features_shape is None:
                self._features_shape = features.shape
            if self._labelled is None:
                self._labelled = label is not None
            good.append((features,) if label is None else (features, label))
        if not good:
            return
        batch = collate_pairs(good)
        yield wire.encode_batch(Batch(batch.x, batch.y, self._pacer.meta(number)))


def text_batches(records, batch_size: int, *, parse: Callable, features_shape: Optional[Sequence[int]] = None,
                 classes: Optional[int] = None, max_wait_ms: Optional[int] = None, rate: float = 0.0,
                 config: Optional[TrainConfig] = None, name: str = "tensair"):
    """Mini-batches of a stream of text records (``Types.STRING()``, e.g. a Kafka topic's JSON
    values), grouped on the JVM so that the records cross into Python once per batch.

    Like :func:`to_batches` with ``parse``, with three differences: batch ``n`` holds the good
    records among the ``batch_size`` records of chunk ``n`` (a bad record becomes a dead letter
    and its batch is one record short, instead of the next record taking its place); a custom
    collate is not offered; and without ``features_shape`` the shape (and whether records carry
    labels) is learned from the first good record of each run, not kept in state, so pass it when
    checkpoints matter. The grouping's position and pending records are Flink state. About 20x the records per second of ``to_batches`` on digits from Kafka
    (docs/kafka.md).

    Example::

        records = kafka_examples(env, "127.0.0.1:19092", "digits")
        batches = text_batches(records, 16, parse=json_example, classes=10, features_shape=(8, 8, 1))
    """
    shape = _checked_arguments(batch_size, features_shape, classes, max_wait_ms, parse, rate, optional=False)
    batcher = _ChunkBatcher(batch_size, parse, shape, classes, float(rate))
    return chunked_batches(records, batch_size, batcher, max_wait_ms=max_wait_ms, config=config, name=name)


def chunked_batches(records, chunk_size: int, make: Callable, *, max_wait_ms: Optional[int] = None,
                    config: Optional[TrainConfig] = None, name: str = "tensair"):
    """The encoded batches (and dead letters) ``make`` yields for each chunk of ``chunk_size``
    text records, grouped on the JVM (``Chunks``: the grouping's position and pending records are
    Flink state) so that the records cross into Python once per chunk, where ``config`` (the
    :class:`~pyflink_tensair.TrainConfig` of the ``train()`` it feeds) runs Python. ``make`` gets
    ``[n, records before chunk n, record, ...]`` (strings) and yields bytes; it must be picklable
    and depend only on the chunk, so that a restored job makes exactly the same batches.
    :func:`text_batches` makes one batch per chunk; the word2vec job many
    (:class:`pyflink_tensair.word2vec.lines.LineChunkBatches`)."""
    from pyflink.datastream import ProcessFunction

    from .execution import process

    config = as_train_config(TrainConfig() if config is None else config)
    chunks = jvm_chunks(records, chunk_size, max_wait_ms, name)

    class ChunkProcess(ProcessFunction):
        def process_element(self, value, ctx):
            yield from make(value)

    made = process(chunks, ChunkProcess(), types.bytes_type(), config.python_in)
    return made.name(f"{name}: to mini-batches").uid(f"{name}-batcher").set_parallelism(1)


def jvm_chunks(records, chunk_size: int, max_wait_ms: Optional[int], name: str):
    """``records`` (text) grouped into chunks ``[n, records before chunk n, record, ...]`` on the
    JVM (``Chunks``), one subtask."""
    from pyflink.common import Types as T
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    require_int("chunk_size", chunk_size, 1)
    require_int("max_wait_ms", max_wait_ms, 1, optional=True)
    types.require_stream("records", records, T.STRING(), types.TEXTS)
    j_env = records._j_data_stream.getExecutionEnvironment()
    add_channel_jar(j_env)
    use_this_interpreter(j_env)
    chunk_type = T.BASIC_ARRAY(T.STRING())
    chunker = get_gateway().jvm.pyflinktensair.feedback.Chunks(chunk_size, max_wait_ms or 0)
    chunks = DataStream(records._j_data_stream.transform("chunks", chunk_type.get_java_type_info(), chunker))
    return chunks.name(f"{name}: group records on the JVM").uid(f"{name}-chunks").set_parallelism(1)
