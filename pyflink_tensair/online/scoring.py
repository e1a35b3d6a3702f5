"""``score()``: the served predictions scored against the labels that came later, windowed.

Operator graph::

    predictions (serve) ─► Row(id, JSON) (JVM) ─► key_by id (JVM) ─┐
                                                                    ├─► meet (Python, keyed state) ─► scored events (JSON)
    labelled records (join_labels) ─► Row(id, text) ─► key_by id ──┘      │ unmatched (side output)    │
                                                                           ▼                            ▼
                                                      windowed score (Python, one key, Flink state) ─► windows (JSON), Flink gauges

A prediction and its record meet in keyed state, whichever comes first; one that finds no
partner within ``retention_ms`` (processing time: an event never labelled and dropped at its
timeout, a label of an event that was not served) is forgotten and counted. Each scored event
says whether the prediction's top class was the label and its cross-entropy loss. The window
holds the last ``window`` scored events: accuracy, mean loss and, for labels 0/1, the AUC of the
score of class 1; a report goes out every ``report_every`` scored events and at the end of the input, and the same figures are Flink gauges of the group ``tensair`` (integers: ``accuracy_permille``,
``loss_milli``, ``auc_permille``, ``scored``), named by ``name``.

Scoring a frozen model's predictions the same way gives the value of training in real time.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

from pyflink.common import Types
from pyflink.datastream import KeyedCoProcessFunction, KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

from ..core.messages import DeadLetter, preview
from ..config import ScoreConfig, with_fields
from ..validation import is_int
from ..flink.types import DEAD_LETTERS, text_tag
from .labels import _key

if TYPE_CHECKING:
    from pyflink.datastream import DataStream


def score_one(prediction: Sequence[float], label) -> "tuple[bool, float, float]":
    """``(correct, loss, score of class 1)`` of one prediction (class probabilities, or one
    probability of class 1) against an integer label.

        >>> score_one([0.2, 0.8], 1)
        (True, 0.2231, 0.8)
        >>> score_one([0.3], 1)
        (False, 1.204, 0.3)
    """
    y = int(label)
    p = [min(max(float(v), 1e-7), 1.0 - 1e-7) for v in prediction]
    if len(p) == 1:
        chosen, p_y, positive = int(p[0] > 0.5), (p[0] if y == 1 else 1.0 - p[0]), p[0]
    else:
        chosen = max(range(len(p)), key=p.__getitem__)
        p_y = p[y] if 0 <= y < len(p) else 1e-7
        positive = p[1]
    return chosen == y, round(-math.log(p_y), 4), round(positive, 6)


def auc(scores: Sequence[float], labels: Sequence[int]) -> Optional[float]:
    """Area under the ROC curve of ``scores`` for labels 0/1 (ties count a half); ``None``
    unless both classes are present.

        >>> auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
        0.75
    """
    positives = [s for s, y in zip(scores, labels) if y == 1]
    negatives = [s for s, y in zip(scores, labels) if y == 0]
    if not positives or not negatives:
        return None
    ordered = sorted(scores)
    ranks = {}
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[i]:
            j += 1
        ranks[ordered[i]] = (i + j) / 2.0 + 1.0
        i = j + 1
    rank_sum = sum(ranks[s] for s in positives)
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


@dataclass(frozen=True)
class ScoreOutput:
    """The streams ``score`` returns.

    Attributes:
        scored: JSON, one per event scored: ``{"id", "y", "correct", "loss", "p1",
            "model_version", "served_at_ms"}``.
        windows: JSON reports of the window: ``{"name", "scored", "accuracy", "loss", "auc",
            "unmatched"}`` (``auc`` is ``null`` unless the labels are 0/1 and both are in it),
            every ``report_every`` scored events, and at the end of a bounded input if events came after the last.
        dead_letters: JSON dead letters: records without an id, and records whose label is not a
            class number (or does not fit the prediction).
    """

    scored: "DataStream"
    windows: "DataStream"
    dead_letters: "DataStream"


def _unmatched_tag(name: str):
    return text_tag(name, "unmatched")


class MeetPredictions(KeyedCoProcessFunction):
    """Input 1: a prediction's JSON (``PredictionsById``); input 2: a labelled record's text."""

    def __init__(self, retention_ms: int, label_field: str, name: str):
        self._retention_ms = int(retention_ms)
        self._label_field = label_field
        self._name = name

    def open(self, runtime_context):
        self._prediction = runtime_context.get_state(ValueStateDescriptor("score/prediction", Types.STRING()))
        self._label = runtime_context.get_state(ValueStateDescriptor("score/label", Types.STRING()))
        self._timer = runtime_context.get_state(ValueStateDescriptor("score/timer", Types.LONG()))
        self._unmatched = _unmatched_tag(self._name)
        self._dead_letters = DEAD_LETTERS.tag(self._name)

    def _wait(self, ctx):
        at = ctx.timer_service().current_processing_time() + self._retention_ms
        ctx.timer_service().register_processing_time_timer(at)
        self._timer.update(at)

    def _forget(self) -> None:
        self._prediction.clear()
        self._label.clear()
        self._timer.clear()

    def _meet(self, ctx, prediction_text: str, label_text: str):
        timer = self._timer.value()
        if timer is not None:
            ctx.timer_service().delete_processing_time_timer(timer)
        self._forget()
        prediction = json.loads(prediction_text)
        try:
            label = json.loads(label_text)[self._label_field]
            if not is_int(label):
                raise ValueError(f"a label is a whole number (a class), not {label!r}")
            correct, loss, p1 = score_one(prediction["prediction"], label)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError) as err:
            yield self._dead_letters, DeadLetter("not_a_record", f"{type(err).__name__}: {err}"[:300], "record",
                                                 "score", -1, preview(label_text)).to_json()
            return
        yield json.dumps({"id": _key(ctx), "y": label, "correct": correct,
                          "loss": loss, "p1": p1, "model_version": prediction["model_version"],
                          "served_at_ms": prediction["served_at_ms"]}, separators=(",", ":"))

    def _arrive(self, value, ctx, waiting, partner, prediction_first: bool):
        """``value`` meets the partner waiting in ``partner`` state, or waits in ``waiting``."""
        other = partner.value()
        if other is not None:
            yield from self._meet(ctx, *((value, other) if prediction_first else (other, value)))
        elif waiting.value() is None:
            waiting.update(value)
            self._wait(ctx)

    def process_element1(self, value, ctx):
        yield from self._arrive(value, ctx, self._prediction, self._label, True)

    def process_element2(self, value, ctx):
        yield from self._arrive(value, ctx, self._label, self._prediction, False)

    def on_timer(self, timestamp, ctx):
        if self._timer.value() == timestamp:
            self._forget()
            yield self._unmatched, json.dumps({"unmatched": 1})


class WindowedScore(KeyedProcessFunction):
    """The last ``window`` scored events: reports and Flink gauges (module docstring). One key (the
    stream is keyed by a constant): the counts and the window are Flink state, so a restored job
    goes on counting from its checkpoint. A last report at the end of the input (a timer at the
    final watermark) when events came since the previous one."""

    END_OF_INPUT = 2 ** 63 - 1  # the watermark a bounded input ends with

    def __init__(self, window: int, report_every: int, name: str):
        self._size, self._every, self._name = window, report_every, name

    def open(self, runtime_context):
        from pyflink.common import Types

        from ..flink.replica_metrics import ReplicaMetrics

        self._state = runtime_context.get_state(ValueStateDescriptor("score", Types.PICKLED_BYTE_ARRAY()))
        self._score = self._fresh()
        group = runtime_context.get_metrics_group().add_group("tensair").add_group(self._name)

        def scaled(key, scale=1000):
            return lambda: -1 if self._score["figures"][key] is None else int(round(self._score["figures"][key] * scale))

        self._metrics = ReplicaMetrics(group, {"scored": lambda: self._score["scored"],
                                               "unmatched": lambda: self._score["unmatched"],
                                               "accuracy_permille": scaled("accuracy"),
                                               "loss_milli": scaled("loss"), "auc_permille": scaled("auc")})

    @staticmethod
    def _fresh() -> dict:
        return {"scored": 0, "unmatched": 0, "reported": 0, "window": [],
                "figures": {"accuracy": None, "loss": None, "auc": None}}

    def _report(self) -> str:
        score, window = self._score, self._score["window"]
        if window:
            score["figures"] = {"accuracy": sum(c for c, _, _, _ in window) / len(window),
                                "loss": sum(loss for _, loss, _, _ in window) / len(window),
                                "auc": auc([p for _, _, p, _ in window], [y for _, _, _, y in window])
                                if all(y in (0, 1) for _, _, _, y in window) else None}
        score["reported"] = score["scored"]
        self._metrics.publish(force=True)
        return json.dumps({"name": self._name, "scored": score["scored"], "unmatched": score["unmatched"],
                           **{k: None if v is None else round(v, 4) for k, v in score["figures"].items()}},
                          separators=(",", ":"))

    def process_element(self, value, ctx):
        score = self._state.value()
        if score is None:
            score = self._fresh()
            ctx.timer_service().register_event_time_timer(self.END_OF_INPUT)
        self._score = score
        record = json.loads(value)
        if "unmatched" in record:
            score["unmatched"] += 1
            self._metrics.publish()
        else:
            score["scored"] += 1
            score["window"] = (score["window"] + [(bool(record["correct"]), float(record["loss"]), float(record["p1"]),
                                                   record["y"])])[-self._size:]
            if score["scored"] % self._every == 0:
                yield self._report()
            else:
                self._metrics.publish()
        self._state.update(score)

    def on_timer(self, timestamp, ctx):
        score = self._state.value()
        if score is not None and score["scored"] > score["reported"]:
            self._score = score
            yield self._report()
            self._state.update(score)

    def close(self):
        if getattr(self, "_metrics", None) is not None:
            self._metrics.publish(force=True)


def score(predictions, records, config: Optional[ScoreConfig] = None, **fields) -> ScoreOutput:
    """Scores served ``predictions`` (``serve()``'s rows) against ``records`` (``join_labels``' records,
    or any JSON texts with ``"id"`` and the label field, ``Types.STRING()``), by id, as
    :class:`~pyflink_tensair.ScoreConfig` says (``fields``: its fields, set on ``config`` or on a new one).

    Example::

        served = serve(events, out, model=build)
        joined = join_labels(events, labels, timeout_ms=60_000, default_label=0)
        scores = score(served.predictions, joined.records, name="served")
        write_json_lines(scores.windows, "out", "served-score")
    """
    from pyflink.datastream import DataStream, KeyedStream
    from pyflink.java_gateway import get_gateway

    from ..flink import types
    from ..flink.environment import add_channel_jar
    from ..flink.execution import keyed_co_process, keyed_process, process
    from ..flink.loop import FeedbackLoop
    from .labels import KeyRecords, json_key
    from .serving import SERVED_FIELDS, prediction_type

    config = with_fields(ScoreConfig, config, fields)
    window, report_every, retention_ms = config.window, config.report_every, config.retention_ms
    label_field, key, python_in, name = config.label_field, config.key, config.python_in, config.name
    types.require_stream("predictions", predictions, prediction_type(),
                         "serve()'s prediction rows (ServeOutput.predictions)")
    types.require_stream("records", records, Types.STRING(), types.TEXTS)
    gateway = get_gateway()
    add_channel_jar(predictions._j_data_stream.getExecutionEnvironment())
    row_type = Types.ROW([Types.STRING(), Types.STRING()])
    fields = gateway.new_array(gateway.jvm.String, len(SERVED_FIELDS) - 1)
    for i, field in enumerate(SERVED_FIELDS[1:]):
        fields[i] = field
    selector = gateway.jvm.org.apache.flink.streaming.api.functions.python.KeyByKeySelector
    j_rows = predictions._j_data_stream.transform(f"{name}: key predictions", row_type.get_java_type_info(),
                                                  gateway.jvm.pyflinktensair.serving.PredictionsById(fields))
    j_rows = j_rows.uid(f"{name}-key-predictions")
    parallelism = predictions._j_data_stream.getTransformation().getParallelism()
    if parallelism > 0:  # chained to the servers' rows: no shuffle before the one by id
        j_rows = j_rows.setParallelism(parallelism)
    keyed_predictions = KeyedStream(j_rows.keyBy(selector(), Types.ROW([Types.STRING()]).get_java_type_info()),
                                    Types.STRING(), DataStream(j_rows))
    label_rows = process(records, KeyRecords(key or json_key, "record", name), row_type, python_in)
    label_rows = label_rows.name(f"{name}: key records").uid(f"{name}-key-records")
    keyed_labels = KeyedStream(label_rows._j_data_stream.keyBy(selector(), Types.ROW([Types.STRING()]).get_java_type_info()),
                               Types.STRING(), label_rows)
    met = keyed_co_process(keyed_predictions.connect(keyed_labels), MeetPredictions(int(retention_ms), label_field, name),
                           Types.STRING(), python_in).name(f"{name}: meet predictions and labels").uid(f"{name}-meet")
    unmatched = FeedbackLoop.side_output(met, _unmatched_tag(name))
    one_type = Types.ROW([Types.INT(), Types.STRING()])
    j_one = (met.union(unmatched)._j_data_stream.map(gateway.jvm.pyflinktensair.serving.OneKey(), one_type.get_java_type_info())
             .name(f"{name}: one key").uid(f"{name}-one-key"))
    keyed = KeyedStream(j_one.keyBy(selector(), Types.ROW([Types.INT()]).get_java_type_info()), Types.INT(), DataStream(j_one))
    windows = keyed_process(keyed, WindowedScore(window, report_every, name), Types.STRING(), python_in)
    windows = windows.name(f"{name}: window").uid(f"{name}-window").set_parallelism(1)
    dead = FeedbackLoop.side_output(met, DEAD_LETTERS.tag(name)).union(
        FeedbackLoop.side_output(label_rows, DEAD_LETTERS.tag(name)))
    return ScoreOutput(scored=met, windows=windows, dead_letters=dead)
