"""An id-to-row table that admits ids seen often enough and frees rows of ids gone quiet.

No pyflink and no TensorFlow import. One :class:`IdTable` sits at the one point of a job that
sees every record in order (the batch maker), so its decisions are the same for every replica
and come back with a restore (its :meth:`~IdTable.snapshot` is Flink state there). Batches carry
rows, not ids, plus the rows reassigned since (:meth:`~IdTable.take_reassignments`), which each
replica resets at that point of its stream (:mod:`pyflink_tensair.core.row_resets`).

- Row 0 is the shared out-of-vocabulary row: an id not (yet) in the table maps there.
- Admission: an id gets a row once seen ``min_count`` times, counted by a
  :class:`~.sketch.CountMinSketch` (bounded memory, whatever the number of distinct ids).
- Eviction: with the table full, a new id takes the row of the least recently seen id if it
  has been seen more often than that id (TinyLFU's rule: without it, a stream of a few more
  equally frequent ids than rows evicts on every chunk, each word's vector starting over), and
  unless that id was seen in the same :meth:`~IdTable.observe` call. Otherwise it waits, on row 0.
- Ageing: every ``age_every`` ids observed (default: ``expire_after``, else ten times the
  capacity) the sketch's counts and the table's counts halve, so what counts is recent.
- Expiry: with ``expire_after=N``, an id not seen in the last ``N`` ids observed loses its row
  (freed, not reset: a reset comes with the row's next id).

Time is counted in ids observed, not seconds, so a replayed stream makes the same decisions.

Example::

    >>> table = IdTable(capacity=2, min_count=2)
    >>> table.observe(["a", "b", "a", "b"]).tolist()    # rows from each id's second sighting
    [0, 0, 1, 2]
    >>> table.observe(["c", "c", "a"]).tolist()         # full: "c" takes the least recently seen row, "a" then "b"'s
    [0, 1, 2]
    >>> table.observe(["x", "x", "y", "y", "z", "z"]).tolist()   # "z" waits: every row was seen in this call
    [0, 1, 0, 2, 0, 0]
    >>> [(r.row, r.generation, r.id) for r in table.take_reassignments()][-4:]
    [(1, 2, 'c'), (2, 2, 'a'), (1, 3, 'x'), (2, 3, 'y')]
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from typing import Dict, Hashable, Iterable, List, Mapping, Optional, Sequence

import numpy as np

from ..core.row_resets import Reassignment, TableSpec
from ..errors import DataError
from ..validation import require_int
from .maps import OOV_ROW
from .sketch import CountMinSketch, id_key


@dataclass
class TableStatistics:
    """What a table decided so far (all counts since the job started)."""

    observed: int = 0  # ids looked up by observe
    out_of_vocabulary: int = 0  # of them, mapped to row 0
    admitted: int = 0  # ids given a row
    evicted: int = 0  # rows taken from the least recently seen id
    expired: int = 0  # rows freed by expire_after


class IdTable:
    """``capacity`` rows for ids (the model's tables have ``capacity + 1`` rows: row 0 is shared by
    every id not in the table). See the module docstring for admission, eviction and expiry.

    ``spec`` (a :class:`~pyflink_tensair.core.row_resets.TableSpec`) names the table and the
    embedding layers its rows index; it travels with the reassignments."""

    def __init__(self, capacity: int, *, min_count: int = 2, expire_after: Optional[int] = None,
                 age_every: Optional[int] = None, sketch_width: Optional[int] = None, sketch_depth: int = 4,
                 spec: Optional[TableSpec] = None):
        require_int("capacity", capacity, 1)
        require_int("min_count", min_count, 1)
        require_int("expire_after", expire_after, 1, optional=True)
        require_int("age_every", age_every, 1, optional=True)
        require_int("sketch_width", sketch_width, 1, optional=True)
        self.capacity, self.min_count, self.expire_after = int(capacity), int(min_count), expire_after
        self.age_every = int(age_every or expire_after or 10 * self.capacity)
        self.spec = spec or TableSpec("ids", ())
        # 4 counters a row in each of the sketch's rows (16 bytes a row at depth 4)
        self.sketch = CountMinSketch(width=sketch_width or max(1024, 4 * self.capacity), depth=sketch_depth)
        self.rows_of: "collections.OrderedDict[Hashable, int]" = collections.OrderedDict()  # least recently seen first
        self.ids: List[Optional[Hashable]] = [None] * (self.capacity + 1)
        self.last_seen = np.zeros(self.capacity + 1, np.int64)
        self.counts = np.zeros(self.capacity + 1, np.int64)  # sightings since admission (0: free or OOV)
        self.generations = np.zeros(self.capacity + 1, np.int64)
        self.free: List[int] = list(range(self.capacity, 0, -1))  # popped from the end: row 1 first
        self.clock = 0  # ids observed
        self._halved_at = 0
        self.statistics = TableStatistics()
        self._reassigned: List[Reassignment] = []

    @property
    def rows(self) -> int:
        """Rows of the model's embedding tables: ``capacity + 1``."""
        return self.capacity + 1

    def __len__(self) -> int:
        return len(self.rows_of)

    def lookup(self, ids: Iterable[Hashable]) -> np.ndarray:
        """Rows of ``ids`` (int32), row 0 for ids not in the table; changes nothing (serving)."""
        rows_of = self.rows_of
        return np.fromiter((rows_of.get(i, OOV_ROW) for i in ids), np.int32)

    def observe(self, ids: Sequence[Hashable]) -> np.ndarray:
        """Rows of ``ids`` (int32) after counting each sighting, in order: an id admitted at its
        ``min_count``-th sighting has its row from then on (earlier sightings map to row 0)."""
        ids = list(ids)
        self._expire(self.clock + len(ids))
        start = self.clock
        out = np.empty(len(ids), np.int32)
        rows_of, statistics = self.rows_of, self.statistics
        for k, identifier in enumerate(ids):
            self.clock += 1
            row = rows_of.get(identifier)
            if row is None:
                seen = self.sketch.add(identifier)
                row = self._admit(identifier, start, seen) if seen >= self.min_count else OOV_ROW
                if row == OOV_ROW:
                    statistics.out_of_vocabulary += 1
            else:
                rows_of.move_to_end(identifier)
            if row != OOV_ROW:
                self.last_seen[row] = self.clock
                self.counts[row] += 1
            out[k] = row
        statistics.observed += len(ids)
        return out

    def _admit(self, identifier: Hashable, start: int, seen: int) -> int:
        id_key(identifier)  # a bad id fails here, before it takes a row
        if self.free:
            row = self.free.pop()
        else:
            oldest = next(iter(self.rows_of))
            victim = self.rows_of[oldest]
            if self.last_seen[victim] > start or seen <= self.counts[victim]:  # seen in this call, or as often
                return OOV_ROW
            row = self.rows_of.pop(oldest)
            self.statistics.evicted += 1
        self.rows_of[identifier] = row
        self.ids[row] = identifier
        self.counts[row] = 0
        self.generations[row] += 1
        self.statistics.admitted += 1
        self._reassigned.append(Reassignment(row, int(self.generations[row]), identifier))
        return row

    def _expire(self, until: int) -> None:
        """Halves the counts every ``age_every`` ids, and frees the rows of ids not seen in the
        last ``expire_after`` ids (before this call)."""
        while until - self._halved_at >= self.age_every:
            self.sketch.halve()
            self.counts >>= 1
            self._halved_at += self.age_every
        if self.expire_after is None:
            return
        horizon = self.clock - self.expire_after
        while self.rows_of:
            oldest = next(iter(self.rows_of))
            row = self.rows_of[oldest]
            if self.last_seen[row] > horizon:
                break
            del self.rows_of[oldest]
            self.ids[row], self.counts[row] = None, 0
            self.free.append(row)
            self.statistics.expired += 1

    def take_reassignments(self) -> List[Reassignment]:
        """The rows given a new id since the last call, in order."""
        taken, self._reassigned = self._reassigned, []
        return taken

    def mapping(self) -> Dict[Hashable, int]:
        """Id -> row for every id in the table."""
        return dict(self.rows_of)

    @property
    def nbytes(self) -> int:
        """Bytes the table holds: its arrays, its sketch and (estimated) its map's entries; bounded
        by ``capacity`` and the sketch's size, whatever the number of distinct ids."""
        arrays = self.last_seen.nbytes + self.counts.nbytes + self.generations.nbytes + self.sketch.nbytes
        return int(arrays + 8 * len(self.ids) + 8 * len(self.free) + 100 * len(self.rows_of))

    # ---------------------------------------------------------------- state

    def state(self) -> Dict[str, np.ndarray]:
        """The whole table as plain arrays (Flink state: :class:`~pyflink_tensair.flink.checkpointing.ChunkedState`);
        :meth:`from_state` reads it back."""
        order = [[identifier, row] for identifier, row in self.rows_of.items()]
        meta = {"capacity": self.capacity, "min_count": self.min_count, "expire_after": self.expire_after,
                "age_every": self.age_every,
                "clock": self.clock, "halved_at": self._halved_at, "spec": self.spec.to_json(),
                "statistics": vars(self.statistics), "pending": [[r.row, r.generation, r.id] for r in self._reassigned],
                "order": order}
        return {"sketch": self.sketch.counters, "last_seen": self.last_seen, "counts": self.counts,
                "generations": self.generations, "free": np.asarray(self.free, np.int64),
                "meta": np.frombuffer(json.dumps(meta, separators=(",", ":")).encode("utf-8"), np.uint8)}

    @classmethod
    def from_state(cls, state: Mapping[str, np.ndarray]) -> "IdTable":
        try:
            meta = json.loads(np.asarray(state["meta"]).tobytes().decode("utf-8"))
            sketch = np.asarray(state["sketch"])
            table = cls(meta["capacity"], min_count=meta["min_count"], expire_after=meta["expire_after"],
                        age_every=meta["age_every"],
                        sketch_width=int(sketch.shape[1]), sketch_depth=int(sketch.shape[0]),
                        spec=TableSpec.from_json(meta["spec"]))
            table.sketch = CountMinSketch.from_counters(sketch)
            table.last_seen, table.counts = np.array(state["last_seen"]), np.array(state["counts"])
            table.generations, table.free = np.array(state["generations"]), np.asarray(state["free"]).tolist()
            table.clock, table._halved_at = int(meta["clock"]), int(meta["halved_at"])
            table.statistics = TableStatistics(**meta["statistics"])
            table._reassigned = [Reassignment(r, g, i) for r, g, i in meta["pending"]]
            for identifier, row in meta["order"]:
                table.rows_of[identifier] = row
                table.ids[row] = identifier
        except (KeyError, TypeError, ValueError, UnicodeDecodeError) as err:
            raise DataError(f"not the state of an IdTable: {type(err).__name__}: {err}") from None
        return table
