"""Word2vec from a stream with no corpus in advance: a vocabulary that grows (and forgets) as
the lines come.

No pyflink and no TensorFlow import. :class:`GrowingVocabulary` turns each chunk of streamed
lines into skip-gram batches, as :class:`~.lines.LineChunkBatches` does, but its words are rows of
an :class:`~pyflink_tensair.embeddings.id_table.IdTable`: a word gets a row once seen ``min_count``
times, the least recently seen word gives its row up when the table is full, and (with
``expire_after``) a word unseen for that many words loses its row. Words without a row are left
out of the pairs, as words outside a fixed vocabulary are. Subsampling and the negatives'
distribution use the table's counts (sightings since each word got its row). Every batch carries
the rows reassigned in the last ``notice_window`` batches (:mod:`pyflink_tensair.embeddings.window`),
which the replicas reset. Its whole state (the table, the window) is :meth:`~GrowingVocabulary.state`:
the Flink function that runs it keeps that in keyed state (:func:`pyflink_tensair.flink.id_tables.stateful_chunk_batches`),
so a restored job makes exactly the batches it would have.

Example::

    >>> from pyflink_tensair.core import wire
    >>> from pyflink_tensair.core.row_resets import batch_notices
    >>> vocabulary = GrowingVocabulary(capacity=50, min_count=1, batch_size=16, subsample=0)
    >>> made = [wire.decode_batch(b) for b in vocabulary(["0", "0"] + ["the cat sat on the mat"] * 4)]
    >>> len(made), made[0].x["context"].shape, sorted(vocabulary.table.mapping())
    (6, (16, 5), ['cat', 'mat', 'on', 'sat', 'the'])
    >>> sorted(r.id for r in batch_notices(made[0])["words"].reassigned)
    ['cat', 'mat', 'on', 'sat', 'the']
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from ..core import wire
from ..core.messages import Batch
from ..core.row_resets import TableSpec
from ..embeddings.id_table import OOV_ROW, IdTable
from ..embeddings.window import DEFAULT_SIZE, RecentReassignments
from .lines import chunk_batches, good_lines
from .vocabulary import tokenize

WORDS = TableSpec("words", ("target_embedding", "context_embedding"))
"""The id table of :func:`pyflink_tensair.models.zoo.word2vec`'s two embedding layers."""

MIN_COUNT = 5
"""Sightings before a word gets a row, word2vec.c's default: with 2, rare words kept taking the
rows of middling ones (Shakespeare into 5,000 rows: co-occurrence figure 0.39 against 0.44,
docs/measurements.md 2026-12-06)."""


class GrowingVocabulary:
    """Chunk ``[n, lines before it, line, ...]`` -> encoded skip-gram batches over the rows of a
    table of ``capacity`` words (the model's tables need ``capacity + 1`` rows: row 0 is the
    shared out-of-vocabulary row). See the module docstring."""

    def __init__(self, capacity: int, *, min_count: int = MIN_COUNT, expire_after: Optional[int] = None, window: int = 3,
                 negatives: int = 4, batch_size: int = 2048, subsample: float = 1e-3, seed: int = 0,
                 notice_window: int = DEFAULT_SIZE, pacer=None):
        self.table = IdTable(capacity, min_count=min_count, expire_after=expire_after, spec=WORDS)
        self.recent = RecentReassignments([(WORDS, self.table.rows)], notice_window)
        self.settings = dict(window=window, negatives=negatives, batch_size=batch_size, subsample=subsample, seed=seed)
        self.pacer = pacer
        self._made = 0

    def __call__(self, chunk):
        number, before, lines = int(chunk[0]), int(chunk[1]), list(chunk[2:])
        good = yield from good_lines(before, lines)
        words = [tokenize(line) for line in good]
        rows = self.table.observe([w for line in words for w in line])
        encoded, start = [], 0
        for line in words:
            line_rows = rows[start:start + len(line)]
            start += len(line)
            line_rows = line_rows[line_rows != OOV_ROW]
            if line_rows.size:
                encoded.append(line_rows)
        counts = self.table.counts
        batches = chunk_batches(number, encoded, counts, self.settings) if np.count_nonzero(counts) >= 2 else []
        reassigned = {WORDS.name: self.table.take_reassignments()} if batches else {}  # else the next chunk's tell
        for batch in batches:
            meta = {**batch.meta, **self.recent.meta(reassigned)}
            reassigned = {}
            if self.pacer is not None:
                meta.update(self.pacer.meta(batch.id, position=self._made))
            self._made += 1
            yield wire.encode_batch(Batch(batch.x, batch.y, meta))

    @property
    def rows(self) -> int:
        return self.table.rows

    def state(self) -> Dict[str, np.ndarray]:
        state = {f"table/{k}": v for k, v in self.table.state().items()}
        state.update({f"recent/{k}": v for k, v in self.recent.state().items()})
        state["made"] = np.array(self._made, np.int64)
        return state

    def restore(self, state) -> None:
        self.table = IdTable.from_state({k[len("table/"):]: v for k, v in state.items() if k.startswith("table/")})
        self.recent.restore({k[len("recent/"):]: v for k, v in state.items() if k.startswith("recent/")})
        self._made = int(state["made"])
