"""Simple file sinks for the jobs: one file per subtask, one line (or file) per record, flushed.

They let the job's driver follow progress while the job runs and read the results after, in local
mode and on a cluster whose TaskManagers share the driver's file system.
"""

from __future__ import annotations

import os

from pyflink.common import Types
from pyflink.datastream import ProcessFunction


class _FileWriter(ProcessFunction):
    """Writes into ``folder``, naming its files ``<prefix>-<subtask>...``."""

    def __init__(self, folder: str, prefix: str):
        self._folder = folder
        self._prefix = prefix

    def open(self, runtime_context):
        os.makedirs(self._folder, exist_ok=True)
        self._index = runtime_context.get_index_of_this_subtask()


class _JsonLinesWriter(_FileWriter):
    def open(self, runtime_context):
        super().open(runtime_context)
        self._file = open(os.path.join(self._folder, f"{self._prefix}-{self._index}.jsonl"), "a", encoding="utf-8")

    def process_element(self, value, ctx):
        self._file.write(value + "\n")
        self._file.flush()
        return iter(())

    def close(self):
        if getattr(self, "_file", None):
            self._file.close()


class _RecordFileWriter(_FileWriter):
    def open(self, runtime_context):
        super().open(runtime_context)
        self._count = 0

    def process_element(self, value, ctx):
        path = os.path.join(self._folder, f"{self._prefix}-{self._index}-{self._count:06d}.bin")
        with open(path + ".tmp", "wb") as f:
            f.write(bytes(value))
        os.replace(path + ".tmp", path)
        self._count += 1
        return iter(())


def write_json_lines(stream, folder: str, prefix: str, *, name: str = "tensair"):
    """Appends each string record of ``stream`` to ``folder/prefix-<subtask>.jsonl``."""
    return (stream.process(_JsonLinesWriter(folder, prefix), output_type=Types.BOOLEAN())
            .name(f"{name}: write {prefix}").uid(f"{name}-write-{prefix}"))


def write_records(stream, folder: str, prefix: str, *, name: str = "tensair"):
    """Writes each bytes record of ``stream`` to its own file ``folder/prefix-<subtask>-<n>.bin``."""
    return (stream.process(_RecordFileWriter(folder, prefix), output_type=Types.BOOLEAN())
            .name(f"{name}: write {prefix}").uid(f"{name}-write-{prefix}"))
