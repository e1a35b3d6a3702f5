"""Batches made by a maker with state (an id table): chunks of text records in, its state in
Flink's keyed state.

:func:`stateful_chunk_batches` is :func:`~pyflink_tensair.flink.batching.chunked_batches` for a
``make`` whose batches depend on what it saw before, such as
:class:`~pyflink_tensair.word2vec.growing.GrowingVocabulary` and its
:class:`~pyflink_tensair.embeddings.id_table.IdTable`: it runs under one key, restores ``make``'s
state on its first chunk and writes it back after each chunk
(:class:`~pyflink_tensair.flink.checkpointing.ChunkedState`; a part whose bytes did not change is
not written again). A checkpoint therefore holds the table as of the last chunk before its
barrier, and a restored job makes exactly the batches, and the reassignments, it would have.
"""

from __future__ import annotations

from typing import Optional, Union

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction

from ..config import PythonIn, python_in_of
from . import types
from .batching import _one_key, jvm_chunks
from .checkpointing import ChunkedState, ValueStates
from .execution import in_jvm, keyed_process


class _StatefulChunks(KeyedProcessFunction):
    def __init__(self, make):
        self._make = make

    def open(self, runtime_context):
        self._state = ChunkedState(ValueStates(runtime_context))
        self._loaded = False

    def process_element(self, value, ctx):
        if not self._loaded:  # keyed state needs a key: read in the first callback, not in open
            saved = self._state.read()
            if saved is not None:
                self._make.restore(saved)
            self._loaded = True
        yield from self._make(value)
        self._state.write(self._make.state())


def stateful_chunk_batches(records, chunk_size: int, make, *, max_wait_ms: Optional[int] = None,
                           python_in: Union[PythonIn, str] = PythonIn.JVM, name: str = "tensair"):
    """The encoded batches (and dead letters) ``make`` yields for each chunk of ``chunk_size``
    text records (``[n, records before chunk n, record, ...]``, grouped on the JVM), ``make``'s
    state kept in Flink state. ``make`` is called with each chunk and has ``state()`` (a dict of
    plain NumPy arrays) and ``restore(state)``; it must be picklable and depend only on its state
    and the chunk. Runs as one subtask, where ``python_in`` says (the ``TrainConfig.python_in`` of
    the ``train()`` it feeds).

    Example (the word2vec job's ``--source kafka`` without ``--corpus``)::

        from pyflink_tensair.flink.id_tables import stateful_chunk_batches
        from pyflink_tensair.word2vec.growing import GrowingVocabulary

        batches = stateful_chunk_batches(lines, 1024, GrowingVocabulary(capacity=50_000), max_wait_ms=1000)
    """
    for method in ("state", "restore"):
        if not callable(getattr(make, method, None)):
            raise TypeError(f"stateful_chunk_batches needs a make with state() and restore(state). Received: {make!r}")
    chunks = jvm_chunks(records, chunk_size, max_wait_ms, name)
    python_in = python_in_of(python_in)
    if in_jvm(python_in):
        made = keyed_process(_one_key(chunks, name), _StatefulChunks(make), types.bytes_type(), python_in)
    else:  # a Python worker reads the chunks as PyFlink types them, keyed by a Python key selector
        keyed = chunks.key_by(lambda _: 0, key_type=Types.INT())
        keyed._j_data_stream.getTransformation().getInputs()[0].setUid(f"{name}-batcher-key")
        made = keyed.process(_StatefulChunks(make), output_type=types.bytes_type())
    return made.name(f"{name}: to mini-batches (id table)").uid(f"{name}-batcher").set_parallelism(1)
