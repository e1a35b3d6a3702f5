"""The online loop from Flink Tables: events and labels declared with SQL (a Kafka topic in JSON, as
Flink users declare them), named columns mapped to the model's inputs, predictions back as a Table.

The columns become the JSON texts that :func:`~.serving.serve` and :func:`~.labels.join_labels`
read in Flink SQL itself (``JSON_OBJECT``, ``JSON_ARRAY``): no Python per record. A table's time
column (its rowtime, with the watermark its DDL declares) becomes the records' timestamps, for
``join_labels(..., time="event")``.

Example (``tests/test_kafka.py`` runs one like it, over two Kafka topics)::

    t_env.execute_sql(\"\"\"CREATE TABLE clicks (id STRING, f1 DOUBLE, f2 DOUBLE, ts TIMESTAMP_LTZ(3),
                         WATERMARK FOR ts AS ts) WITH ('connector' = 'kafka', 'format' = 'json', ...)\"\"\")
    events = events_from_table(t_env, t_env.from_path("clicks"), id="id", features=["f1", "f2"], time="ts")
    served = serve(events, out, model=build)
    predictions = predictions_table(t_env, served)   # key, prediction, model_version, model_age_ms, served_at_ms
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..errors import ConfigError


def _quoted(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a column name is a non-empty string. Received: {name!r}")
    return "`" + name.replace("`", "``") + "`"


def _columns(table) -> list:
    return list(table.get_resolved_schema().get_column_names())


def _texts(t_env, table, fields: dict, time: Optional[str], what: str):
    """The table as a stream of JSON texts ``{name: column expression}``, timestamps from ``time``."""
    from pyflink.common import Types
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway
    from pyflink.table.expressions import call_sql, col

    from ..flink.environment import add_channel_jar

    pairs = ", ".join(f"'{key}' VALUE {expression}" for key, expression in fields.items())
    selected = [call_sql(f"JSON_OBJECT({pairs})").alias("text")] + ([col(time)] if time else [])
    rows = t_env.to_data_stream(table.select(*selected))
    add_channel_jar(rows._j_data_stream.getExecutionEnvironment())
    j_texts = rows._j_data_stream.transform(f"{what}: rows as texts", Types.STRING().get_java_type_info(),
                                            get_gateway().jvm.pyflinktensair.tables.FirstField())
    return DataStream(j_texts)


def _check(table, columns: Sequence[str], what: str) -> None:
    names = _columns(table)
    missing = [c for c in columns if c not in names]
    if missing:
        raise ConfigError(f"{what}: no column {', '.join(map(repr, missing))} in the table (its columns: "
                          f"{', '.join(names)})")


def events_from_table(t_env, table, *, id: str, features: Sequence[str], time: Optional[str] = None):
    """A stream of the event texts ``serve`` reads, ``{"id": ..., "x": [features...]}``, from the
    rows of ``table``: ``id`` (any type, as a string) and the ``features`` columns in the model's
    input order (numbers, cast to DOUBLE). ``time``: the table's rowtime column, whose values
    become the records' timestamps (for ``join_labels(..., time="event")``).
    """
    if isinstance(features, str) or not features:
        raise ConfigError(f"features must be a list of column names. Received: features={features!r}")
    _check(table, [id, *features, *([time] if time else [])], "events_from_table")
    array = ", ".join(f"CAST({_quoted(f)} AS DOUBLE)" for f in features)
    return _texts(t_env, table, {"id": f"CAST({_quoted(id)} AS STRING)", "x": f"JSON_ARRAY({array})"}, time,
                  "events_from_table")


def labels_from_table(t_env, table, *, id: str, label: str, time: Optional[str] = None):
    """A stream of the label texts ``join_labels`` reads, ``{"id": ..., "y": ...}``, from ``table``'s
    ``id`` and ``label`` columns (``time`` as for :func:`events_from_table`)."""
    _check(table, [id, label, *([time] if time else [])], "labels_from_table")
    return _texts(t_env, table, {"id": f"CAST({_quoted(id)} AS STRING)", "y": _quoted(label)}, time,
                  "labels_from_table")


def predictions_table(t_env, served):
    """``serve``'s predictions (a :class:`~.serving.ServeOutput` or its ``predictions`` stream) as a
    Table: ``key STRING, prediction ARRAY<DOUBLE>, model_version BIGINT, model_age_ms BIGINT,
    served_at_ms BIGINT``, for ``INSERT INTO`` a sink table or more SQL."""
    stream = getattr(served, "predictions", served)
    return t_env.from_data_stream(stream)
