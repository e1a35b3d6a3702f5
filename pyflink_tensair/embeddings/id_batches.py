"""Records of ids and a label, batched as rows of id tables: what a recommendation stream looks like.

No pyflink and no TensorFlow import. :class:`IdColumnBatches` takes chunks of text records
``"id_1,...,id_k,label"`` (CSV, one column per id table, the label last: e.g. ``user,item,click``)
and makes one batch per chunk: ``x = {column: rows}`` (int32), ``y`` the labels (float32,
``(B, 1)``). Each column has its own :class:`~.table.IdTable`, whose rows index the embedding layer
``<column>_embedding`` (:func:`pyflink_tensair.models.zoo.click_model`'s ``user_embedding`` and
``item_embedding``); a batch carries both tables' notices
(:class:`~.window.RecentReassignments`). A record that is not ``k`` ids and a number becomes a dead
letter and is not counted by the tables. Its whole state (tables, window) is :meth:`~IdColumnBatches.state`,
for :func:`pyflink_tensair.flink.id_tables.stateful_chunk_batches`.

Example::

    >>> from pyflink_tensair.core import wire
    >>> make = IdColumnBatches(("user", "item"), capacity=100, min_count=1)
    >>> made = list(make(["0", "0", "u1,i9,1", "u2,i9,0", "oops", "u1,i3,1"]))
    >>> wire.decode_dead_letter(made[0]).reason, wire.decode_batch(made[1]).x["item"].tolist()
    ('not_a_record', [1, 1, 2])
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence, Union

import numpy as np

from ..core import wire
from ..core.messages import Batch, DeadLetter, preview
from ..core.row_resets import TableSpec
from ..errors import ConfigError
from .id_table import IdTable
from .window import DEFAULT_SIZE, RecentReassignments


class IdColumnBatches:
    """Chunk ``[n, records before it, record, ...]`` -> one encoded batch of ``columns`` rows and
    labels (and a dead letter per bad record). ``capacity``: ids per table (one number, or one per
    column); the model's tables need ``capacity + 1`` rows (row 0: ids without a row). ``pacer``:
    an optional :class:`~pyflink_tensair.flink.pacing.Pacer`."""

    def __init__(self, columns: Sequence[str], capacity: Union[int, Mapping[str, int]], *, min_count: int = 2,
                 expire_after: Optional[int] = None, notice_window: int = DEFAULT_SIZE, pacer=None):
        self.columns = tuple(columns)
        if not self.columns or len(set(self.columns)) != len(self.columns):
            raise ConfigError(f"columns must be distinct names. Received: {columns!r}")
        capacities = capacity if isinstance(capacity, Mapping) else {c: capacity for c in self.columns}
        if set(capacities) != set(self.columns):
            raise ConfigError(f"capacity needs one entry per column {self.columns}. Received: {sorted(capacities)}")
        self.tables = {c: IdTable(capacities[c], min_count=min_count, expire_after=expire_after,
                                  spec=TableSpec(c, (f"{c}_embedding",))) for c in self.columns}
        self.recent = RecentReassignments([(t.spec, t.rows) for t in self.tables.values()], notice_window)
        self.pacer = pacer
        self._made = 0

    def rows(self, column: str) -> int:
        """Rows of ``column``'s embedding table: its capacity + 1."""
        return self.tables[column].rows

    def __call__(self, chunk):
        number, before, records = int(chunk[0]), int(chunk[1]), list(chunk[2:])
        ids: Dict[str, list] = {c: [] for c in self.columns}
        labels = []
        for i, text in enumerate(records):
            fields = text.strip().split(",")
            try:
                if len(fields) != len(self.columns) + 1 or not all(fields[:-1]):
                    raise ValueError(f"expected {len(self.columns)} ids and a label, got {len(fields)} field(s)")
                label = float(fields[-1])
                if not np.isfinite(label):
                    raise ValueError(f"the label {fields[-1]!r} is not a finite number")
            except ValueError as err:
                yield wire.encode_dead_letter(DeadLetter("not_a_record", str(err)[:300], "record", "id_batches",
                                                         before + i, preview(text)))
                continue
            for column, identifier in zip(self.columns, fields):
                ids[column].append(identifier)
            labels.append(label)
        if not labels:
            return
        x = {c: self.tables[c].observe(ids[c]) for c in self.columns}
        meta = {"id": number, **self.recent.meta({c: t.take_reassignments() for c, t in self.tables.items()})}
        if self.pacer is not None:
            meta.update(self.pacer.meta(number, position=self._made))
        self._made += 1
        yield wire.encode_batch(Batch(x, np.asarray(labels, np.float32)[:, None], meta))

    def state(self) -> Dict[str, np.ndarray]:
        state = {f"table/{c}/{k}": v for c, t in self.tables.items() for k, v in t.state().items()}
        state.update({f"recent/{k}": v for k, v in self.recent.state().items()})
        state["made"] = np.array(self._made, np.int64)
        return state

    def restore(self, state) -> None:
        for c in self.columns:
            prefix = f"table/{c}/"
            self.tables[c] = IdTable.from_state({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
        self.recent.restore({k[len("recent/"):]: v for k, v in state.items() if k.startswith("recent/")})
        self._made = int(state["made"])
