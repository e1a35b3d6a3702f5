"""Flink type information and side-output tags of the replicas' streams.

PyFlink cannot pickle a TypeInformation or OutputTag once it has been handed to the JVM, so
functions build their own copies from these factories (equal by name and type).
"""

from __future__ import annotations

import json
import math

import numpy as np

from pyflink.common import Row, Types
from pyflink.datastream import OutputTag

from ..core import wire
from ..errors import ConfigError
from ..core.events import FinalModel, Prediction, decode_final_model, encode_final_model  # noqa: F401 (re-exported)

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


def metrics_tag(name: str) -> OutputTag:
    return OutputTag(f"{name}-metrics", Types.STRING())


def feedback_tag(name: str) -> OutputTag:
    return OutputTag(f"{name}-feedback", bytes_type())


def models_tag(name: str) -> OutputTag:
    return OutputTag(f"{name}-models", bytes_type())


def probes_tag(name: str) -> OutputTag:
    return OutputTag(f"{name}-probes", Types.STRING())


def mode_changes_tag(name: str) -> OutputTag:
    return OutputTag(f"{name}-mode-changes", Types.STRING())


def dead_letters_tag(name: str) -> OutputTag:
    return OutputTag(f"{name}-dead-letters", Types.STRING())


def updates_tag(name: str) -> OutputTag:
    """Model updates replica 0 publishes (``TrainConfig.updates``; :mod:`pyflink_tensair.core.updates`)."""
    return OutputTag(f"{name}-updates", bytes_type())


def credit_tag(name: str) -> OutputTag:
    """``"<replica>:1"`` when a replica becomes saturated, ``"<replica>:0"`` when it no longer is
    (the credit gate's reports, :meth:`~.loop.FeedbackLoop.close_credit`)."""
    return OutputTag(f"{name}-credit", Types.STRING())


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
