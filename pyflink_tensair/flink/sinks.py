"""File sinks for the jobs: one file per subtask, one line (or file) per record, flushed.

They let the job's driver follow progress while the job runs and read the results after, in local
mode and on a cluster whose TaskManagers share the driver's file system; a restored job first
takes back what was written after its checkpoint (exactly once), unless told to keep it. Both are Java sinks (in
the project's jar, see :mod:`pyflink_tensair.jvm`): a record written by them never crosses
into Python again, where a Python writer cost a Beam bundle per record.
"""

from __future__ import annotations

import os

from ..errors import ConfigError


def _check_folder(folder: str, prefix: str) -> None:
    if not folder or not prefix or os.sep in prefix:
        raise ConfigError(f"a sink needs a folder and a file prefix without '{os.sep}'. Received: "
                          f"folder={folder!r}, prefix={prefix!r}")


def _sink_to(stream, j_sink, prefix: str, name: str):
    from pyflink.datastream.connectors import Sink

    return stream.sink_to(Sink(j_sink)).name(f"{name}: write {prefix}").uid(f"{name}-write-{prefix}")


def _row_field_names(j_type):
    """The field names of a ``Row`` stream's Java type (a DataStream's ``RowTypeInfo``, or the
    ``ExternalTypeInfo`` of a Table made a stream), or ``None`` for another type."""
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    if jvm.org.apache.flink.api.java.typeutils.RowTypeInfo._java_lang_class.isInstance(j_type):
        return list(j_type.getFieldNames())
    if j_type.getClass().getName() == "org.apache.flink.table.runtime.typeutils.ExternalTypeInfo":
        logical = j_type.getDataType().getLogicalType()
        if jvm.org.apache.flink.table.types.logical.RowType._java_lang_class.isInstance(logical):
            return list(logical.getFieldNames())
    return None


DELIVERY = ("exactly_once", "at_least_once")


def write_json_lines(stream, folder: str, prefix: str, *, name: str = "tensair", delivery: str = "exactly_once"):
    """Appends each record of ``stream`` to ``folder/prefix-<subtask>.jsonl``, one line each, on
    the JVM: a string as it is (JSON text already), a ``Row`` as a JSON object of its named fields
    (``serve``'s predictions, or a Table made a stream, ``t_env.to_data_stream(table)``); returns the sink (set its parallelism to choose how many files).

    Lines are flushed as they come, for readers that follow the file. ``delivery``, as Flink's
    ``DeliveryGuarantee``: ``"exactly_once"`` cuts a file back to its length at the checkpoint a
    job restores (the replay writes the rest again), so a finished job's files hold each record
    once, though a follower may have read lines that a restore took back; ``"at_least_once"`` keeps
    them (a log of what the job did, e.g. training metrics, in which a restore shows as work
    done again). The files must be where a restarted subtask finds them (one machine, or a file
    system the TaskManagers share).

    Example::

        write_json_lines(train(batches, model=build).metrics, "out", "metrics").set_parallelism(1)
        write_json_lines(serve(events, out, model=build).predictions, "out", "predictions")
    """
    from pyflink.common import Types
    from pyflink.java_gateway import get_gateway

    from .environment import add_channel_jar

    _check_folder(folder, prefix)
    if delivery not in DELIVERY:
        raise ConfigError(f"delivery must be one of {', '.join(map(repr, DELIVERY))}. Received: delivery={delivery!r}")
    j_stream = stream._j_data_stream
    j_type = j_stream.getType()
    fields = None if j_type.equals(Types.STRING().get_java_type_info()) else _row_field_names(j_type)
    if fields is None and not j_type.equals(Types.STRING().get_java_type_info()):
        raise ConfigError(f"write_json_lines writes a stream of Types.STRING() or of named Rows; this stream "
                          f"carries {j_type.toString()} (give the operator that makes it output_type=Types.STRING())")
    add_channel_jar(j_stream.getExecutionEnvironment())
    gateway = get_gateway()
    sink_class = gateway.jvm.pyflinktensair.sinks.LineFileSink
    if fields is None:
        j_sink = sink_class(os.path.abspath(folder), prefix, delivery == "exactly_once")
    else:
        names = gateway.new_array(gateway.jvm.String, len(fields))
        for i, field in enumerate(fields):
            names[i] = field
        j_sink = sink_class(os.path.abspath(folder), prefix, names, delivery == "exactly_once")
    return _sink_to(stream, j_sink, prefix, name)


def write_records(stream, folder: str, prefix: str, *, name: str = "tensair"):
    """Writes each bytes record of ``stream`` to its own file ``folder/prefix-<subtask>-<n>.bin``
    (``n`` from ``000000``, renamed into place once complete); returns the sink. Exactly once: a
    restored job first deletes the files numbered from its count at the checkpoint on."""
    from pyflink.common import Types
    from pyflink.java_gateway import get_gateway

    from .environment import add_channel_jar

    _check_folder(folder, prefix)
    j_stream = stream._j_data_stream
    if not j_stream.getType().equals(Types.PRIMITIVE_ARRAY(Types.BYTE()).get_java_type_info()):
        raise ConfigError(f"write_records writes a stream of Types.PRIMITIVE_ARRAY(Types.BYTE()); this stream "
                          f"carries {j_stream.getType().toString()} (give the operator that makes it "
                          f"output_type=Types.PRIMITIVE_ARRAY(Types.BYTE()))")
    add_channel_jar(j_stream.getExecutionEnvironment())
    j_sink = get_gateway().jvm.pyflinktensair.sinks.RecordFileSink(os.path.abspath(folder), prefix)
    return _sink_to(stream, j_sink, prefix, name)
