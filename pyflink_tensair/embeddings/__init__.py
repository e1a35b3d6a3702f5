"""Embeddings for the ids a stream brings: a table that admits, evicts and stays agreed.

No pyflink and no TensorFlow import.

- :mod:`.sketch`: :class:`CountMinSketch`, how often an id was seen, in bounded memory;
- :mod:`.table`: :class:`IdTable`, ids to rows (admission at ``min_count``, least recently
  used eviction, expiry), whose reassignments the replicas apply
  (:mod:`pyflink_tensair.core.row_resets`);
- :mod:`.window`: :class:`RecentReassignments`, the reassignments every batch repeats;
- :mod:`.maps`: :func:`id_maps`, a trained model's maps (a final model's or an export's);
- :mod:`.id_batches`: :class:`IdColumnBatches`, records of ids and a label as batches of rows.

Example::

    >>> from pyflink_tensair.embeddings import IdTable
    >>> IdTable(capacity=100, min_count=1).observe(["cat", "dog", "cat"]).tolist()
    [1, 2, 1]
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_NAMES = {"CountMinSketch": ".sketch", "IdTable": ".id_table", "OOV_ROW": ".id_table", "IdMap": ".maps", "id_maps": ".maps",
          "IdColumnBatches": ".id_batches", "RecentReassignments": ".window"}
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from .id_batches import IdColumnBatches
    from .maps import IdMap, id_maps
    from .sketch import CountMinSketch
    from .id_table import OOV_ROW, IdTable
    from .window import RecentReassignments

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
