"""Rows of embedding tables that change hands: the notices batches and messages carry, and the
generations a replica keeps so that it resets each row once per new id.

An :class:`~pyflink_tensair.embeddings.id_table.IdTable` in the batch maker gives a row to a new
id, perhaps a row an old id held. Every replica must then reset that row (its weights to fresh
initial values, its optimizer slots to zero) at the same point of the stream, or the new id
inherits the old one's vector. A row's *generation* counts its ids: a notice
``(row, generation, id)`` says "from here on, ``row`` is ``id``'s".

- A batch carries the notices of the last few batches (``meta[NOTICES]``), so every replica meets
  a notice in its own batches before it trains on the row's new id.
- A gradient message carries the notices its sender applied from its own batches, so a peer
  applies them before the gradient that may use the fresh row (synchronous replicas: before the
  step's average, so they stay bit-identical).
- :class:`RowResets` keeps each row's generation and id: a notice is applied once (the newest
  generation wins), whichever way it arrives first. An id holds one row: one that takes a new row
  (it expired, then came back) leaves its old one, which stays unmapped until its next notice.
  Notices are applied and passed on in stream order; a replica meets each in its own batches in
  that order when ``notice_window`` is at least the replica count and batches go round robin.
  Its map is what exports carry.

Fresh values depend only on (table, layer, row, generation) and the layer's initializer, so
every replica draws the same numbers without a copy of the initial table.

Example::

    >>> resets = RowResets()
    >>> notices = {"words": TableNotices(3, ("emb",), (Reassignment(1, 1, "cat"),))}
    >>> done = []
    >>> applied = resets.apply(notices, lambda table, layers, rows, generations: done.append(rows.tolist()))
    >>> done, resets.mapping("words"), resets.apply(notices, None)
    ([[1]], {'cat': 1}, {})
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Dict, Hashable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..errors import ConfigError, WireFormatError

NOTICES = "row_notices"
"""The batch meta key (and gradient message meta key) that holds the notices, as JSON text."""


@dataclass(frozen=True)
class TableSpec:
    """An id table's name and the embedding layers (by name) whose rows its ids index: word2vec's
    words index ``target_embedding`` and ``context_embedding``."""

    name: str
    layers: Tuple[str, ...]

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ConfigError(f"a table's name is a non-empty string without '/'. Received: {self.name!r}")
        object.__setattr__(self, "layers", tuple(self.layers))
        if not all(isinstance(layer, str) and layer for layer in self.layers):
            raise ConfigError(f"a table's layers are layer names. Received: {self.layers!r}")

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "layers": list(self.layers)})

    @classmethod
    def from_json(cls, text: str) -> "TableSpec":
        data = json.loads(text)
        return cls(data["name"], tuple(data["layers"]))


class Reassignment(NamedTuple):
    """``row`` holds ``id`` from here on; ``generation`` counts the ids the row has held. (A
    named tuple: a batch repeats the notices of its window, a thousand or more on a churning
    stream, and a frozen dataclass cost four times as much to make.)"""

    row: int
    generation: int
    id: Hashable


@dataclass(frozen=True)
class TableNotices:
    """The reassignments of one table, with the table's row count and layers."""

    rows: int
    layers: Tuple[str, ...]
    reassigned: Tuple[Reassignment, ...]


Notices = Mapping[str, TableNotices]
Reset = Callable[[str, Tuple[str, ...], np.ndarray, np.ndarray], None]
"""``reset(table, layers, rows, generations)``: the model's part (fresh rows, zero slots)."""


def encode_notices(notices: Notices) -> str:
    """The JSON text of ``notices`` (for ``meta[NOTICES]``)."""
    return json.dumps({name: {"rows": n.rows, "layers": list(n.layers),
                              "reassigned": [[r.row, r.generation, r.id] for r in n.reassigned]}
                       for name, n in notices.items()}, separators=(",", ":"))


def decode_notices(text: Optional[str]) -> Dict[str, TableNotices]:
    """``meta[NOTICES]`` back as notices; ``{}`` for ``None``. Malformed notices raise
    :class:`~pyflink_tensair.errors.WireFormatError`."""
    if text is None:
        return {}
    try:
        data = json.loads(text)
        notices = {}
        for name, table in data.items():
            rows, layers = table["rows"], table["layers"]
            if type(rows) is not int or rows < 2:
                raise ValueError(f"a table's row count is an integer >= 2 (row 0 is the shared unknown row), not {rows!r}")
            if not isinstance(layers, list) or not layers or not all(isinstance(layer, str) for layer in layers):
                raise ValueError(f"a table's layers are a list of layer names, not {layers!r}")
            reassigned = tuple(map(Reassignment._make, table["reassigned"]))
            # one pass (a NumPy array of the numbers and a type pass beside it cost twice as much);
            # type(...) is int: JSON's true is a bool, not a row
            if not all(type(row) is int and type(generation) is int and type(i) in (str, int)
                       and 0 < row < rows and generation >= 1 for row, generation, i in reassigned):
                raise ValueError("rows are integers inside the table, generations integers >= 1, ids strings or integers")
            notices[str(name)] = TableNotices(rows, tuple(layers), reassigned)
        return notices
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        raise WireFormatError(f"malformed row notices: {type(err).__name__}: {err}") from None


def batch_notices(batch) -> Dict[str, TableNotices]:
    """The notices a :class:`~pyflink_tensair.core.messages.Batch` carries (``{}`` for none)."""
    return decode_notices(batch.meta.get(NOTICES))


def merge_notices(*groups: Notices) -> Dict[str, TableNotices]:
    """The notices of ``groups`` together, each (table, row, generation) once, in order."""
    merged: Dict[str, Tuple[int, Tuple[str, ...], Dict[Tuple[int, int], Reassignment]]] = {}
    for group in groups:
        for name, table in group.items():
            entry = merged.setdefault(name, (table.rows, table.layers, {}))
            for r in table.reassigned:
                entry[2].setdefault((r.row, r.generation), r)
    return {name: TableNotices(rows, layers, tuple(found.values())) for name, (rows, layers, found) in merged.items()}


class RowResets:
    """A replica's view of its id tables: each row's generation and id. :meth:`apply` resets the
    rows whose notice is newer than what the replica has (once each) and remembers them; the
    notices applied from the replica's own batches wait in ``outgoing`` for its next gradient
    message (:meth:`pass_on`, :meth:`take_outgoing`)."""

    def __init__(self):
        self.generations: Dict[str, np.ndarray] = {}
        self.ids: Dict[str, List[Optional[Hashable]]] = {}
        self.layers: Dict[str, Tuple[str, ...]] = {}
        self._rows: Dict[str, Dict[Hashable, int]] = {}  # id -> row, the inverse of ids
        self.outgoing: Dict[str, TableNotices] = {}

    def pass_on(self, applied: Notices) -> None:
        """Notices applied from this replica's own batches: its peers get them in its next gradient message."""
        self.outgoing = merge_notices(self.outgoing, applied)

    def read_batch(self, batch) -> Tuple[Dict[str, TableNotices], Optional[str]]:
        """A batch's row notices, their tables declared (:meth:`declare`); or why they are malformed."""
        try:
            notices = batch_notices(batch)
        except WireFormatError as err:
            return {}, str(err)
        misfit = self.declare(notices)
        return ({}, misfit) if misfit is not None else (notices, None)

    def take_outgoing(self) -> Dict[str, TableNotices]:
        """The notices to pass on, now (a gradient message carries them)."""
        out, self.outgoing = self.outgoing, {}
        return out

    def apply(self, notices: Notices, reset: Optional[Reset]) -> Dict[str, TableNotices]:
        """Resets (through ``reset``) every row whose notice has a newer generation; returns the
        notices applied (``{}`` when none was new)."""
        applied: Dict[str, TableNotices] = {}
        for name, table in notices.items():
            generations = self._table(name, table)
            newest: Dict[int, Reassignment] = {}
            for r in table.reassigned:
                if r.generation > generations[r.row] and (r.row not in newest or r.generation > newest[r.row].generation):
                    newest[r.row] = r
            if not newest:
                continue
            chosen = [r for r in table.reassigned if newest.get(r.row) is r]  # stream order, passed on as such
            by_row = sorted(chosen, key=lambda r: r.row)
            rows = np.array([r.row for r in by_row], np.int64)
            gens = np.array([r.generation for r in by_row], np.int64)
            if reset is not None:
                reset(name, table.layers, rows, gens)
            generations[rows] = gens
            for r in chosen:  # an id that came back holds its newest row
                self._assign(name, r.row, r.id)
            applied[name] = TableNotices(table.rows, table.layers, tuple(chosen))
        return applied

    def misfit(self, notices: Notices) -> Optional[str]:
        """Why ``notices`` do not fit the tables this replica knows (another row count or other
        layers), or ``None`` when they fit: checked before anything is applied."""
        for name, table in notices.items():
            if name in self.generations and (self.generations[name].shape[0] != table.rows
                                             or self.layers[name] != table.layers):
                return (f"row notices for table {name!r} of {table.rows} rows over {table.layers}; this "
                        f"replica's has {self.generations[name].shape[0]} rows over {self.layers[name]}")
        return None

    def declare(self, notices: Notices) -> Optional[str]:
        """:meth:`misfit`; when they fit, takes note of the tables ``notices`` name (row count,
        layers) without applying them, so that later notices are checked against them (notices
        held for later)."""
        detail = self.misfit(notices)
        if detail is None:
            for name, table in notices.items():
                self._table(name, table)
        return detail

    def _table(self, name: str, table: TableNotices) -> np.ndarray:
        if name not in self.generations:
            self.generations[name] = np.zeros(table.rows, np.int64)
            self.ids[name] = [None] * table.rows
            self._rows[name] = {}
            self.layers[name] = table.layers
        else:
            detail = self.misfit({name: table})
            if detail is not None:
                raise WireFormatError(detail)
        return self.generations[name]

    def adopt(self, state: Mapping[str, np.ndarray]) -> None:
        """Takes in another replica's rows (a rescale's old replica): per row, the newer generation
        and its id."""
        other = RowResets()
        other.restore(state)
        for name, generations in other.generations.items():
            mine = self._table(name, TableNotices(int(generations.shape[0]), other.layers[name], ()))
            newer = np.flatnonzero(generations > mine)
            mine[newer] = generations[newer]
            for row in newer.tolist():
                self._assign(name, row, other.ids[name][row])

    def _assign(self, name: str, row: int, identifier: Optional[Hashable]) -> None:
        """``row`` is ``identifier``'s now: the row's old id and the id's old row part."""
        ids, rows = self.ids[name], self._rows[name]
        old = ids[row]
        if old is not None and rows.get(old) == row:
            del rows[old]
        if identifier is not None:
            previous = rows.get(identifier)
            if previous is not None and previous != row:
                ids[previous] = None
            rows[identifier] = row
        ids[row] = identifier

    def mapping(self, name: str) -> Dict[Hashable, int]:
        """Id -> row of table ``name`` as this replica knows it."""
        return dict(self._rows.get(name, {}))

    def maps(self) -> Dict[str, Dict]:
        """Every table's map and layers, as exports carry them (JSON-ready)."""
        return {name: {"layers": list(self.layers[name]), "rows": int(self.generations[name].shape[0]),
                       "ids": [[i, row] for row, i in enumerate(self.ids[name]) if i is not None]}
                for name in sorted(self.generations)}

    # ---------------------------------------------------------------- state

    def snapshot(self) -> Dict[str, np.ndarray]:
        state = {}
        if self.outgoing:
            state["notices_out"] = np.frombuffer(encode_notices(self.outgoing).encode("utf-8"), np.uint8).copy()
        if not self.generations:
            return state
        maps = json.dumps(self.maps(), separators=(",", ":")).encode("utf-8")
        return {**state, "rows/maps": np.frombuffer(maps, np.uint8),
                **{f"rows/{name}/generations": g for name, g in self.generations.items()}}

    def restore(self, state: Mapping[str, np.ndarray]) -> None:
        self.generations, self.ids, self.layers, self._rows = {}, {}, {}, {}
        self.outgoing = decode_notices(state["notices_out"].tobytes().decode("utf-8")) if "notices_out" in state else {}
        if "rows/maps" not in state:
            return
        for name, table in json.loads(state["rows/maps"].tobytes().decode("utf-8")).items():
            self.generations[name] = np.array(state[f"rows/{name}/generations"], np.int64)
            self.layers[name] = tuple(table["layers"])
            self.ids[name], self._rows[name] = [None] * int(table["rows"]), {}
            for identifier, row in table["ids"]:
                self._assign(name, row, identifier)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a well-spread uint64 for each uint64 (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _uniforms(keys: np.ndarray, width: int, draw: int) -> np.ndarray:
    """Uniforms in (0, 1), ``len(keys)`` x ``width``: draw ``draw`` of each key's counter stream."""
    counters = np.arange(width, dtype=np.uint64) + np.uint64(width) * np.uint64(draw)
    bits = _mix(keys[:, None] + (counters[None, :] + np.uint64(1)) * _GOLDEN)
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53


def _normals(keys: np.ndarray, width: int, draw: int) -> np.ndarray:
    """Standard normals (Box-Muller over two draws)."""
    u, v = _uniforms(keys, width, 2 * draw), _uniforms(keys, width, 2 * draw + 1)
    return np.sqrt(-2.0 * np.log(u)) * np.cos(2.0 * np.pi * v)


def fresh_rows(initializer: Mapping, rows: np.ndarray, generations: np.ndarray, width: int, salt: Sequence[int],
               dtype=np.float32) -> np.ndarray:
    """Initial values for ``rows`` at ``generations``, from the layer's initializer's distribution
    (``initializer``: a Keras initializer's ``{"class_name", "config"}``), a function of ``salt``,
    row and generation only (a counter-based hash, all rows at once: a generator per row cost
    12 us a row). Supported: ``RandomUniform``, ``RandomNormal``, ``TruncatedNormal``,
    ``Zeros``, ``Ones``, ``Constant``."""
    kind, config = initializer.get("class_name"), initializer.get("config") or {}
    keys = np.zeros(len(rows), np.uint64)
    for part in (*salt, np.asarray(rows, np.int64), np.asarray(generations, np.int64)):
        keys = _mix(keys * _GOLDEN + np.asarray(part).astype(np.uint64))
    if kind == "RandomUniform":
        low, high = config.get("minval", -0.05), config.get("maxval", 0.05)
        values = low + (high - low) * _uniforms(keys, width, 0)
    elif kind == "RandomNormal":
        values = config.get("mean", 0.0) + config.get("stddev", 0.05) * _normals(keys, width, 0)
    elif kind == "TruncatedNormal":
        values, draw = _normals(keys, width, 0), 0
        while (bad := np.abs(values) > 2).any():  # redraw outside two standard deviations, as Keras does
            draw += 1
            values = np.where(bad, _normals(keys, width, draw), values)
        values = config.get("mean", 0.0) + config.get("stddev", 0.05) * values
    elif kind in ("Zeros", "Ones", "Constant"):
        values = np.full((len(rows), width), {"Zeros": 0.0, "Ones": 1.0}.get(kind, config.get("value", 0.0)))
    else:
        raise ConfigError(f"rows of a table with a {kind} initializer cannot be reset: use RandomUniform, "
                          "RandomNormal, TruncatedNormal, Zeros, Ones or Constant")
    return values.astype(dtype, copy=False)
