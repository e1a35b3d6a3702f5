"""A count-min sketch: how often an id was seen, in memory that does not grow with the ids.

No pyflink and no TensorFlow import. :class:`~.table.IdTable` asks it whether an id not in the
table has been seen ``min_count`` times yet. Hashes are BLAKE2b of the id's text (not Python's
``hash``, which differs between processes), so every process and a restored job count alike.

Example::

    >>> sketch = CountMinSketch(width=64, depth=4)
    >>> [sketch.add("cat") for _ in range(3)], sketch.estimate("cat"), sketch.estimate("dog")
    ([1, 2, 3], 3, 0)
    >>> sketch.halve(); sketch.estimate("cat")
    1
"""

from __future__ import annotations

import hashlib
from typing import Hashable, Tuple

import numpy as np

from ..errors import ConfigError
from ..validation import require_int


def id_key(identifier: Hashable) -> bytes:
    """The bytes an id hashes as: its text, with ints and strings kept apart (``7`` is not ``"7"``)."""
    if isinstance(identifier, str):
        return b"s" + identifier.encode("utf-8")
    if isinstance(identifier, (int, np.integer)) and not isinstance(identifier, bool):
        return b"i" + str(int(identifier)).encode("ascii")
    raise ConfigError(f"ids are strings or ints. Received: {identifier!r} ({type(identifier).__name__})")


class CountMinSketch:
    """``depth`` rows of ``width`` counters (uint32). :meth:`add` uses the conservative update
    (only the counters at the current minimum grow), which keeps over-counts small; an estimate
    is never below the true count since the last :meth:`halve`."""

    def __init__(self, width: int = 1 << 16, depth: int = 4):
        require_int("width", width, 1)
        require_int("depth", depth, 1)
        self.width, self.depth = int(width), int(depth)
        self.counters = np.zeros((self.depth, self.width), np.uint32)

    def _cells(self, identifier: Hashable):
        digest = hashlib.blake2b(id_key(identifier), digest_size=16).digest()
        h1, h2 = int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1
        return [(i, (h1 + i * h2) % self.width) for i in range(self.depth)]

    def add(self, identifier: Hashable) -> int:
        """Counts one sighting of ``identifier``; returns its new estimate."""
        # scalar indexing: an id at a time, NumPy's fancy indexing costs more than it saves
        counters, cells = self.counters, self._cells(identifier)
        estimate = min(min(int(counters[cell]) for cell in cells) + 1, 0xFFFFFFFF)
        for cell in cells:
            if counters[cell] < estimate:
                counters[cell] = estimate
        return estimate

    def estimate(self, identifier: Hashable) -> int:
        return min(int(self.counters[cell]) for cell in self._cells(identifier))

    def halve(self) -> None:
        """Ages every count (integer halving): ids must keep appearing to stay counted."""
        self.counters >>= 1

    @property
    def nbytes(self) -> int:
        return int(self.counters.nbytes)

    def arrays(self) -> Tuple[np.ndarray, ...]:
        return (self.counters,)

    @classmethod
    def from_counters(cls, counters: np.ndarray) -> "CountMinSketch":
        counters = np.asarray(counters)
        if counters.ndim != 2 or counters.dtype != np.uint32:
            raise ConfigError(f"a sketch's counters are a 2-D uint32 array. Received: {counters.dtype} {counters.shape}")
        sketch = cls(width=counters.shape[1], depth=counters.shape[0])
        sketch.counters = counters.copy()
        return sketch
