"""Flink type information and side-output tags of the replicas' streams.

PyFlink cannot pickle a TypeInformation or OutputTag once it has been handed to the JVM, so
functions build their own copies from these factories (equal by name and type).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from pyflink.common import Row, Types
from pyflink.datastream import OutputTag

from ..core import wire
from ..errors import ConfigError
from ..core.events import (Broadcast, FinalModel, Metrics, ModeChange, Prediction,  # noqa: F401 (re-exported)
                           decode_final_model, encode_final_model)
from ..core.messages import DeadLetter
from ..core.model_updates import ModelUpdate, encode_update

PREDICTION_FIELDS = ["replica", "batch_id", "model_version", "loss", "accuracy", "predictions"]


def bytes_type():
    return Types.PRIMITIVE_ARRAY(Types.BYTE())


TEXTS = "texts (Types.STRING())"
BATCHES = ("encoded mini-batches (Types.PRIMITIVE_ARRAY(Types.BYTE()): to_batches, batch_source, or encode_batch "
           "with that output_type)")


def require_stream(name: str, stream, expected, what: str):
    """``stream`` if it is a PyFlink ``DataStream`` whose elements are of type ``expected`` (a
    ``TypeInformation``, ``None``: any; ``what`` names them as a user would give them, e.g. ``"texts
    (Types.STRING())"``), else a ConfigError naming ``name`` and what the stream carries: refused
    while the graph is built, not a Java ``ClassCastException`` once the job runs."""
    from pyflink.datastream import DataStream

    if not isinstance(stream, DataStream):
        raise ConfigError(f"{name} must be a pyflink DataStream of {what}. Received: {name}={stream!r:.100}")
    j_type = stream._j_data_stream.getType()
    if expected is not None and not j_type.equals(expected.get_java_type_info()):
        raise ConfigError(f"{name} must be a pyflink DataStream of {what}. "
                          f"Received: {name}=a DataStream of {j_type.toString()}")
    return stream


def keyed_bytes_type():
    """``Row(key, payload)``: what the router and the fan-out hand to ``key_by``."""
    return Types.ROW([Types.INT(), bytes_type()])


def prediction_type():
    """One row per batch: who predicted it, with which model version, and the encoded outputs."""
    return Types.ROW_NAMED(PREDICTION_FIELDS, [Types.INT(), Types.LONG(), Types.LONG(), Types.DOUBLE(),
                                               Types.DOUBLE(), bytes_type()])


@dataclass(frozen=True)
class SideOutput:
    """One side output of the replicas' operator: its tag's name (``"<train name>-<suffix>"``), the
    Flink type of its elements, and which event of the replica goes there, encoded how
    (``encode(event, config)``; ``event=None``: the function's own records)."""

    suffix: str
    element_type: Callable[[], Any]
    event: Optional[type] = None
    encode: Optional[Callable[[Any, Any], Any]] = None

    def tag(self, name: str) -> OutputTag:
        return OutputTag(f"{name}-{self.suffix}", self.element_type())


@dataclass(frozen=True)
class ProbeRecord:
    """A probe's result (JSON text): the replica function's own record, not the replica's."""

    text: str


def _json(event, config) -> str:
    return event.to_json()


# One line per output. The replica function routes events by this table; train() reads its
# streams by it (TrainOutput's fields are TRAIN_OUTPUTS' keys, and predictions).
METRICS = SideOutput("metrics", Types.STRING, Metrics, _json)
FEEDBACK = SideOutput("feedback", bytes_type, Broadcast, lambda e, c: wire.encode_message(e.message, c.sparse_values))
MODELS = SideOutput("models", bytes_type, FinalModel, lambda e, c: encode_final_model(e))
PROBES = SideOutput("probes", Types.STRING, ProbeRecord, lambda e, c: e.text)
MODE_CHANGES = SideOutput("mode-changes", Types.STRING, ModeChange, _json)
DEAD_LETTERS = SideOutput("dead-letters", Types.STRING, DeadLetter, _json)
UPDATES = SideOutput("updates", bytes_type, ModelUpdate, lambda e, c: encode_update(e))
# "<replica>:1" when a replica becomes saturated, "<replica>:0" when it no longer is (the credit
# gate's reports, flink.loop.FeedbackLoop.close_credit; with TrainConfig.backpressure)
CREDIT = SideOutput("credit", Types.STRING)



def text_tag(name: str, what: str) -> OutputTag:
    """The tag of a side output of text records, ``"<name>-<what>"`` (the online operators' own:
    timeouts, unmatched labels, freshness; their dead letters are :data:`DEAD_LETTERS`')."""
    return OutputTag(f"{name}-{what}", Types.STRING())


SIDE_OUTPUTS = (METRICS, FEEDBACK, MODELS, PROBES, MODE_CHANGES, DEAD_LETTERS, UPDATES, CREDIT)
TRAIN_OUTPUTS = {"metrics": METRICS, "models": MODELS, "probes": PROBES, "mode_changes": MODE_CHANGES,
                 "dead_letters": DEAD_LETTERS, "updates": UPDATES}


def prediction_row(event: Prediction) -> Row:
    nan = float("nan")
    return Row(event.replica, event.batch_id, event.model_version,
               nan if event.loss is None else event.loss, nan if event.accuracy is None else event.accuracy,
               wire.encode_tensors({"y_pred": event.predictions}, {"batch_id": event.batch_id}))


def decode_prediction(row) -> dict:
    """A prediction row as a dict; ``predictions`` decoded to a NumPy array, NaN scores to None.

    Example::

        >>> decode_prediction(prediction_row(Prediction(0, 3, 1, np.zeros(2))))["batch_id"]
        3
    """
    if not isinstance(row, (Row, tuple, list)) or len(row) != len(PREDICTION_FIELDS):
        raise ConfigError(f"row must be a row of train(...).predictions ({', '.join(PREDICTION_FIELDS)}). "
                          f"Received: row={row!r:.100}")
    out = {name: row[i] for i, name in enumerate(PREDICTION_FIELDS)}
    out["predictions"] = wire.decode_tensors(out["predictions"])[1]["y_pred"]
    for key in ("loss", "accuracy"):
        if out[key] is not None and math.isnan(out[key]):
            out[key] = None
    return out


def prediction_json(row) -> str:
    """A prediction row as one JSON line (for file sinks and logs); outputs as nested lists."""
    decoded = decode_prediction(row)
    decoded["predictions"] = decoded["predictions"].tolist()
    return json.dumps(decoded, separators=(",", ":"))


def predicted_labels_json(row) -> str:
    """A classifier's prediction row as one JSON line: the predicted label (arg max) of each example
    instead of the raw outputs, with the batch's prequential loss and accuracy."""
    decoded = decode_prediction(row)
    decoded["labels"] = np.argmax(decoded.pop("predictions"), axis=-1).tolist()
    return json.dumps(decoded, separators=(",", ":"))
