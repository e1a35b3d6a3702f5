"""``join_labels()``: events joined with the labels that arrive after them, in keyed state.

Operator graph::

    events (JSON text) ─► key (Python: id, dead letters) ─┐
                                                           ├─► key_by id (JVM) ─► join (Python, keyed state + timers) ─► training records (JSON)
    labels (JSON text) ─► key (Python: id, dead letters) ─┘                           ├─► timeouts (side output, JSON)
                                                                                       └─► dead letters (side output, JSON)

State machine of one id (``t``: the record's time, event time from the streams' timestamps and
watermarks, or processing time)::

    (none) --event--> WAITING --label--> JOINED (training record out)
    WAITING --timer at t_event + timeout--> TIMED_OUT (counted; with default_label a training record out)
    (none) --label--> LABEL_FIRST --event (not after the label)--> JOINED;  --timer at t_label--> dead letter "label_without_event"
    LABEL_FIRST --event more than the timeout before the label--> TIMED_OUT, and the label a dead letter "label_after_timeout"

A label joins its event when ``t_event <= t_label <= t_event + timeout``, whatever order the two
streams deliver them in.
    JOINED --label--> dead letter "second_label";  TIMED_OUT --label--> dead letter "label_after_timeout"
    JOINED / TIMED_OUT --timer at close + retention--> (none): the state is cleared

Everything lives in Flink keyed state and timers, so a restored job joins every label exactly once.
In event time the outcome depends only on the records' timestamps, never on how fast the job runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from pyflink.common import Row, Types
from pyflink.datastream import KeyedCoProcessFunction, ProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

from ..core.messages import DeadLetter, preview
from ..flink.types import DEAD_LETTERS, text_tag
from ..config import JoinConfig, with_fields

if TYPE_CHECKING:
    from pyflink.datastream import DataStream

WAITING, LABEL_FIRST, JOINED, TIMED_OUT = 1, 2, 3, 4


def json_key(text: str) -> str:
    """The ``"id"`` of one JSON record, as a string; ``ValueError``/``KeyError`` on anything else.

        >>> json_key('{"id": 3, "y": 1}')
        '3'
    """
    record = json.loads(text)
    if not isinstance(record, dict):
        raise ValueError(f"a record is a JSON object with 'id', not a JSON {type(record).__name__}")
    return str(record["id"])


def json_label(text: str):
    """The ``"y"`` of one label's JSON text."""
    return json.loads(text)["y"]


def training_record(event_text: str, label, timed_out: bool = False) -> str:
    """The event's JSON with its label as ``"y"`` (and ``"timed_out"``): what
    :func:`~pyflink_tensair.text_batches` with ``json_example`` reads.

        >>> training_record('{"id": "a", "x": [1.0]}', 1)
        '{"id":"a","x":[1.0],"y":1,"timed_out":false}'
    """
    record = json.loads(event_text)
    record["y"] = label
    record["timed_out"] = timed_out
    return json.dumps(record, separators=(",", ":"))


@dataclass(frozen=True)
class JoinOutput:
    """The streams ``join_labels`` returns.

    Attributes:
        records: JSON training records, one per joined event (and per timed-out event given
            ``default_label``): the event's fields with ``"y"`` and ``"timed_out"``.
        timeouts: JSON ``{"id", "t", "default_label"}``, one per event whose label did not come in time.
        dead_letters: JSON dead letters: records that do not parse, and labels with reason
            ``label_without_event``, ``second_label`` or ``label_after_timeout``.
    """

    records: "DataStream"
    timeouts: "DataStream"
    dead_letters: "DataStream"


class KeyRecords(ProcessFunction):
    """``Row(id, text)`` of each record; one that has no id becomes a dead letter."""

    def __init__(self, key: Callable[[str], str], what: str, name: str):
        self._key, self._what, self._name = key, what, name

    def open(self, runtime_context):
        self._dead_letters = DEAD_LETTERS.tag(self._name)
        self._seen = 0

    def process_element(self, value, ctx):
        self._seen += 1
        try:
            key = self._key(value)
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            yield self._dead_letters, DeadLetter("not_a_record", f"{type(err).__name__}: {err}"[:300], self._what,
                                                 "join_labels", -self._seen, preview(value)).to_json()
            return
        yield Row(key, value)


def _key(ctx) -> str:
    key = ctx.get_current_key()
    return key[0] if isinstance(key, (tuple, list, Row)) else key  # Row(id) on the JVM


class JoinLabels(KeyedCoProcessFunction):
    """Input 1: an event's text; input 2: a label's text; keyed by id (module docstring)."""

    def __init__(self, timeout_ms: float, retention_ms: float, event_time: bool, default_label, label: Callable,
                 name: str):
        self._timeout_ms = int(timeout_ms)
        self._retention_ms = int(retention_ms)
        self._event_time = event_time
        self._default_label = default_label
        self._label = label
        self._name = name

    def open(self, runtime_context):
        def value(name, kind):
            return runtime_context.get_state(ValueStateDescriptor(f"join/{name}", kind))

        self._status = value("status", Types.INT())
        self._event = value("event", Types.STRING())
        self._label_text = value("label", Types.STRING())
        self._timer = value("timer", Types.LONG())  # the one timer this id waits for
        self._timeouts = text_tag(self._name, "timeouts")
        self._dead_letters = DEAD_LETTERS.tag(self._name)

    def _now(self, ctx) -> int:
        if self._event_time and ctx.timestamp() is not None:
            return int(ctx.timestamp())
        return int(ctx.timer_service().current_processing_time())

    def _label_time(self) -> int:
        """The time of the label an id holds in ``LABEL_FIRST``, from the timer it set."""
        return self._timer.value() - (0 if self._event_time else self._timeout_ms)

    def _wait_until(self, ctx, at: int) -> None:
        timers = ctx.timer_service()
        old = self._timer.value()
        if old is not None:
            (timers.delete_event_time_timer if self._event_time else timers.delete_processing_time_timer)(old)
        (timers.register_event_time_timer if self._event_time else timers.register_processing_time_timer)(at)
        self._timer.update(at)

    def _letter(self, reason: str, detail: str, ctx, text: str):
        return self._dead_letters, DeadLetter(reason, detail, "label", "join_labels", self._now(ctx),
                                              preview(text)).to_json()

    def _close(self, ctx, status: int, at: int) -> None:
        self._status.update(status)
        self._event.clear()
        self._label_text.clear()
        self._wait_until(ctx, at + self._retention_ms)

    def _time_out(self, ctx, at: int):
        yield self._timeouts, json.dumps({"id": _key(ctx), "t": at,
                                          "default_label": self._default_label is not None}, separators=(",", ":"))
        if self._default_label is not None:
            yield training_record(self._event.value(), self._default_label, timed_out=True)
        self._close(ctx, TIMED_OUT, at)

    def process_element1(self, value, ctx):
        status, now = self._status.value(), self._now(ctx)
        if status == LABEL_FIRST and now > self._timer.value():  # the label is older than its event
            yield self._letter("label_without_event", "the label is older than its event", ctx, self._label_text.value())
            self._label_text.clear()
            status = None
        if status == LABEL_FIRST and self._label_time() > now + self._timeout_ms:
            # the label came first but is later than this event's timeout: as if in time order,
            # the event times out and the label comes after it
            label_text = self._label_text.value()
            self._event.update(value)
            yield from self._time_out(ctx, now + self._timeout_ms)
            yield self._letter("label_after_timeout", f"event {_key(ctx)} timed out before its label came", ctx,
                               label_text)
        elif status == LABEL_FIRST:
            label_text = self._label_text.value()
            yield training_record(value, self._label(label_text))
            self._close(ctx, JOINED, now)
        elif status is None:
            self._status.update(WAITING)
            self._event.update(value)
            self._wait_until(ctx, now + self._timeout_ms)
        # a repeated event (same id) while it waits or after it closed: the first one counts

    def process_element2(self, value, ctx):
        status, text = self._status.value(), value
        try:
            label = self._label(text)
        except (ValueError, TypeError, KeyError) as err:
            yield self._letter("not_a_record", f"{type(err).__name__}: {err}"[:300], ctx, text)
            return
        if status == WAITING and self._now(ctx) > self._timer.value():
            # later than the timeout, though time has not yet fired it: the outcome follows the times
            yield from self._time_out(ctx, self._timer.value())
            status = TIMED_OUT
        if status == WAITING:
            yield training_record(self._event.value(), label)
            self._close(ctx, JOINED, self._now(ctx))
        elif status is None:
            self._status.update(LABEL_FIRST)
            self._label_text.update(text)
            # in event time the event is in once time has passed the label's; in processing time it may lag
            self._wait_until(ctx, self._now(ctx) + (0 if self._event_time else self._timeout_ms))
        elif status == JOINED or status == LABEL_FIRST:
            yield self._letter("second_label", f"event {_key(ctx)} already has a label", ctx, text)
        else:
            yield self._letter("label_after_timeout", f"event {_key(ctx)} timed out before its label came", ctx, text)

    def on_timer(self, timestamp, ctx):
        if self._timer.value() != timestamp:
            return
        self._timer.clear()
        status = self._status.value()
        if status == WAITING:
            yield from self._time_out(ctx, timestamp)
        elif status == LABEL_FIRST:
            yield self._letter("label_without_event", "no event with this id came before the label's time", ctx,
                               self._label_text.value())
            self._status.clear()
            self._label_text.clear()
        else:  # closed long enough: forget the id
            self._status.clear()


def join_labels(events, labels, config: Optional[JoinConfig] = None, **fields) -> JoinOutput:
    """Joins ``events`` with their ``labels`` by id, as :class:`~pyflink_tensair.JoinConfig` says
    (``fields``: its fields, set on ``config`` or on a new one).

    Args:
        events: a ``DataStream`` of event texts (``Types.STRING()``; default: JSON with ``"id"`` and the features).
        labels: a ``DataStream`` of label texts (``Types.STRING()``; default: JSON with ``"id"`` and ``"y"``).
        config: a :class:`~pyflink_tensair.JoinConfig` (``timeout_ms`` is required: here or in ``fields``).

    Returns:
        :class:`JoinOutput`: training records, timeouts, dead letters.

    Example::

        joined = join_labels(events, labels, timeout_ms=60_000, default_label=0)
        batches = text_batches(joined.records, 32, parse=json_example, classes=2)
    """
    from pyflink.datastream import KeyedStream
    from pyflink.java_gateway import get_gateway

    from ..flink import types
    from ..flink.environment import keep_every_sink
    from ..flink.execution import keyed_co_process, process
    from ..flink.loop import FeedbackLoop

    config = with_fields(JoinConfig, config, fields)
    python_in, name = config.python_in, config.name
    event_key, label_key = config.event_key or json_key, config.label_key or json_key
    for stream, what in ((events, "events"), (labels, "labels")):
        types.require_stream(what, stream, Types.STRING(), types.TEXTS)
    row_type = Types.ROW([Types.STRING(), Types.STRING()])
    keep_every_sink(events._j_data_stream.getExecutionEnvironment())

    def keyed(stream, key, what):
        rows = process(stream, KeyRecords(key, what, name), row_type, python_in)
        rows = rows.name(f"{name}: key {what}s").uid(f"{name}-key-{what}s")
        parallelism = stream._j_data_stream.getTransformation().getParallelism()
        if parallelism > 0:  # chained to its input: no shuffle, and no more Python workers than it has
            rows = rows.set_parallelism(parallelism)
        selector = get_gateway().jvm.org.apache.flink.streaming.api.functions.python.KeyByKeySelector()
        j_keyed = rows._j_data_stream.keyBy(selector, Types.ROW([Types.STRING()]).get_java_type_info())
        return rows, KeyedStream(j_keyed, Types.STRING(), rows)  # the function sees the text, the key in ctx

    event_rows, keyed_events = keyed(events, event_key, "event")
    label_rows, keyed_labels = keyed(labels, label_key, "label")
    timeout_ms = config.timeout_ms
    function = JoinLabels(timeout_ms, timeout_ms if config.retention_ms is None else config.retention_ms,
                          config.time == "event", config.default_label, config.label or json_label, name)
    joined = keyed_co_process(keyed_events.connect(keyed_labels), function, Types.STRING(), python_in)
    joined = joined.name(f"{name}: join events with labels").uid(f"{name}-join")
    dead = FeedbackLoop.side_output(joined, DEAD_LETTERS.tag(name))
    dead = dead.union(FeedbackLoop.side_output(event_rows, DEAD_LETTERS.tag(name)),
                      FeedbackLoop.side_output(label_rows, DEAD_LETTERS.tag(name)))
    return JoinOutput(records=joined, timeouts=FeedbackLoop.side_output(joined, text_tag(name, "timeouts")),
                      dead_letters=dead)
