"""The reassignments of the last few batches, which every batch carries.

No pyflink and no TensorFlow import. Batches are dealt to replicas in turn, so a replica meets
only every N-th batch; a batch that carries the reassignments of the last ``size >= N`` batches
tells each replica of every row that changed hands before it trains on the row's new id
(:mod:`pyflink_tensair.core.row_resets` applies each notice once).

Example::

    >>> from pyflink_tensair.core.row_resets import Reassignment, TableSpec, decode_notices, NOTICES
    >>> window = RecentReassignments(TableSpec("words", ("emb",)), rows=10, size=2)
    >>> first = window.meta([Reassignment(1, 1, "cat")])
    >>> second = window.meta([Reassignment(2, 1, "dog")])
    >>> third = window.meta([])
    >>> [[r.id for r in decode_notices(m[NOTICES])["words"].reassigned] for m in (first, second, third)]
    [['cat'], ['cat', 'dog'], ['dog']]
"""

from __future__ import annotations

import collections
import json
from typing import Deque, Dict, List, Sequence

import numpy as np

from ..core.row_resets import NOTICES, Reassignment, TableNotices, TableSpec, encode_notices
from ..validation import require_int

DEFAULT_SIZE = 16
"""Batches whose reassignments each batch repeats: at least the replica count."""


class RecentReassignments:
    """The reassignments of the last ``size`` batches of one table, as batch meta."""

    def __init__(self, spec: TableSpec, rows: int, size: int = DEFAULT_SIZE):
        require_int("size", size, 1)
        self.spec, self.rows, self.size = spec, int(rows), int(size)
        self._recent: Deque[List[Reassignment]] = collections.deque(maxlen=self.size)

    def meta(self, reassigned: Sequence[Reassignment]) -> Dict[str, str]:
        """The meta of the next batch (``{}`` when no row changed hands in the window), given
        the reassignments made since the previous batch."""
        self._recent.append(list(reassigned))
        carried = tuple(r for batch in self._recent for r in batch)
        if not carried:
            return {}
        return {NOTICES: encode_notices({self.spec.name: TableNotices(self.rows, self.spec.layers, carried)})}

    def state(self) -> Dict[str, np.ndarray]:
        text = json.dumps([[[r.row, r.generation, r.id] for r in batch] for batch in self._recent])
        return {"recent": np.frombuffer(text.encode("utf-8"), np.uint8)}

    def restore(self, state) -> None:
        self._recent.clear()
        for batch in json.loads(np.asarray(state["recent"]).tobytes().decode("utf-8")):
            self._recent.append([Reassignment(r, g, i) for r, g, i in batch])
