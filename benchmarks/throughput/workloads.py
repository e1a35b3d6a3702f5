"""The benchmark's workloads: a model and a deterministic batch for every number, same for every system.

- ``dense``: the reference CIFAR-10 CNN (122,570 parameters, Adam), batches of 128 generated
  32x32x3 images in 10 classes, shipped as uint8 pixels and scaled inside the model.
- ``sparse``: word2vec with the reference sizes (two tables of 50,000 x 300, SGD), batches of 2,048
  skip-gram pairs with 4 negatives, word ids drawn from a Zipf law over the vocabulary (rank ``k``
  with probability proportional to ``1 / (k + 10)``), so the rows a batch touches are as skewed as
  in text.
- ``words``: the same word2vec model (50,001 rows: row 0 for words without one), its batches made
  from Shakespeare's lines (chunks of 1,024, read again and again) through an id table that grows
  from the stream (:class:`~pyflink_tensair.word2vec.growing.GrowingVocabulary`): rows, not word
  ranks, and the notices of rows given out, which our replicas apply.
- ``clicks``: :func:`~pyflink_tensair.models.zoo.click_model` (two tables of 50,001 x 64, Adam),
  batches of 512 events of :class:`~pyflink_tensair.datasets.ZipfClicks` (200,000 user ranks,
  50,000 item ranks, churn) through two id tables of 50,000 ids: new ids take rows all along.

The last two are made in order by a maker with state (its id tables) on first use in each
process (:class:`StreamBatches`): batch ``i`` is the ``i``-th the maker makes. The baselines
take the same batches and ignore the notices (a reset row keeps its old values there).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from pyflink_tensair.core.messages import Batch
from pyflink_tensair.datasets import synthetic_images

VOCABULARY, DIM, NEGATIVES = 50_000, 300, 4
NAMES = ("dense", "sparse", "words", "clicks")
CLICK_CAPACITY, CLICK_DIM, CLICK_BATCH = 50_000, 64, 512


@dataclass(frozen=True)
class Workload:
    name: str
    batch_size: int
    model: Callable  # a model spec for train(): a partial of a zoo builder
    make_batch: Callable[[int], Batch]
    batch_bytes: int
    description: str


def dense_batch(index: int, batch_size: int = 128, seed: int = 0, pixels: str = "float32") -> Batch:
    x, y = synthetic_images(index, batch_size=batch_size, seed=seed)
    if pixels == "uint8":
        x = np.round(x * 255).astype(np.uint8)
    return Batch(x, y, {"id": int(index)})


@functools.lru_cache(maxsize=4)
def _zipf_cdf(vocabulary: int) -> np.ndarray:
    weights = 1.0 / (np.arange(vocabulary) + 10.0)
    return np.cumsum(weights / weights.sum())


def sparse_batch(index: int, batch_size: int = 2048, vocabulary: int = VOCABULARY, negatives: int = NEGATIVES,
                 seed: int = 0) -> Batch:
    rng = np.random.default_rng([seed, 7, int(index)])
    cdf = _zipf_cdf(vocabulary)
    draw = lambda shape: np.minimum(np.searchsorted(cdf, rng.random(shape)), vocabulary - 1).astype(np.int32)  # noqa: E731
    target = draw(batch_size)
    context = draw((batch_size, 1 + negatives))
    y = np.zeros((batch_size, 1 + negatives), np.float32)
    y[:, 0] = 1.0
    return Batch({"target": target, "context": context}, y, {"id": int(index)})


class StreamBatches:
    """Batch ``i`` of a stream that a maker with state makes chunk by chunk (``chunk(n)``: chunk
    ``n``'s records, ``[n, records before it, record, ...]``): made in order, and from the start
    again if an earlier batch is asked for (a restarted source). Holds one chunk's batches."""

    def __init__(self, new_maker: Callable, chunk: Callable[[int], list]):
        self._new_maker, self._chunk = new_maker, chunk
        self._restart()

    def _restart(self):
        self._maker, self._chunks, self._first, self._made = self._new_maker(), 0, 0, []

    def __call__(self, index: int) -> Batch:
        from pyflink_tensair.core import wire

        index = int(index)
        if index < self._first:
            self._restart()
        while index >= self._first + len(self._made):
            self._first += len(self._made)
            self._made = [d for d in self._maker(self._chunk(self._chunks)) if wire.peek_kind(d) == wire.KIND_BATCH]
            self._chunks += 1
        batch = wire.decode_batch(self._made[index - self._first])
        return Batch(batch.x, batch.y, {**batch.meta, "id": index})


@functools.lru_cache(maxsize=1)
def _shakespeare_lines():
    from pyflink_tensair.datasets.corpus import read_corpus, shakespeare_corpus

    return [line for line in read_corpus(shakespeare_corpus(), []) if line.strip()]


def _line_chunk(n: int, size: int = 1024) -> list:
    lines = _shakespeare_lines()
    start = (n * size) % len(lines)
    return [str(n), str(n * size), *(lines[(start + k) % len(lines)] for k in range(size))]


def _words_maker(batch_size: int):
    from pyflink_tensair.word2vec.growing import GrowingVocabulary

    return GrowingVocabulary(VOCABULARY, batch_size=batch_size, negatives=NEGATIVES)


_CLICKS = dict(user_ranks=200_000, item_ranks=50_000, user_churn=0.01, item_churn=0.05)


def _click_chunk(n: int, size: int) -> list:
    from pyflink_tensair.datasets import ZipfClicks

    users, items, clicks = ZipfClicks(**_CLICKS).events(n * size, size)
    return [str(n), str(n * size), *(f"{u},{i},{c}" for u, i, c in zip(users, items, clicks))]


def _clicks_maker():
    from pyflink_tensair.embeddings import IdColumnBatches

    return IdColumnBatches(("user", "item"), CLICK_CAPACITY)


def get(name: str, batch_size: int = None, pixels: str = "uint8") -> Workload:
    """``pixels``: how the dense workload ships its images, ``uint8`` (scaled inside the model,
    as image pipelines do: 393 KB a batch) or ``float32`` (1.5 MB, the benchmark's images until
    2026-12-01); the sparse workload has none."""
    from pyflink_tensair.models import zoo

    if pixels not in ("float32", "uint8"):
        raise ValueError(f"pixels must be 'float32' or 'uint8'. Received: {pixels!r}")
    if name == "dense":
        size = batch_size or 128
        pixel_bytes = 1 if pixels == "uint8" else 4
        return Workload("dense", size, functools.partial(zoo.cifar10_cnn, pixels=pixels),
                        functools.partial(dense_batch, batch_size=size, pixels=pixels),
                        size * (32 * 32 * 3 * pixel_bytes + 2 * 4),
                        f"CIFAR-10 CNN (122,570 parameters), batch {size}, generated 32x32x3 {pixels} images")
    if name == "sparse":
        size = batch_size or 2048
        return Workload("sparse", size, functools.partial(zoo.word2vec, vocabulary=VOCABULARY, dim=DIM, negatives=NEGATIVES),
                        functools.partial(sparse_batch, batch_size=size), size * (1 + 2 * (1 + NEGATIVES)) * 4,
                        f"word2vec, 2 tables of {VOCABULARY:,} x {DIM}, batch {size} pairs, 4 negatives, Zipf word ids")
    if name == "words":
        size = batch_size or 2048
        return Workload("words", size, functools.partial(zoo.word2vec, vocabulary=VOCABULARY + 1, dim=DIM, negatives=NEGATIVES),
                        StreamBatches(functools.partial(_words_maker, size), _line_chunk),
                        size * (1 + 2 * (1 + NEGATIVES)) * 4,
                        f"word2vec, 2 tables of {VOCABULARY + 1:,} x {DIM}, batch {size} pairs of Shakespeare's lines, "
                        "rows from an id table grown from the stream")
    if name == "clicks":
        size = batch_size or CLICK_BATCH
        rows = CLICK_CAPACITY + 1
        return Workload("clicks", size, functools.partial(zoo.click_model, users=rows, items=rows, dim=CLICK_DIM, hidden=64),
                        StreamBatches(_clicks_maker, functools.partial(_click_chunk, size=size)), size * 3 * 4,
                        f"click model, 2 tables of {rows:,} x {CLICK_DIM} (Adam), batch {size} Zipf click events "
                        "with churn, rows from two id tables")
    raise ValueError(f"workload must be one of {NAMES}. Received: {name!r}")
