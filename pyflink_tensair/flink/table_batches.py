"""``batches_from_table``: mini-batches of a Flink SQL table's rows, made on the JVM."""

from __future__ import annotations

from typing import Optional, Sequence, Union

from ..errors import ConfigError
from ..validation import require_int, require_text


def batches_from_table(t_env, table, batch_size: int, *, features: Union[str, Sequence[str]], label: Optional[str] = None,
                       features_shape: Optional[Sequence[int]] = None, classes: Optional[int] = None,
                       max_wait_ms: Optional[int] = None, rate: float = 0.0, parallelism: Optional[int] = None,
                       name: str = "tensair"):
    """Mini-batches of the rows of ``table`` (a ``Table`` of ``t_env``, a ``StreamTableEnvironment``,
    or the name of one registered in it), for :func:`~pyflink_tensair.train`.

    A bad argument is refused here, before anything is built (``ConfigError``, naming it).

    ``features``: the numeric columns that make an example's features, in order, or the name of
    one ``ARRAY`` column; ``label``: the label's column (``None``: unlabelled examples). The rows
    become ``(features, label)`` Rows and are batched on the JVM as :func:`~pyflink_tensair.to_batches`
    batches Rows: no row crosses into Python, a bad one (a NULL or NaN feature, a label out of
    ``classes``) becomes a dead letter, and the batcher's position is Flink state. The batcher
    runs at the table's parallelism (``parallelism`` to choose): with more than one subtask each
    batches the rows that reach it, so the batches are made of other rows than in a serial run.

    Example (``tests/test_flink_local.py`` runs one)::

        from pyflink.table import StreamTableEnvironment

        t_env = StreamTableEnvironment.create(env)
        t_env.execute_sql("CREATE TABLE clicks (f0 DOUBLE, f1 DOUBLE, clicked INT) WITH (...)")
        batches = batches_from_table(t_env, "clicks", 64, features=["f0", "f1"], label="clicked", classes=2)
        out = train(batches, model=model)
    """
    from pyflink.table import DataTypes, StreamTableEnvironment, Table
    from pyflink.table.expressions import array, col

    from .batching import _checked_arguments, to_batches

    shape = _checked_arguments(batch_size, features_shape, classes, max_wait_ms, None, rate, optional=True)
    require_int("parallelism", parallelism, 1, optional=True)
    columns = [features] if isinstance(features, str) else list(features) if isinstance(features, (list, tuple)) else []
    if not columns or not all(isinstance(c, str) and c for c in columns):
        raise ConfigError("features must be a column name or a non-empty list of them. "
                          f"Received: features={features!r}")
    if label is not None and not (isinstance(label, str) and label):
        raise ConfigError(f"label must be a column name or None. Received: label={label!r}")
    if not isinstance(t_env, StreamTableEnvironment):
        raise ConfigError(f"t_env must be a pyflink StreamTableEnvironment. Received: t_env={t_env!r:.100}")
    if isinstance(table, str):
        require_text("table", table)
        table = t_env.from_path(table)
    elif not isinstance(table, Table):
        raise ConfigError(f"table must be a pyflink Table or the name of one. Received: table={table!r:.100}")
    names = list(table.get_schema().get_field_names())
    missing = [c for c in columns + ([label] if label is not None else []) if c not in names]
    if missing:
        raise ConfigError(f"table has no column {missing[0]!r}; its columns are {names}")
    if isinstance(features, str):
        x = col(features).cast(DataTypes.ARRAY(DataTypes.DOUBLE()))
    else:
        x = array(*(col(c).cast(DataTypes.DOUBLE()) for c in columns))
    selected = table.select(x.alias("x"), col(label).alias("y")) if label is not None else table.select(x.alias("x"))
    return to_batches(t_env.to_data_stream(selected), batch_size, features_shape=shape, classes=classes,
                      max_wait_ms=max_wait_ms, rate=rate, parallelism=parallelism, name=name)
