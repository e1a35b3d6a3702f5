"""``serve()``: inference operators that hold a model, apply its updates as they arrive, and answer events.

Operator graph (``P`` = ``ServeConfig.parallelism``)::

    events (JSON text) ─► rebalance ─► group into micro-batches (JVM, P) ─┐
                                                                           ├─► servers (P, Python) ─► a row per event (JVM) ─► predictions
    model updates (TrainOutput.updates) ─► broadcast ──────────────────────┘        ├─► freshness (side output, JSON)
                                                                                     └─► dead letters (side output, JSON)

The events cross into Python once per micro-batch (``Chunks``, the JVM grouping ``text_batches``
uses, with a maximum wait so that a slow stream is still answered); in the default format
(:func:`json_event`) they are parsed on the JVM too, between the grouping and the servers
(``JsonEvents``: keys and one float32 array cross, :func:`unpack_events`). The answers come back
once per micro-batch too (:func:`pack_answers`), made into rows on the JVM (``UnpackAnswers``). Each server keeps a
:class:`~.updates.ModelView`: it starts from the builder's weights (or the given ``.keras``) at
version 0 and applies every update that reaches it; a delta it cannot place waits for the next
snapshot. ``train()`` relays its updates (:mod:`~pyflink_tensair.flink.relay`): they come from a
source, whose checkpoint barrier comes when the checkpoint is triggered, so that a checkpoint
does not stop the servers until the training path's backlog has passed. A server holds no event between two callbacks, and the grouping keeps its pending
events in Flink state, so a job restored from a checkpoint loses no event and serves none twice;
the restored trainer publishes a snapshot at once (the servers start again from version 0).

A model whose inputs are all ids (named integer inputs of one id each, such as
``zoo.click_model``'s ``user`` and ``item``, rows of the id tables of the same names:
:mod:`pyflink_tensair.embeddings`) takes events whose ``"x"`` names an id per input,
``{"id": "e1", "x": {"user": "6434", "item": "448"}}``: the server looks each id up in the map the
held version was trained with (updates carry the maps; a ``.keras`` export's ``.ids.json`` gives a
server started from it its maps), an id without a row reading the shared row 0. Ids are looked up
as given: ``"7"`` is not ``7`` (``IdColumnBatches`` reads CSV, so its ids are strings).

Each prediction row says which model version answered and how old that version was (``model_age_ms``:
the time since the newest training step it includes; ``-1`` while a server still holds the
starting model). The freshness stream tells, once per update, how long each training step it
carried took to reach its first served prediction.
"""

from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Tuple

import numpy as np
from pyflink.common import Types
from pyflink.datastream import CoProcessFunction, OutputTag, ProcessFunction

from ..flink.types import DEAD_LETTERS, text_tag
from ..config import PythonIn, ServeConfig
from ..core.messages import DeadLetter, preview
from ..errors import ConfigError, WireFormatError
from ..validation import require_bool, require_callable

if TYPE_CHECKING:
    from pyflink.datastream import DataStream

SERVED_FIELDS = ["key", "prediction", "model_version", "model_age_ms", "served_at_ms"]


def json_event(text: str) -> Tuple[str, object]:
    """``(key, features)`` of one event's JSON text, ``{"id": ..., "x": [...]}`` (more fields
    may follow): the id a string or an integer, ``x`` numbers (nested lists for an input of more
    than one dimension; for a model of ids, an object of an id per input); raises ``ValueError`` or ``KeyError`` on anything else (a dead letter).
    ``serve`` reads this format on the JVM (``JsonEvents``), to the same keys and features.

        >>> json_event('{"id": 7, "x": [0.5, 1.0], "t": 12}')
        ('7', [0.5, 1.0])
    """
    event = json.loads(text)
    if not isinstance(event, dict):
        raise ValueError(f"an event is a JSON object with 'id' and 'x', not a JSON {type(event).__name__}")
    key = event["id"]
    if not isinstance(key, (str, int)) or isinstance(key, bool):
        raise ValueError("an event's 'id' is a string or an integer")
    return str(key), event["x"]


def prediction_type():
    """``Row(key, prediction, model_version, model_age_ms, served_at_ms)``: the key as a string,
    the model's output for the event flattened to a list of doubles (a ``LIST``, which a Table
    sees as ``ARRAY<DOUBLE>``), the version that answered, its age and the time of the answer
    (epoch ms). The rows are made on the JVM, from one record per micro-batch (:func:`pack_answers`)."""
    return Types.ROW_NAMED(SERVED_FIELDS, [Types.STRING(), Types.LIST(Types.DOUBLE()), Types.LONG(),
                                               Types.LONG(), Types.LONG()])


_ANSWERS_HEADER = struct.Struct("<iiqqq")


def pack_answers(keys, predictions, version: int, age_ms: int, served_at_ms: int) -> bytes:
    """One micro-batch's answers (``n >= 1`` keys, already UTF-8) as the record the JVM's
    ``UnpackAnswers`` operator makes rows of: ``n, width, version, age_ms, served_at_ms``, the
    keys' lengths, the keys, then the predictions as ``n x width`` little-endian doubles.

        >>> len(pack_answers([b"a", b"bc"], np.zeros((2, 3)), 4, 10, 1700000000000))
        91
    """
    encoded = list(keys)
    return _pack_answers(len(encoded), _key_section(encoded), predictions, version, age_ms, served_at_ms)


def _key_section(keys) -> bytes:
    """The keys (UTF-8 ``bytes``) as ``UnpackAnswers`` reads them: their lengths, then the keys."""
    return np.fromiter(map(len, keys), "<i4", len(keys)).tobytes() + b"".join(keys)


def _pack_answers(n: int, key_section, predictions, version: int, age_ms: int, served_at_ms: int) -> bytes:
    """:func:`pack_answers` of keys already laid out as ``n`` lengths then the bytes (``key_section``)."""
    values = np.ascontiguousarray(predictions, "<f8").reshape(n, -1)
    return b"".join([_ANSWERS_HEADER.pack(n, values.shape[1], version, age_ms, served_at_ms), key_section,
                     values.tobytes()])


def unpack_events(data):
    """``(events before the chunk, n, key_section, features, bad)`` of a chunk parsed on the JVM
    (``JsonEvents``): ``key_section`` is the ``n`` good events' key lengths and keys as
    :func:`pack_answers` lays them out, ``features`` a float32 array of ``n`` events, ``bad``
    ``[(index in the chunk, reason, text)]`` of the events set aside.

        >>> import struct
        >>> data = struct.pack("<qiii i", 5, 1, 1, 1, 2) + struct.pack("<i", 1) + b"k" + np.float32([1, 2]).tobytes()
        >>> data += struct.pack("<ii", 1, 3) + b"bad" + struct.pack("<i", 2) + b"{}"
        >>> before, n, keys, features, bad = unpack_events(data)
        >>> before, n, keys, features.tolist(), bad
        (5, 1, b'\\x01\\x00\\x00\\x00k', [[1.0, 2.0]], [(1, 'bad', '{}')])
    """
    view = memoryview(data)
    before, n, n_bad, rank = struct.unpack_from("<qiii", view, 0)
    at = 20
    shape = struct.unpack_from(f"<{rank}i", view, at)
    at += 4 * rank
    lengths = np.frombuffer(view, "<i4", n, at)
    keys_end = at + 4 * n + int(lengths.sum())
    key_section = bytes(view[at:keys_end])
    width = int(np.prod(shape, dtype=np.int64))
    features = np.frombuffer(view, "<f4", n * width, keys_end).reshape((n,) + tuple(shape))
    at = keys_end + 4 * n * width
    bad = []
    for _ in range(n_bad):
        index, size = struct.unpack_from("<ii", view, at)
        reason = bytes(view[at + 8:at + 8 + size]).decode("utf-8")
        at += 8 + size
        (size,) = struct.unpack_from("<i", view, at)
        bad.append((index, reason, bytes(view[at + 4:at + 4 + size]).decode("utf-8", "replace")))
        at += 4 + size
    return before, n, key_section, features, bad


def _input_shape(adapter):
    """The features' shape of one event for a model (a ``KerasModelAdapter``) of one input whose
    shape is fully known, else ``None``."""
    inputs = adapter.batch_spec().inputs
    shape = next(iter(inputs.values())) if len(inputs) == 1 else None
    return tuple(shape) if shape is not None and all(isinstance(n, int) for n in shape) else None


def _jvm_parse_shape(adapter):
    """The events' features shape when the JVM parses them (:func:`_input_shape`); ``None`` for a
    model of ids, whose events name ids that only the Python side's id maps turn into rows."""
    return None if _id_inputs(adapter) is not None else _input_shape(adapter)


def _id_inputs(adapter):
    """The input names of a model whose inputs are all named integer inputs of one value each
    (ids: rows of the id tables of the same names), else ``None``."""
    spec = adapter.batch_spec()
    names = tuple(spec.inputs)
    if names == (None,) and spec.inputs[None] == () and None in spec.integer_inputs:
        # one input: its tensor's name is its table's (ids once maps of that name come; else row numbers)
        return (adapter.model.inputs[0].name,)
    if names and None not in names and all(spec.inputs[n] == () and n in spec.integer_inputs for n in names):
        return names
    return None


def _freshness_tag(name: str) -> OutputTag:
    return text_tag(name, "freshness")


@dataclass(frozen=True)
class ServeOutput:
    """The streams ``serve`` returns.

    Attributes:
        predictions: one ``Row`` per good event (:func:`prediction_type`); a PyFlink user converts
            it to a Table with ``t_env.from_data_stream(predictions)``.
        freshness: JSON strings, one per update a server first used for a prediction:
            ``{"server", "version", "served_at_ms", "freshness_ms": [per training step],
            "step_versions": [the model version each step made]}``.
        dead_letters: JSON strings, one per event set aside (not parsed, or not fitting the
            model) and per unreadable update (:class:`~pyflink_tensair.DeadLetter`).
    """

    predictions: "DataStream"
    freshness: "DataStream"
    dead_letters: "DataStream"


class _Server:
    """What every server does (module docstring); the two PyFlink functions below host it."""

    def __init__(self, model, parse: Callable, config: ServeConfig):
        self._model = model
        self._parse = parse
        self._config = config

    def open(self, runtime_context):
        from ..flink.environment import subtask_index
        from ..models.keras_adapter import KerasModelAdapter, configure_tensorflow_threads, load_model
        from ..core.model_updates import ModelView

        if self._config.python_in is not PythonIn.JVM:  # a process of its own; in a JVM the replicas' budget holds
            configure_tensorflow_threads(1, None)
        self._index = subtask_index(runtime_context)
        keras_model = load_model(self._model, seed=self._config.seed)
        self._adapter = KerasModelAdapter(keras_model)
        self._predict = self._adapter.predict_function()
        self._shape = _input_shape(self._adapter)
        self._view = ModelView(self._adapter)
        self._id_inputs = _id_inputs(self._adapter)
        self._one_input = None in self._adapter.batch_spec().inputs  # takes an array, not a dict by name
        if isinstance(self._model, (str, os.PathLike)):  # an export: its id maps beside it
            from ..embeddings.maps import id_maps

            self._view.set_maps({name: table.ids for name, table in id_maps(self._model).items()})
        self._freshness_tag = _freshness_tag(self._config.name)
        self._dead_letters_tag = DEAD_LETTERS.tag(self._config.name)

    def _answer(self, chunk):
        if isinstance(chunk, (bytes, bytearray)):  # parsed on the JVM (JsonEvents)
            yield from self._answer_parsed(chunk)
            return
        before, texts = int(chunk[1]), chunk[2:]
        try:  # every event parses: the common case, in one pass
            keys, xs = map(list, zip(*[self._parse(text) for text in texts]))
            keys = [str(key).encode("utf-8") for key in keys]
            parsed_at = range(len(texts))
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):  # UnicodeError is a ValueError
            keys, xs, parsed_at = [], [], []
            for i, text in enumerate(texts):
                try:
                    key, x = self._parse(text)
                    key = str(key).encode("utf-8")
                except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
                    yield self._dead_letter(err, before + i, text)
                    continue
                keys.append(key)
                xs.append(x)
                parsed_at.append(i)
        features, bad = self._features(xs)
        for j, err in bad:
            yield self._dead_letter(err, before + parsed_at[j], texts[parsed_at[j]])
        if bad:
            dropped = {j for j, _ in bad}
            keys = [key for j, key in enumerate(keys) if j not in dropped]
        if not keys:
            return
        yield from self._predictions(len(keys), _key_section(keys), features)

    def _answer_parsed(self, data):
        before, n, key_section, features, bad = unpack_events(data)
        for index, reason, text in bad:
            yield self._dead_letters_tag, DeadLetter("not_a_record", reason[:300], "event", "serve", before + index,
                                                     preview(text)).to_json()
        if n:
            yield from self._predictions(n, key_section, features)

    def _predictions(self, n: int, key_section: bytes, features):
        y = np.asarray(self._predict(features), np.float64).reshape(n, -1)
        now_ms = time.time() * 1000.0
        age = self._view.age_ms(now_ms)
        served_steps = self._view.served(now_ms)
        if len(served_steps):
            yield self._freshness_tag, json.dumps({
                "server": self._index, "version": self._view.version, "served_at_ms": now_ms,
                "freshness_ms": [round(float(f), 3) for f in served_steps[:, 1]],
                "step_versions": [int(v) for v in served_steps[:, 0]]}, separators=(",", ":"))
        yield _pack_answers(n, key_section, y, int(self._view.version), -1 if age is None else int(round(age)),
                            int(now_ms))

    def _features(self, xs):
        """``(features stacked, [(index, error) of each event set aside])``: in one step when
        every event fits (the common case; per event, the checks cost a quarter of a server's
        time), else event by event, so that each bad one gets its own reason."""
        if self._id_inputs is not None and (not self._one_input or self._id_inputs[0] in self._view.id_rows):
            return self._id_features(xs)  # one integer input is ids only once maps of its name came
        try:
            stacked = np.asarray(xs, np.float32)
        except (ValueError, TypeError):
            stacked = None
        if stacked is not None and len(xs) and (self._shape is None or stacked.shape[1:] == self._shape):
            finite = np.isfinite(stacked).all(axis=tuple(range(1, stacked.ndim)))
            if finite.all():
                return stacked, []
            return stacked[finite], [(j, ValueError("features that are not finite")) for j in np.flatnonzero(~finite)]
        good, bad = [], []
        for j, x in enumerate(xs):
            try:
                x = np.asarray(x, np.float32)
                if self._shape is not None and x.shape != self._shape:
                    raise ValueError(f"features of shape {x.shape}, the model takes {self._shape}")
                if not np.all(np.isfinite(x)):
                    raise ValueError("features that are not finite")
            except (ValueError, TypeError) as err:
                bad.append((j, err))
                continue
            good.append(x)
        if not good:
            return None, bad
        try:
            return np.stack(good), bad
        except ValueError as err:  # a model of unknown input shape, events of different shapes
            return None, [(j, err) for j in range(len(xs))]

    def _id_features(self, xs):
        """The rows of each event's ids, per input, through the held version's maps."""
        names = self._id_inputs
        good, bad = [], []
        for j, x in enumerate(xs):
            if not isinstance(x, dict) or set(x) != set(names):
                bad.append((j, ValueError(f"the model takes ids: an event's 'x' is an object of one id for each of "
                                          f"{sorted(names)}")))
            elif not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in x.values()):
                bad.append((j, ValueError("an id is a string or an integer")))
            else:
                good.append(x)
        if not good:
            return None, bad
        rows = {name: self._view.rows_of(name, [x[name] for x in good]) for name in names}
        return (rows[names[0]] if self._one_input else rows), bad

    def _dead_letter(self, err, index: int, text):
        return self._dead_letters_tag, DeadLetter("not_a_record", f"{type(err).__name__}: {err}"[:300], "event",
                                                  "serve", index, preview(text)).to_json()

    def _update(self, data):
        from ..core.model_updates import decode_update

        try:
            update = decode_update(data)
        except WireFormatError as err:
            yield self._dead_letters_tag, DeadLetter("not_a_record", str(err)[:300], "update", "serve", -1,
                                                     preview(bytes(data))).to_json()
            return
        self._view.apply(update)


class UpdatedServer(_Server, CoProcessFunction):
    """Input 1: a chunk ``[n, events before it, event, ...]`` of event texts; input 2: an encoded update."""

    def process_element1(self, value, ctx):
        yield from self._answer(value)

    def process_element2(self, value, ctx):
        yield from self._update(value)


class FrozenServer(_Server, ProcessFunction):
    """A chunk of event texts in, predictions of the starting model out."""

    def process_element(self, value, ctx):
        yield from self._answer(value)


def _updates_stream(updates):
    """The updates stream of ``updates``: a ``DataStream`` of encoded updates, a ``TrainOutput``
    (whose config must publish them), or ``None`` (a frozen model)."""
    if updates is None or not hasattr(updates, "updates"):
        return updates
    train_config = getattr(updates, "config", None)
    if train_config is not None and train_config.updates is None:
        raise ConfigError("serve() got a TrainOutput whose training publishes no model updates: train with "
                          "TrainConfig(updates=ModelUpdates(...)) to serve the freshest model")
    return updates.updates


def serve(events, updates=None, *, model, config: ServeConfig = ServeConfig(),
          parse: Callable[[str], Tuple[str, object]] = json_event, check_model: bool = True) -> ServeOutput:
    """Answers ``events`` with ``model``, moved on by ``updates`` as they arrive.

    Args:
        events: a ``DataStream`` of event texts (``Types.STRING()``); ``parse`` makes each ``(key, features)``
            (default :func:`json_event`: ``{"id": ..., "x": [...]}``; for a model of ids, ``"x"``
            names an id per input, module docstring). Events that do not parse or fit the model
            become dead letters.
        updates: ``train(...)`` 's output (trained with ``TrainConfig(updates=ModelUpdates())``),
            or its ``updates`` stream, or ``None`` to serve the starting model as it is (a frozen
            baseline).
        model: what ``train`` got: a builder of a compiled ``keras.Model`` (importable by the
            workers) or the path of a saved ``.keras``; the servers start from it.
        config: :class:`~pyflink_tensair.ServeConfig` (parallelism, micro-batches, where Python runs).
        check_model: build the model once here, so a broken builder fails before the job starts;
            with the default ``parse`` and a model of one input of known shape, the events are
            then parsed on the JVM (``JsonEvents``: an ``"id"`` that is a string or an integer,
            an ``"x"`` of numbers), not in the servers.

    Returns:
        :class:`ServeOutput`: predictions (a Row per event), freshness, dead letters.

    Example (``tests/test_online_loop.py`` runs one like it)::

        out = train(batches, model=build, config=TrainConfig(updates=ModelUpdates(every_ms=200)))
        served = serve(events, out, model=build, config=ServeConfig(parallelism=2))
        served.predictions   # Row(key, prediction, model_version, model_age_ms, served_at_ms)
    """
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    from ..flink import types
    from ..flink.environment import add_channel_jar, keep_every_sink, use_this_interpreter
    from ..flink.execution import co_process, process
    from ..flink.loop import FeedbackLoop
    from ..flink.routing import java_ints
    from ..models import check_model_argument

    if not isinstance(config, ServeConfig):
        raise ConfigError(f"config must be a ServeConfig. Received: config={config!r}")
    require_callable("parse", parse, "a function of one event text")
    require_bool("check_model", check_model)
    check_model_argument(model)
    updates = _updates_stream(updates)  # a TrainOutput that publishes none is refused first
    types.require_stream("events", events, Types.STRING(), "event texts (Types.STRING())")
    if updates is not None:
        types.require_stream("updates", updates, types.bytes_type(),
                             "encoded model updates (a TrainOutput, its updates stream, or None)")
    from ..models.keras_adapter import KerasModelAdapter, load_model

    shape = _jvm_parse_shape(KerasModelAdapter(load_model(model, seed=config.seed))) if check_model else None
    j_env = events._j_data_stream.getExecutionEnvironment()
    add_channel_jar(j_env)
    use_this_interpreter(j_env)
    keep_every_sink(j_env)  # the side outputs' sinks too, when the predictions are collected
    name, p = config.name, config.parallelism
    chunker = get_gateway().jvm.pyflinktensair.feedback.Chunks(config.batch_size, max(1, int(config.max_wait_ms)))
    chunk_type = Types.BASIC_ARRAY(Types.STRING())
    chunks = DataStream(events.rebalance()._j_data_stream.transform("chunks", chunk_type.get_java_type_info(), chunker))
    chunks = chunks.name(f"{name}: group events on the JVM").uid(f"{name}-chunks").set_parallelism(p)
    answers = Types.PRIMITIVE_ARRAY(Types.BYTE())
    if parse is json_event and shape is not None:  # the default format, parsed on the JVM
        parsed = chunks._j_data_stream.transform("parse events", answers.get_java_type_info(),
                                                 get_gateway().jvm.pyflinktensair.serving.JsonEvents(java_ints(shape)))
        chunks = DataStream(parsed).name(f"{name}: parse events on the JVM").uid(f"{name}-parse").set_parallelism(p)
    if updates is None:
        served = process(chunks, FrozenServer(model, parse, config), answers, config.python_in)
    else:
        served = co_process(chunks.connect(updates.broadcast()), UpdatedServer(model, parse, config),
                            answers, config.python_in)
    served = served.name(f"{name}: servers").uid(f"{name}-servers").set_parallelism(p)
    rows = served._j_data_stream.transform("predictions", prediction_type().get_java_type_info(),
                                           get_gateway().jvm.pyflinktensair.serving.UnpackAnswers())
    predictions = DataStream(rows).name(f"{name}: a row per prediction").uid(f"{name}-predictions").set_parallelism(p)
    return ServeOutput(predictions=predictions,
                       freshness=FeedbackLoop.side_output(served, _freshness_tag(name)),
                       dead_letters=FeedbackLoop.side_output(served, DEAD_LETTERS.tag(name)))
