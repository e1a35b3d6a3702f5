"""The reassignments of the last few batches, which every batch carries.

No pyflink and no TensorFlow import. Batches are dealt to replicas in turn, so a replica meets
only every N-th batch; a batch that carries the reassignments of the last ``size >= N`` batches
tells each replica of every row that changed hands before it trains on the row's new id
(:mod:`pyflink_tensair.core.row_resets` applies each notice once).

Example::

    >>> from pyflink_tensair.core.row_resets import Reassignment, TableSpec, decode_notices, NOTICES
    >>> window = RecentReassignments([(TableSpec("words", ("emb",)), 10)], size=2)
    >>> first = window.meta({"words": [Reassignment(1, 1, "cat")]})
    >>> second = window.meta({"words": [Reassignment(2, 1, "dog")]})
    >>> third = window.meta({})
    >>> [[r.id for r in decode_notices(m[NOTICES])["words"].reassigned] for m in (first, second, third)]
    [['cat'], ['cat', 'dog'], ['dog']]
"""

from __future__ import annotations

import collections
import json
from typing import Deque, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from ..core.row_resets import NOTICES, Reassignment, TableNotices, TableSpec, encode_notices
from ..errors import ConfigError
from ..validation import require_int

DEFAULT_SIZE = 16
"""Batches whose reassignments each batch repeats: at least the replica count."""


class RecentReassignments:
    """The reassignments of the last ``size`` batches of each table (``tables``: each table's
    spec and row count), as batch meta."""

    def __init__(self, tables: Sequence[Tuple[TableSpec, int]], size: int = DEFAULT_SIZE):
        require_int("size", size, 1)
        self.tables = {spec.name: (spec, int(rows)) for spec, rows in tables}
        if len(self.tables) != len(tables):
            raise ConfigError(f"id tables need distinct names. Received: {[spec.name for spec, _ in tables]}")
        self.size = int(size)
        self._recent: Deque[Dict[str, List[Reassignment]]] = collections.deque(maxlen=self.size)

    def meta(self, reassigned: Mapping[str, Sequence[Reassignment]]) -> Dict[str, str]:
        """The meta of the next batch (``{}`` when no row changed hands in the window), given
        each table's reassignments since the previous batch."""
        unknown = set(reassigned) - set(self.tables)
        if unknown:
            raise ConfigError(f"reassignments of unknown id tables {sorted(unknown)}")
        self._recent.append({name: list(r) for name, r in reassigned.items() if r})
        notices = {}
        for name, (spec, rows) in self.tables.items():
            carried = tuple(r for batch in self._recent for r in batch.get(name, ()))
            if carried:
                notices[name] = TableNotices(rows, spec.layers, carried)
        return {NOTICES: encode_notices(notices)} if notices else {}

    def state(self) -> Dict[str, np.ndarray]:
        text = json.dumps([{name: [[r.row, r.generation, r.id] for r in batch] for name, batch in recent.items()}
                           for recent in self._recent])
        return {"recent": np.frombuffer(text.encode("utf-8"), np.uint8)}

    def restore(self, state) -> None:
        self._recent.clear()
        for recent in json.loads(np.asarray(state["recent"]).tobytes().decode("utf-8")):
            self._recent.append({name: [Reassignment(r, g, i) for r, g, i in batch] for name, batch in recent.items()})
