"""An id table's map as a trained model carries it: look ids up the way training did.

No pyflink and no TensorFlow import. A :class:`~pyflink_tensair.core.events.FinalModel` holds its
replica's maps (``id_maps``), and an export ``model-v<version>.keras`` has them beside it in
``model-v<version>.ids.json`` (:func:`ids_path`). :func:`id_maps` reads either into
:class:`IdMap` objects: ids to rows, an id the table did not hold to the shared
out-of-vocabulary row 0.

Example::

    >>> maps = id_maps({"words": {"layers": ["target_embedding"], "rows": 4, "ids": [["cat", 1], ["dog", 3]]}})
    >>> maps["words"].rows_of(["dog", "cat", "emu"]).tolist(), len(maps["words"])
    ([3, 1, 0], 2)
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Hashable, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..errors import DataError

OOV_ROW = 0


def ids_path(keras_path: str) -> str:
    """Where the maps of the model saved at ``keras_path`` go: ``x.keras`` -> ``x.ids.json``."""
    base = keras_path[:-len(".keras")] if keras_path.endswith(".keras") else keras_path
    return base + ".ids.json"


class IdMap:
    """One table's ids and rows; :meth:`rows_of` looks ids up (unknown ids: row 0)."""

    def __init__(self, name: str, layers: Tuple[str, ...], rows: int, ids: Mapping[Hashable, int]):
        self.name, self.layers, self.rows = name, tuple(layers), int(rows)
        self.ids = dict(ids)

    def __len__(self) -> int:
        return len(self.ids)

    def rows_of(self, ids: Iterable[Hashable]) -> np.ndarray:
        get = self.ids.get
        return np.fromiter((get(i, OOV_ROW) for i in ids), np.int32)

    def words(self) -> List[Optional[Hashable]]:
        """The id of each row (``None`` for row 0 and rows no id holds): row -> id."""
        words: List[Optional[Hashable]] = [None] * self.rows
        for identifier, row in self.ids.items():
            words[row] = identifier
        return words


def id_maps(source: Union[str, os.PathLike, Mapping, object]) -> Dict[str, IdMap]:
    """The maps of a final model (``FinalModel``), of an export (its ``.keras`` path) or as JSON
    data; ``{}`` when the model has no id table."""
    data: Any = getattr(source, "id_maps", source)
    if isinstance(data, (str, os.PathLike)):
        path = ids_path(os.fspath(data))
        if not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    try:
        return {name: IdMap(name, table["layers"], table["rows"], {i: int(row) for i, row in table["ids"]})
                for name, table in data.items()}
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DataError(f"not the maps of id tables: {type(err).__name__}: {err}") from None


def write_id_maps(path: str, maps: Mapping) -> None:
    """Writes ``maps`` (``Replica.rows.maps()``) to ``path`` whole or not at all."""
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "w", encoding="utf-8") as f:
            json.dump(maps, f, separators=(",", ":"))
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
