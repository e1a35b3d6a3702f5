"""Skip-gram with negative sampling: the mini-batches of passes over an encoded corpus.

No pyflink and no TensorFlow import. The batches feed :func:`pyflink_tensair.models.zoo.word2vec`.

Example::

    >>> from pyflink_tensair.word2vec import Vocabulary, encode_corpus, tokenize
    >>> corpus = ["To be, or not to be:", "that is the question."]
    >>> vocab = Vocabulary.build(word for line in corpus for word in tokenize(line))
    >>> stream = SkipGramBatches(encode_corpus(vocab, corpus), vocab.counts,
    ...                          window=2, negatives=3, batch_size=8, subsample=0)
    >>> stream.pair_count(), stream.batches_per_pass()
    (28, 3)
    >>> batch = next(stream.batches())
    >>> batch.x["target"].shape, batch.x["context"].shape, batch.y[0].tolist(), batch.id
    ((8,), (8, 4), [1.0, 0.0, 0.0, 0.0], 0)
"""

from __future__ import annotations

from typing import Iterator, Optional, Tuple

import numpy as np

from ..core.messages import Batch
from ..errors import ConfigError, DataError
from .vocabulary import Encoded, flatten


class SkipGramBatches:
    """Skip-gram with negative sampling: the batches of one or more passes over an encoded corpus.

    ``lines`` is one id array per line (or a single array: one line). Every word is a target; its
    contexts are the words at most ``window`` positions before or after it *in the same line*
    (a fixed window, unlike word2vec.c's random shrinking one); no pair crosses a line boundary.

    Each pass first drops frequent words at random as word2vec.c does (a word of corpus frequency
    ``f`` is kept with probability ``(sqrt(f / subsample) + 1) * subsample / f``; ``subsample=0``
    keeps all), so a dropped word's neighbours move closer. The pairs of the pass are then
    shuffled (``shuffle=False`` keeps corpus order: by target position, then context position), cut
    into batches of ``batch_size``, and the last partial batch is **dropped**, so every batch has
    the same shape.

    Batch ``x`` is ``{"target": int32 (B,), "context": int32 (B, 1 + negatives)}``: column 0 of
    ``context`` is the true context word, the others are negatives drawn from the unigram
    distribution raised to the power 0.75 (``counts`` ** 0.75), redrawn where they equal the true
    context. ``y`` is float32 (B, 1 + negatives), 1 in column 0 and 0 elsewhere. Batches are
    numbered from 0 across passes (``meta["id"]``); batch ``n`` depends only on ``seed`` and ``n``.

    Example::

        >>> stream = SkipGramBatches([np.array([0, 1, 2, 3], np.int32)], np.array([4, 3, 2, 1]),
        ...                          window=1, negatives=2, batch_size=4, subsample=0, shuffle=False)
        >>> stream.pairs()[0].tolist(), stream.pairs()[1].tolist()
        ([0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2])
        >>> [b.id for b in stream.batches(passes=3)], stream.batches_per_pass()
        ([0, 1, 2], 1)
    """

    def __init__(self, lines: Encoded, counts: np.ndarray, *, window: int = 3, negatives: int = 4,
                 batch_size: int = 2048, subsample: float = 1e-3, seed: int = 0, shuffle: bool = True):
        counts = np.asarray(counts, dtype=np.float64)
        if counts.ndim != 1 or (counts < 0).any() or np.count_nonzero(counts) < 2:
            raise DataError("counts must hold a count >= 0 for each word, at least two of them positive "
                            "(a word of count 0, such as an id table's free row, is never drawn)")
        if window < 1 or negatives < 0 or batch_size < 1 or subsample < 0:
            raise ConfigError(f"need window >= 1, negatives >= 0, batch_size >= 1 and subsample >= 0. Received: "
                             f"window={window}, negatives={negatives}, batch_size={batch_size}, subsample={subsample}")
        self.ids, self.line_of = flatten(lines)
        if self.ids.size and (self.ids.min() < 0 or self.ids.max() >= counts.size):
            raise DataError(f"word ids must lie in [0, {counts.size}) (one count per word). Received ids in "
                             f"[{self.ids.min()}, {self.ids.max()}]")
        if self.ids.size and (counts[self.ids] == 0).any():
            raise DataError("every word of the corpus needs a positive count")
        self.window, self.negatives, self.batch_size = int(window), int(negatives), int(batch_size)
        self.subsample, self.seed, self.shuffle = float(subsample), int(seed), bool(shuffle)
        noise = counts ** 0.75
        self._noise_cdf = np.cumsum(noise / noise.sum())
        if subsample:
            with np.errstate(divide="ignore"):
                ratio = subsample * counts.sum() / counts
            self._keep = np.minimum(1.0, np.sqrt(ratio) + ratio)
        else:
            self._keep = None
        self._cached: Tuple[int, Tuple[np.ndarray, np.ndarray]] = (-1, (np.empty(0), np.empty(0)))

    def _kept(self, pass_number: int) -> Tuple[np.ndarray, np.ndarray]:
        if self._keep is None:
            return self.ids, self.line_of
        rng = np.random.default_rng([self.seed, 0, pass_number])
        kept = rng.random(self.ids.size) < self._keep[self.ids]
        return self.ids[kept], self.line_of[kept]

    def pair_count(self, pass_number: int = 0) -> int:
        """How many (target, context) pairs pass ``pass_number`` has, without making them."""
        _, line_of = self._kept(pass_number)
        lengths = np.bincount(line_of) if line_of.size else np.zeros(0, np.int64)
        return int(sum(2 * np.maximum(lengths - d, 0).sum() for d in range(1, self.window + 1)))

    def batches_per_pass(self, pass_number: int = 0) -> int:
        """The number of (whole) batches of pass ``pass_number``; it varies a little between passes
        when ``subsample`` is on."""
        return self.pair_count(pass_number) // self.batch_size

    def pairs(self, pass_number: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """``(targets, contexts)`` of pass ``pass_number`` in batch order (int32, including the pairs
        of the dropped partial batch)."""
        if self._cached[0] == pass_number:
            return self._cached[1]
        ids, line_of = self._kept(pass_number)
        targets, contexts, positions, slots = [], [], [], []
        for d in range(1, self.window + 1):
            same = np.flatnonzero(line_of[:-d] == line_of[d:])
            targets += [ids[same], ids[same + d]]
            contexts += [ids[same + d], ids[same]]
            positions += [same, same + d]
            slots += [np.full(same.size, self.window + d, np.int8), np.full(same.size, self.window - d, np.int8)]
        targets, contexts = np.concatenate(targets).astype(np.int32), np.concatenate(contexts).astype(np.int32)
        if self.shuffle:
            order = np.random.default_rng([self.seed, 1, pass_number]).permutation(targets.size)
        else:
            order = np.lexsort((np.concatenate(slots), np.concatenate(positions)))
        result = (targets[order], contexts[order])
        self._cached = (pass_number, result)
        return result

    def batch(self, pass_number: int, index: int, batch_number: int) -> Batch:
        """Batch ``index`` of pass ``pass_number``, numbered ``batch_number`` (its ``meta["id"]``;
        its negatives are drawn from ``seed`` and ``batch_number``)."""
        targets, contexts = self.pairs(pass_number)
        rows = slice(index * self.batch_size, (index + 1) * self.batch_size)
        target, positive = targets[rows], contexts[rows]
        if target.size != self.batch_size:
            raise IndexError(f"pass {pass_number} has {targets.size // self.batch_size} whole batches; "
                             f"received index={index}")
        return self.batch_of(target, positive, batch_number)

    def batch_of(self, target: np.ndarray, positive: np.ndarray, batch_number: int) -> Batch:
        """The batch of these ``(target, positive context)`` pairs, its negatives drawn from
        ``seed`` and ``batch_number`` (its ``meta["id"]``)."""
        context = np.empty((target.size, 1 + self.negatives), np.int32)
        context[:, 0] = positive
        context[:, 1:] = self._negatives(positive, np.random.default_rng([self.seed, 2, batch_number]))
        y = np.zeros(context.shape, np.float32)
        y[:, 0] = 1.0
        return Batch(x={"target": target, "context": context}, y=y, meta={"id": int(batch_number)})

    def _negatives(self, positive: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        drawn = self._draw(rng, (positive.size, self.negatives))
        for _ in range(100):
            clash = drawn == positive[:, None]
            if not clash.any():
                break
            drawn[clash] = self._draw(rng, int(clash.sum()))
        return drawn

    def _draw(self, rng: np.random.Generator, shape) -> np.ndarray:
        ids = np.searchsorted(self._noise_cdf, rng.random(shape), side="right")
        return np.minimum(ids, self._noise_cdf.size - 1).astype(np.int32)

    def batches(self, start: int = 0, passes: Optional[int] = 1) -> Iterator[Batch]:
        """Batches ``start``, ``start + 1``, ... to the end of pass ``passes - 1`` (forever when
        ``passes`` is None). Starting late skips whole passes by counting their batches only."""
        first, pass_number = int(start), 0
        while passes is None or pass_number < passes:
            count = self.batches_per_pass(pass_number)
            if first < count:
                for index in range(first, count):
                    yield self.batch(pass_number, index, start + index - first)
                start += count - first
                first = 0
            else:
                first -= count
            pass_number += 1
            if count == 0 and passes is None:
                raise DataError("the corpus is too small for one batch per pass")
