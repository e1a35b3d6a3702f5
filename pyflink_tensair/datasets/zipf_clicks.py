"""A recommendation-like click stream: user and item ids from Zipf laws, with churn.

No pyflink and no TensorFlow import. Event ``i`` is ``(user, item, click)``:

- the user is rank ``r`` of a Zipf law (exponent ``zipf``) over ``user_ranks`` ranks, its id
  ``r + floor(i * user_churn)``; the item likewise with ``item_churn``: the most popular ids move
  on as the stream goes, so new ids keep appearing and old ones fade;
- the click is drawn with probability ``sigmoid(bias + appeal * (a_u + a_i) + scale * <u, v> / sqrt(dim))``:
  ``a_u`` and ``a_i`` are the user's and the item's own appeal, ``u`` and ``v`` their hidden
  tastes (numbers in [-1, 1], fixed functions of the id and the seed). Appeal is what a model
  learns of an id from a few sightings; taste needs more.

Everything follows from ``seed`` and the event number: any run, restored or not, sees the same
stream, and :meth:`ZipfClicks.distinct` says how many ids it brings.

Example::

    >>> stream = ZipfClicks(seed=0)
    >>> users, items, clicks = stream.events(0, 5)
    >>> users.dtype, clicks.tolist()
    (dtype('int64'), [1, 0, 1, 1, 0])
    >>> stream.line(3)
    '6434,448,1'
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Tuple

import numpy as np

from ..validation import require_int, require_number


_BLOCK = 1024  # events drawn together: event n's numbers are row n % 1024 of block n // 1024's


@dataclass(frozen=True)
class ZipfClicks:
    user_ranks: int = 20_000
    item_ranks: int = 5_000
    zipf: float = 1.1
    user_churn: float = 0.002
    item_churn: float = 0.01
    dim: int = 8
    appeal: float = 1.5
    scale: float = 1.5
    bias: float = -1.0
    seed: int = 0

    def __post_init__(self):
        require_int("user_ranks", self.user_ranks, 1)
        require_int("item_ranks", self.item_ranks, 1)
        require_int("dim", self.dim, 1)
        require_number("zipf", self.zipf, above=0)
        require_number("user_churn", self.user_churn, 0)
        require_number("item_churn", self.item_churn, 0)

    @cached_property
    def _cdfs(self) -> Tuple[np.ndarray, np.ndarray]:
        def cdf(n):
            weights = 1.0 / np.arange(1, n + 1) ** self.zipf
            return np.cumsum(weights / weights.sum())
        return cdf(self.user_ranks), cdf(self.item_ranks)

    @cached_property
    def _taste(self) -> Tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.seed, 1])
        return rng.uniform(0.001, 0.1, (2, self.dim + 1)), rng.uniform(0, 2 * np.pi, (2, self.dim + 1))

    def taste(self, kind: int, ids: np.ndarray) -> np.ndarray:
        """The appeal (column 0) and taste vectors of ``ids`` (``kind`` 0: users, 1: items):
        ``sin(id * f + p)``, pseudo-random per id and the same in every process."""
        frequencies, phases = self._taste
        return np.sin(np.multiply.outer(np.asarray(ids, np.float64) * 7.3, frequencies[kind] * 97.0) + phases[kind])

    def events(self, start: int, count: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(users, items, clicks)`` of events ``start .. start + count - 1`` (int64 arrays)."""
        numbers = np.arange(start, start + count)
        user_cdf, item_cdf = self._cdfs
        blocks = range(start // _BLOCK, (start + count - 1) // _BLOCK + 1) if count else range(0)
        drawn = [np.random.default_rng([self.seed, 0, b]).random((_BLOCK, 3)) for b in blocks]
        draws = np.concatenate(drawn)[start - blocks[0] * _BLOCK:][:count] if count else np.zeros((0, 3))
        users = np.minimum(np.searchsorted(user_cdf, draws[:, 0]), self.user_ranks - 1) + np.floor(numbers * self.user_churn)
        items = np.minimum(np.searchsorted(item_cdf, draws[:, 1]), self.item_ranks - 1) + np.floor(numbers * self.item_churn)
        users, items = users.astype(np.int64), items.astype(np.int64)
        u, v = self.taste(0, users), self.taste(1, items)
        logits = (self.bias + self.appeal * (u[:, 0] + v[:, 0])
                  + self.scale * (u[:, 1:] * v[:, 1:]).sum(axis=1) / np.sqrt(self.dim))
        clicks = (draws[:, 2] < 1.0 / (1.0 + np.exp(-logits))).astype(np.int64)
        return users, items, clicks

    def line(self, number: int) -> str:
        """Event ``number`` as the text a topic holds: ``"user,item,click"``."""
        users, items, clicks = self.events(number, 1)
        return f"{users[0]},{items[0]},{clicks[0]}"

    def distinct(self, events: int) -> Tuple[int, int]:
        """About how many distinct user and item ids the first ``events`` events bring (the rank
        ranges plus the churn's shift)."""
        return (self.user_ranks + int(events * self.user_churn), self.item_ranks + int(events * self.item_churn))
