"""``to_batches``: turns a stream of single records into a stream of encoded mini-batches."""

from __future__ import annotations

import json
from typing import Callable, List, Optional, Sequence, Union, cast

import numpy as np
from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

from ..core import wire
from ..core.guards import check_record
from ..core.messages import Batch, DeadLetter, preview
from ..config import PythonIn, python_in_of
from ..errors import ConfigError
from ..validation import is_int, require_callable, require_int, require_rate
from . import types
from .environment import add_channel_jar, use_this_interpreter
from .chunk_batchers import TextChunkBatcher
from .execution import in_jvm, keyed_process
from .environment import END_OF_TIME
from .pacing import Pacer


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


def record_kind(records) -> str:
    """How ``to_batches`` reads ``records``, by their Flink type: ``"text"`` (strings),
    ``"rows"`` (Rows or Tuples: read on the JVM), ``"pickled"`` (Python objects, e.g.
    ``env.from_collection``'s without a type: read in Python a chunk at a time) or ``"other"``."""
    from pyflink.java_gateway import get_gateway

    j_type = records._j_data_stream.getType()
    if j_type.equals(Types.STRING().get_java_type_info()):
        return "text"
    if j_type.equals(Types.PICKLED_BYTE_ARRAY().get_java_type_info()):
        return "pickled"
    jvm = get_gateway().jvm
    type_class = j_type.getTypeClass()
    for kind in (jvm.org.apache.flink.types.Row, jvm.org.apache.flink.api.java.tuple.Tuple):
        if kind._java_lang_class.isAssignableFrom(type_class):
            return "rows"
    return "other"


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
               python_in: Union[PythonIn, str] = PythonIn.JVM, parallelism: Optional[int] = None,
               name: str = "tensair"):
    """Groups ``records`` into mini-batches of ``batch_size`` (the last one may be smaller).

    How the records are read depends on their Flink type, so that none crosses into Python on
    its own (docs/ingestion.md has the figures):

    - **Rows or Tuples** ``(features[, label])`` (e.g. ``env.from_collection(..., type_info=
      Types.TUPLE([Types.PRIMITIVE_ARRAY(Types.DOUBLE()), Types.LONG()]))``, a table's rows:
      :func:`~pyflink_tensair.batches_from_table`) and **JSON text** with
      ``parse=``:func:`~pyflink_tensair.kafka.source.json_example` are batched on the JVM, each
      batch encoded there: no Python at all before the replicas. This batcher runs at
      ``parallelism`` (default: the records', chained to the operator that makes them, so a
      parallel source gets one batcher per subtask; batch ``n`` of subtask ``s`` of ``p`` has id
      ``s + p * n``).
    - **Python objects** (PyFlink's pickled records, e.g. ``env.from_collection`` without a type,
      NumPy features too) are grouped ``batch_size`` at a time on the JVM and cross into Python
      once per group, where they are unpickled, parsed (``parse``, optional) and checked together.
    - Other **text** (``parse=`` your own function, or none) is grouped on the JVM as
      :func:`text_batches` groups it, and parsed and checked a group at a time.

    With the default collate every record is checked first: a record that is not
    ``(features, label)``, whose features are not numbers, are NaN or infinite or do not have
    ``features_shape`` (default: the first good record's shape), or whose label is missing, not
    a finite number or (with ``classes``) not one of ``0 .. classes - 1``, becomes a dead letter
    (:class:`~pyflink_tensair.DeadLetter`, its position the record's index in its batcher's
    input) instead of part of a batch; ``parse`` raising ``ValueError``, ``TypeError``,
    ``KeyError``, ``IndexError`` or ``AttributeError`` makes one too (``not_a_record``). It
    travels down the batch stream to ``train()``, which reports it in ``TrainOutput.dead_letters``
    (or fails the job, with ``Guards(bad_input="fail")``) without giving it a replica's turn.
    For Rows, JSON text and Python objects the good records are batched, and dealt, exactly as if
    the bad ones had not been there; for other text, a bad record leaves its batch one short. The
    JVM reads JSON as Python's ``json`` and NumPy do, to the bit, except that it refuses strings
    among the features (NumPy reads ``"1.5"`` as 1.5).

    The batcher's position, its pending records and the shape it settled are Flink state, so a
    job restored from a checkpoint loses no record and batches none twice. With ``max_wait_ms``
    a partial batch is also sent once its first record has waited that long, so a slow stream
    still trains. ``rate`` > 0 paces the batches (at most that many per second, e.g. to replay a
    topic as a live stream, as ``batch_source`` does). Python work runs where ``python_in`` says
    (the ``TrainConfig.python_in`` of the ``train()`` it feeds: ``"jvm"`` by default).

    A custom ``collate`` (a list of records to a :class:`~pyflink_tensair.Batch`) gets the records
    unchecked, one Python call per record in one subtask, and its partial batch is not in the
    checkpoints; records of any other Flink type are checked one Python call per record too: the
    slow paths, for records no other way reads.

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
    require_int("parallelism", parallelism, 1, optional=True)
    python_in = python_in_of(python_in)
    types.require_stream("records", records, None, "records (of any type; (features, label) for the default collate)")
    use_this_interpreter(records._j_data_stream.getExecutionEnvironment())
    kind = record_kind(records)
    on_the_jvm = collate is collate_pairs and ((kind == "text" and _is_json_example(parse))
                                               or (kind == "rows" and parse is None))
    if on_the_jvm:
        return examples_on_the_jvm(records, batch_size, features_shape=shape, classes=classes,
                                   max_wait_ms=max_wait_ms, rate=rate, parallelism=parallelism, name=name)
    if parallelism not in (None, 1):
        raise ConfigError("parallelism must be 1 or None unless the records are batched on the JVM (the default "
                          "collate, and Rows, Tuples or JSON text read with json_example). Received: "
                          f"parallelism={parallelism} for {kind} records"
                          + ("" if collate is collate_pairs else " and a custom collate"))
    if collate is collate_pairs and kind == "text":
        return text_batches(records, batch_size, parse=parse or _as_it_is, features_shape=shape, classes=classes,
                            max_wait_ms=max_wait_ms, rate=rate, python_in=python_in, name=name)
    if collate is collate_pairs and kind == "pickled":
        return _pickled_batches(records, batch_size, parse, shape, classes, max_wait_ms, rate, python_in, name)
    batcher = _Batcher(batch_size, collate, max_wait_ms, shape, classes, parse, float(rate))
    if in_jvm(python_in) and kind == "text":
        add_channel_jar(records._j_data_stream.getExecutionEnvironment())  # Keying.OneKey
        batches = keyed_process(_one_key(records, name), batcher, types.bytes_type(), python_in)
    else:
        keyed = records.key_by(lambda _: 0, key_type=Types.INT())
        keyed._j_data_stream.getTransformation().getInputs()[0].setUid(f"{name}-batcher-key")
        batches = keyed.process(batcher, output_type=types.bytes_type())
    return batches.name(f"{name}: to mini-batches").uid(f"{name}-batcher").set_parallelism(1)


def _as_it_is(record):
    return record


def _is_json_example(parse) -> bool:
    from ..kafka.source import json_example

    return parse is json_example


def examples_on_the_jvm(records, batch_size: int, *, features_shape: Optional[tuple] = None,
                        classes: Optional[int] = None, max_wait_ms: Optional[int] = None, rate: float = 0.0,
                        parallelism: Optional[int] = None, name: str = "tensair"):
    """Mini-batches of JSON text examples or of Rows/Tuples ``(features[, label])``, made on the
    JVM (``ExampleBatches``): no record crosses into Python, each batch is already encoded.
    Runs at ``parallelism`` (default: the records', chained to the operator that makes them, so
    a parallel source gets one batcher per subtask); batch ``n`` of subtask ``s`` of ``p`` has id
    ``s + p * n``. Checks, dead letters and state as :func:`to_batches` describes."""
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    from .routing import java_ints

    j_records = records._j_data_stream
    add_channel_jar(j_records.getExecutionEnvironment())
    jvm = get_gateway().jvm
    operator = jvm.pyflinktensair.batching.ExampleBatches(
        batch_size, max_wait_ms or 0, None if features_shape is None else java_ints(list(features_shape)),
        classes or 0, float(rate), "to_batches")
    batches = DataStream(j_records.transform(f"{name}: to mini-batches on the JVM", types.bytes_type().get_java_type_info(),
                                             operator))
    batches = batches.name(f"{name}: to mini-batches on the JVM").uid(f"{name}-example-batches")
    subtasks = parallelism or j_records.getTransformation().getParallelism()
    if subtasks > 0:
        batches = batches.set_parallelism(subtasks)
    batches._j_data_stream.getTransformation().setChainingStrategy(
        jvm.org.apache.flink.streaming.api.operators.ChainingStrategy.ALWAYS)
    return batches


def _pickled_batches(records, batch_size, parse, shape, classes, max_wait_ms, rate, python_in, name):
    """Pickled records grouped into chunks on the JVM (``ByteChunks``), each chunk one crossing
    into Python, where :class:`~.chunk_batchers.PickledBatcher` makes full batches of the good ones."""
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    from .chunk_batchers import PickledBatcher

    j_records = records._j_data_stream
    add_channel_jar(j_records.getExecutionEnvironment())
    chunker = get_gateway().jvm.pyflinktensair.batching.ByteChunks(batch_size, max_wait_ms or 0)
    chunks = DataStream(j_records.transform(f"{name}: group records on the JVM", types.bytes_type().get_java_type_info(),
                                            chunker))
    chunks = chunks.name(f"{name}: group records on the JVM").uid(f"{name}-record-chunks").set_parallelism(1)
    batcher = PickledBatcher(batch_size, parse, shape, classes, float(rate))
    batches = keyed_process(_one_key(chunks, f"{name}-chunks"), batcher, types.bytes_type(), python_in)
    return batches.name(f"{name}: to mini-batches").uid(f"{name}-chunk-batcher").set_parallelism(1)


def text_batches(records, batch_size: int, *, parse: Callable, features_shape: Optional[Sequence[int]] = None,
                 classes: Optional[int] = None, max_wait_ms: Optional[int] = None, rate: float = 0.0,
                 python_in: Union[PythonIn, str] = PythonIn.JVM, name: str = "tensair"):
    """Mini-batches of a stream of text records (``Types.STRING()``, e.g. a Kafka topic's JSON
    values), grouped on the JVM so that no record crosses into Python on its own.

    With ``parse=``:func:`~pyflink_tensair.kafka.source.json_example` the examples are read and
    batched on the JVM (as :func:`to_batches` reads JSON text: full batches, the shape settled
    from the first good record kept in state). With another ``parse``, batch ``n`` holds the
    good records among the ``batch_size`` records of chunk ``n``, parsed and checked in Python a
    chunk at a time (a bad record leaves its batch one short; without ``features_shape`` the
    shape is learned from the first good record of each run, not kept in state, so pass it when
    checkpoints matter). The grouping's position and pending records are Flink state.

    Example::

        records = kafka_examples(env, "127.0.0.1:19092", "digits")
        batches = text_batches(records, 16, parse=json_example, classes=10, features_shape=(8, 8, 1))
    """
    shape = _checked_arguments(batch_size, features_shape, classes, max_wait_ms, parse, rate, optional=False)
    python_in = python_in_of(python_in)
    types.require_stream("records", records, Types.STRING(), types.TEXTS)
    if _is_json_example(parse):
        return examples_on_the_jvm(records, batch_size, features_shape=shape, classes=classes, max_wait_ms=max_wait_ms,
                                   rate=rate, name=name)
    batcher = TextChunkBatcher(batch_size, parse, shape, classes, float(rate))
    return chunked_batches(records, batch_size, batcher, max_wait_ms=max_wait_ms, python_in=python_in, name=name)


def chunked_batches(records, chunk_size: int, make: Callable, *, max_wait_ms: Optional[int] = None,
                    python_in: Union[PythonIn, str] = PythonIn.JVM, name: str = "tensair"):
    """The encoded batches (and dead letters) ``make`` yields for each chunk of ``chunk_size``
    text records, grouped on the JVM (``Chunks``: the grouping's position and pending records are
    Flink state) so that the records cross into Python once per chunk, where ``python_in`` says. ``make`` gets
    ``[n, records before chunk n, record, ...]`` (strings) and yields bytes; it must be picklable
    and depend only on the chunk, so that a restored job makes exactly the same batches.
    :func:`text_batches` makes one batch per chunk; the word2vec job many
    (:class:`pyflink_tensair.word2vec.lines.LineChunkBatches`)."""
    from pyflink.datastream import ProcessFunction

    from .execution import process

    python_in = python_in_of(python_in)
    chunks = jvm_chunks(records, chunk_size, max_wait_ms, name)

    class ChunkProcess(ProcessFunction):
        def process_element(self, value, ctx):
            yield from make(value)

    made = process(chunks, ChunkProcess(), types.bytes_type(), python_in)
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
