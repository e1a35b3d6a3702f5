"""File sinks for the jobs: one file per subtask, one line (or file) per record, flushed.

They let the job's driver follow progress while the job runs and read the results after, in local
mode and on a cluster whose TaskManagers share the driver's file system. Both are Java sinks (in
the project's jar, see :mod:`pyflink_tensair.feedback`): a record written by them never crosses
into Python again, where a Python writer cost a Beam bundle per record.
"""

from __future__ import annotations

import os

from ..errors import ConfigError


def _sink_to(stream, java_sink: str, expected_type, type_name: str, folder: str, prefix: str, name: str, what: str):
    from pyflink.datastream.connectors import Sink
    from pyflink.java_gateway import get_gateway

    from .environment import add_channel_jar

    if not folder or not prefix or os.sep in prefix:
        raise ConfigError(f"a sink needs a folder and a file prefix without '{os.sep}'. Received: "
                          f"folder={folder!r}, prefix={prefix!r}")
    j_stream = stream._j_data_stream
    if not j_stream.getType().equals(expected_type.get_java_type_info()):
        raise ConfigError(f"{what} writes a stream of {type_name}; this stream carries "
                          f"{j_stream.getType().toString()} (give the operator that makes it output_type={type_name})")
    add_channel_jar(j_stream.getExecutionEnvironment())
    j_sink = getattr(get_gateway().jvm.pyflinktensair.sinks, java_sink)(os.path.abspath(folder), prefix)
    return stream.sink_to(Sink(j_sink)).name(f"{name}: write {prefix}").uid(f"{name}-write-{prefix}")


def write_json_lines(stream, folder: str, prefix: str, *, name: str = "tensair"):
    """Appends each string record of ``stream`` to ``folder/prefix-<subtask>.jsonl``; returns the
    sink (set its parallelism to choose how many files).

    Example::

        write_json_lines(train(batches, model=build).metrics, "out", "metrics").set_parallelism(1)
    """
    from pyflink.common import Types

    return _sink_to(stream, "LineFileSink", Types.STRING(), "Types.STRING()", folder, prefix, name, "write_json_lines")


def write_records(stream, folder: str, prefix: str, *, name: str = "tensair"):
    """Writes each bytes record of ``stream`` to its own file ``folder/prefix-<subtask>-<n>.bin``
    (``n`` from ``000000``, renamed into place once complete); returns the sink."""
    from pyflink.common import Types

    return _sink_to(stream, "RecordFileSink", Types.PRIMITIVE_ARRAY(Types.BYTE()),
                    "Types.PRIMITIVE_ARRAY(Types.BYTE())", folder, prefix, name, "write_records")
