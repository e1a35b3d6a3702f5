"""Model updates: the weights a replica trains, as a versioned stream that servers apply as it arrives.

::

    replica 0 ── UpdatePublisher ──► ModelUpdate (encoded, TrainOutput.updates) ──► broadcast ──► ModelView (each server)

An update is a **snapshot** (every weight whole) or a **delta**: the dense weights whole and, of
each table (a weight of two or more dimensions and at least ``MIN_TABLE_ROWS`` rows), only the rows
that changed since the previous update, when fewer than half of them did. The publisher finds
those rows by comparing with what it last published, so they are exact whatever the optimizer
touched. A delta names its ``base``, the version it applies onto: a view applies it only there,
and otherwise waits for the next snapshot (``snapshot_every``). Snapshots are always applied,
also an older version's: after a restore the trainer resumes from its checkpoint's version.

Every update carries the times of the publishing replica's own steps since the previous update,
so a server can tell how long each step took to reach a served prediction (its freshness).

A model with id tables (:mod:`~pyflink_tensair.core.row_resets`) has its id-to-row maps in its
updates too: a snapshot carries every table's whole map, a delta the rows that changed hands
since the previous update, so that a view looks ids up as the published weights were trained
(:meth:`ModelView.rows_of`; an id without a row reads row 0).

Example (a NumPy model standing in for Keras)::

    >>> from pyflink_tensair.testing import LinearModel
    >>> from pyflink_tensair.config import ModelUpdates
    >>> trainer, server = LinearModel(3, seed=0), LinearModel(3, seed=1)
    >>> publisher, view = UpdatePublisher(ModelUpdates(every_ms=1)), ModelView(server)
    >>> publisher.note_step(1, 10.0)
    >>> update = decode_update(encode_update(publisher.publish(trainer.get_weights(), 1, 10.0)))
    >>> view.apply(update), view.version, update.snapshot
    (True, 1, True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Dict, Hashable, Iterable, List, Mapping, Optional

import numpy as np

from ..config import ModelUpdates
from . import wire
from .messages import SparseGradient
from .row_resets import RowResets
from ..validation import is_int

MIN_TABLE_ROWS = 64  # smaller weights always travel whole: comparing rows would cost more than it saves
_DENSE, _ROWS, _VALUES, _SHAPE = "dense/", "rows/", "values/", "shape/"


@dataclass(frozen=True)
class ModelUpdate:
    """One published version of a model.

    Attributes:
        version: the model version it brings a server to (the replica's ``model_version``).
        base: the version a delta applies onto; ``-1`` for a snapshot.
        replica: the replica that published it.
        sequence: its number among the updates that replica published in this run (from 0).
        time_ms: wall time (epoch ms) of the newest step it includes (of the publish, if none).
        dense: weights sent whole, by name.
        rows: weights sent as changed rows (``SparseGradient(indices, values)``), by name.
        steps: ``(k, 2)`` float64: model version and wall time (epoch ms) of each own step of
            the replica since its previous update.
        ids: per id table, ``{"rows": n, "ids": [[id, row], ...]}``: a snapshot's whole map, a
            delta's rows that changed hands since its base (empty without id tables).
    """

    version: int
    base: int
    replica: int
    sequence: int
    time_ms: float
    dense: Dict[str, np.ndarray] = field(default_factory=dict)
    rows: Dict[str, SparseGradient] = field(default_factory=dict)
    steps: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    ids: Dict[str, dict] = field(default_factory=dict)

    @property
    def snapshot(self) -> bool:
        return self.base < 0

    @property
    def nbytes(self) -> int:
        return (sum(int(v.nbytes) for v in self.dense.values())
                + sum(int(r.indices.nbytes) + int(r.values.nbytes) for r in self.rows.values()))


def encode_update(update: ModelUpdate) -> bytes:
    """A :class:`ModelUpdate` as ``TrainOutput.updates`` carries it (a tensors record)."""
    tensors: Dict[str, np.ndarray] = {f"{_DENSE}{name}": value for name, value in update.dense.items()}
    for name, rows in update.rows.items():
        tensors[f"{_ROWS}{name}"] = np.asarray(rows.indices, np.int64)
        tensors[f"{_VALUES}{name}"] = rows.values
        tensors[f"{_SHAPE}{name}"] = np.asarray(rows.dense_shape, np.int64)
    tensors["steps"] = np.asarray(update.steps, np.float64).reshape(-1, 2)
    meta = {"update": 1, "version": update.version, "base": update.base, "replica": update.replica,
            "sequence": update.sequence, "time_ms": float(update.time_ms)}
    if update.ids:  # JSON text: meta holds scalars only
        meta["ids"] = json.dumps(update.ids, separators=(",", ":"))
    return wire.encode_tensors(tensors, meta)


def decode_update(data) -> ModelUpdate:
    """Decodes a record of ``TrainOutput.updates``; ``WireFormatError`` if it is none."""
    meta, tensors = wire.decode_tensors(data)
    ints = [meta.get(k) for k in ("version", "base", "replica", "sequence")]
    if meta.get("update") != 1 or not all(is_int(v) for v in ints) or not isinstance(meta.get("time_ms"), (int, float)):
        raise wire.WireFormatError(f"not a model update (needs ints version, base, replica, sequence and a "
                                   f"time_ms). Received meta: {meta!r:.200}")
    steps = tensors.get("steps", np.zeros((0, 2)))
    dense = {k[len(_DENSE):]: v for k, v in tensors.items() if k.startswith(_DENSE)}
    rows = {}
    for key, indices in tensors.items():
        if key.startswith(_ROWS):
            name = key[len(_ROWS):]
            values, shape = tensors.get(f"{_VALUES}{name}"), tensors.get(f"{_SHAPE}{name}")
            if values is None or shape is None or len(values) != len(indices):
                raise wire.WireFormatError(f"model update rows of {name!r} come without as many values, or no shape")
            rows[name] = SparseGradient(indices, values, tuple(int(n) for n in shape))
    try:
        ids = json.loads(meta.get("ids") or "{}")
        for table in ids.values():
            if not all(isinstance(i, (str, int)) and isinstance(r, int) and 0 < r < int(table["rows"])
                       for i, r in table["ids"]):
                raise ValueError("an id that is not a string or an int, or a row outside the table")
    except (AttributeError, KeyError, TypeError, ValueError) as err:  # JSONDecodeError is a ValueError
        raise wire.WireFormatError(f"model update id maps are malformed: {type(err).__name__}: {err}") from None
    return ModelUpdate(int(ints[0]), int(ints[1]), int(ints[2]), int(ints[3]), float(meta["time_ms"]),
                       dense, rows, np.asarray(steps, np.float64).reshape(-1, 2), ids)


class UpdatePublisher:
    """Decides when the replica publishes and what an update holds (module docstring).

    The replica tells it each own step (:meth:`note_step`) and asks :meth:`due` after every
    callback that may have changed the model; :meth:`publish` makes the update from the current
    weights. :meth:`reset` (after a restore) makes the next update a snapshot.
    """

    def __init__(self, settings: ModelUpdates, replica: int = 0):
        self.settings = settings
        self.replica = replica
        self.sequence = 0  # updates published so far
        self.published_version = -1
        self.bytes_published = 0
        self._published_at_ms: Optional[float] = None
        self._last: Dict[str, np.ndarray] = {}  # the weights as last published
        self._generations: Dict[str, np.ndarray] = {}  # each id table's row generations as last published
        self._steps: List[tuple] = []

    def note_step(self, version: int, at_ms: float) -> None:
        self._steps.append((float(version), float(at_ms)))

    def reset(self) -> None:
        self._last = {}
        self._generations = {}
        self._steps = []
        self.published_version = -1

    def due_in_ms(self, version: int, now_ms: float) -> Optional[float]:
        """Milliseconds until an update is due (``<= 0``: now), ``None`` while the model has not
        changed since the last one."""
        if version == self.published_version or (version == 0 and self.published_version < 0):
            return None  # unchanged; version 0 is the weights every server starts from
        every_steps = self.settings.every_steps
        if (self._published_at_ms is None or self.published_version < 0
                or (every_steps is not None and version - self.published_version >= every_steps)):
            return 0.0
        return self._published_at_ms + self.settings.every_ms - now_ms

    def due(self, version: int, now_ms: float) -> bool:
        wait = self.due_in_ms(version, now_ms)
        return wait is not None and wait <= 0

    def due_in_s(self, version: int, now_ms: float) -> Optional[float]:
        """Seconds until the next update is due (0: now), ``None`` if none is pending."""
        wait = self.due_in_ms(version, now_ms)
        return None if wait is None else max(0.0, wait / 1000.0)

    def due_updates(self, model, version: int, now_ms: float, id_tables: Optional[RowResets] = None, *,
                    force: bool = False) -> List[ModelUpdate]:
        """The update of ``model`` (its ``get_weights()``) when one is due (``force``: if the model
        changed since the last one at all), else nothing."""
        wait = self.due_in_ms(version, now_ms)
        if wait is None or not (force or wait <= 0):
            return []
        return [self.publish(model.get_weights(), version, now_ms, id_tables)]

    def publish(self, weights: Mapping[str, np.ndarray], version: int, now_ms: float,
                id_tables: Optional[RowResets] = None) -> ModelUpdate:
        """The update of ``weights`` at ``version``; ``id_tables``: the replica's id tables, whose maps
        (whole in a snapshot, the rows that changed hands in a delta) the update carries."""
        snapshot = self.published_version < 0 or self.sequence % self.settings.snapshot_every == 0
        dense: Dict[str, np.ndarray] = {}
        rows: Dict[str, SparseGradient] = {}
        for name, value in weights.items():
            value = np.asarray(value)
            last = self._last.get(name)
            table = value.ndim >= 2 and len(value) >= MIN_TABLE_ROWS
            if snapshot or last is None or last.shape != value.shape or not table:
                dense[name] = np.array(value, copy=True)
                if table:  # its own copy: the update's arrays must not change once it is out
                    self._last[name] = np.array(value, copy=True)
                continue
            changed = np.flatnonzero(np.any(value.reshape(len(value), -1) != last.reshape(len(last), -1), axis=1))
            if 2 * len(changed) >= len(value):
                dense[name] = np.array(value, copy=True)
                self._last[name] = np.array(value, copy=True)
            elif len(changed):
                rows[name] = SparseGradient(changed.astype(np.int64), np.array(value[changed], copy=True), value.shape)
                last[changed] = value[changed]
        steps = np.asarray(self._steps, np.float64).reshape(-1, 2)
        ids = {} if id_tables is None else self._id_changes(id_tables, snapshot)
        update = ModelUpdate(version, -1 if snapshot else self.published_version, self.replica, self.sequence,
                             float(steps[-1, 1]) if len(steps) else float(now_ms), dense, rows, steps, ids)
        self._steps = []
        self.sequence += 1
        self.published_version = version
        self._published_at_ms = now_ms
        self.bytes_published += update.nbytes
        return update

    def _id_changes(self, tables: RowResets, snapshot: bool) -> Dict[str, dict]:
        changes = {}
        for name, generations in tables.generations.items():
            last = self._generations.get(name)
            if snapshot or last is None or last.shape != generations.shape:
                changed = np.flatnonzero(generations > 0)
            else:
                changed = np.flatnonzero(generations != last)
            self._generations[name] = generations.copy()
            if snapshot or len(changed):
                ids = tables.ids[name]
                changes[name] = {"rows": int(generations.shape[0]), "ids": [[ids[r], r] for r in changed.tolist()]}
        return changes


class ModelView:
    """A server's model and the version it holds, moved on by the updates that reach it.

    ``model`` needs ``set_weights(dict)`` taking arrays and ``SparseGradient`` rows (the
    :class:`~pyflink_tensair.models.keras_adapter.KerasModelAdapter` does). It starts at
    ``version`` 0, the weights it was built with, until an update arrives.
    """

    def __init__(self, model, version: int = 0):
        self.model = model
        self.version = version
        self.time_ms: Optional[float] = None  # the newest step the held version includes
        self.applied = 0
        self.snapshots = 0
        self.skipped = 0  # deltas whose base this view did not hold (a snapshot brings it back)
        self.id_rows: Dict[str, Dict[Hashable, int]] = {}  # per id table: id -> row
        self._row_ids: Dict[str, Dict[int, Hashable]] = {}
        self._unserved: List[np.ndarray] = []  # steps (version, time) of applied updates not yet used for a prediction

    def apply(self, update: ModelUpdate) -> bool:
        """Applies ``update`` if it follows the held version (or is a snapshot); returns whether it did."""
        if not update.snapshot and update.base != self.version:
            self.skipped += 1
            return False
        weights: Dict[str, object] = dict(update.dense)
        weights.update(update.rows)
        self.model.set_weights(weights)
        self._apply_ids(update.ids, whole=update.snapshot)
        self.version = update.version
        self.time_ms = update.time_ms
        self.applied += 1
        self.snapshots += int(update.snapshot)
        if len(update.steps):
            self._unserved.append(update.steps)
        return True

    def set_maps(self, maps: Mapping[str, Mapping[Hashable, int]]) -> None:
        """Starts from these id-to-row maps (a ``.keras`` export's, :func:`pyflink_tensair.embeddings.id_maps`)."""
        self.id_rows = {name: dict(m) for name, m in maps.items()}
        self._row_ids = {name: {row: i for i, row in m.items()} for name, m in self.id_rows.items()}

    def _apply_ids(self, tables: Mapping[str, dict], whole: bool) -> None:
        if whole:
            self.id_rows, self._row_ids = {}, {}
        for name, table in tables.items():
            id_rows, row_ids = self.id_rows.setdefault(name, {}), self._row_ids.setdefault(name, {})
            for identifier, row in table["ids"]:
                old = row_ids.get(row)
                if old is not None and id_rows.get(old) == row:
                    del id_rows[old]
                row_ids[row] = identifier
                id_rows[identifier] = row

    def rows_of(self, table: str, ids: Iterable[Hashable]) -> np.ndarray:
        """Rows (int32) of ``ids`` in id table ``table`` as the held version was trained; row 0
        for an id without a row, and for every id while no map has arrived."""
        id_rows = self.id_rows.get(table, {})
        return np.fromiter((id_rows.get(i, 0) for i in ids), np.int32)

    def age_ms(self, now_ms: float) -> Optional[float]:
        """How old the held version is: ``now_ms`` minus its newest step (``None`` at version 0)."""
        return None if self.time_ms is None else now_ms - self.time_ms

    def served(self, now_ms: float) -> np.ndarray:
        """Call when the held model served a prediction at ``now_ms``: ``(k, 2)``, the model
        version of every step that reached a prediction for the first time now and its freshness
        (ms); ``k = 0`` if none did."""
        if not self._unserved:
            return np.zeros((0, 2))
        steps = np.concatenate(self._unserved)
        self._unserved = []
        return np.stack([steps[:, 0], now_ms - steps[:, 1]], axis=1)
