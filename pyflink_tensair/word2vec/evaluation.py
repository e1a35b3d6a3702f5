"""How good a table of word vectors is, and how to save it.

No pyflink and no TensorFlow import. Pairs of words to compare (:func:`cooccurring_pairs`, and the
baselines :func:`random_pairs` and :func:`shuffled_pairs`), their mean cosine similarity
(:func:`mean_cosine`, best after :func:`centered`), each word's :func:`nearest_neighbours`, and
:func:`write_word2vec_text`, the format gensim and TensorFlow's embedding projector read.

Example::

    >>> from pyflink_tensair.word2vec import Vocabulary
    >>> vocab = Vocabulary(("a", "b", "c"), np.array([3, 2, 1]))
    >>> table = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    >>> round(mean_cosine(table, np.array([[0, 1]])), 3), [w for w, _ in nearest_neighbours(table, vocab, ["a"])["a"]]
    (0.994, ['b', 'c'])
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Tuple, Union

import numpy as np

from ..errors import ConfigError, DataError
from .vocabulary import Encoded, Vocabulary, flatten


def cooccurring_pairs(encoded: Encoded, window: int, top: int = 200, skip_most_frequent: int = 100) -> np.ndarray:
    """The ``top`` unordered word-id pairs that occur most often within ``window`` positions of each
    other in a line (int32, shape (at most top, 2), smaller id first, most frequent first).

    Pairs of a word with itself and pairs with an id below ``skip_most_frequent`` are left out: ids
    are frequency ranks, so those are the most frequent words (stop words). Equal counts are
    ordered by ids, so the result is deterministic.

    Example::

        >>> cooccurring_pairs([np.array([5, 6, 7, 5, 6])], window=1, top=2, skip_most_frequent=0).tolist()
        [[5, 6], [5, 7]]
    """
    ids, line_of = flatten(encoded)
    if ids.size == 0:
        return np.zeros((0, 2), np.int32)
    size = int(ids.max()) + 1
    keys = []
    for d in range(1, window + 1):
        a, b = ids[:-d].astype(np.int64), ids[d:].astype(np.int64)
        keep = (line_of[:-d] == line_of[d:]) & (a != b) & (np.minimum(a, b) >= skip_most_frequent)
        keys.append(np.minimum(a, b)[keep] * size + np.maximum(a, b)[keep])
    unique, counts = np.unique(np.concatenate(keys), return_counts=True)
    best = unique[np.lexsort((unique, -counts))[:top]]
    return np.stack([best // size, best % size], axis=1).astype(np.int32)


def random_pairs(id_range: Union[int, Tuple[int, int]], count: int, seed: int = 0) -> np.ndarray:
    """``count`` distinct unordered pairs of distinct ids drawn uniformly from ``id_range``
    (``n`` for [0, n), or ``(low, high)`` for [low, high)); int32 (count, 2), smaller id first.

    A baseline for :func:`mean_cosine`, drawn from the frequency ranks the co-occurring pairs come
    from, e.g. ``(skip_most_frequent, 5000)`` next to ``cooccurring_pairs(..., skip_most_frequent)``.
    Early in training rare words share one direction (their rows were barely touched but all
    pulled alike), so uniform ranks can score above co-occurring pairs; :func:`shuffled_pairs`
    keeps the words and their frequencies and only breaks the pairing.

    Example::

        >>> pairs = random_pairs((100, 110), 45, seed=1)
        >>> len({tuple(p) for p in pairs.tolist()}), int(pairs.min()), int(pairs.max())
        (45, 100, 109)
    """
    low, high = (0, id_range) if isinstance(id_range, (int, np.integer)) else id_range
    n = int(high) - int(low)
    if count > n * (n - 1) // 2:
        raise ConfigError(f"count must be at most the {n * (n - 1) // 2} distinct pairs of [{low}, {high}). Received: count={count}")
    rng = np.random.default_rng([seed, 3])
    found = np.zeros(0, np.int64)
    while found.size < count:
        a, b = rng.integers(0, n, size=(2, 2 * count + 16), dtype=np.int64)
        keys = np.minimum(a, b)[a != b] * n + np.maximum(a, b)[a != b]
        _, first = np.unique(np.concatenate([found, keys]), return_index=True)
        found = np.concatenate([found, keys])[np.sort(first)]
    found = found[:count]
    return (np.stack([found // n, found % n], axis=1) + int(low)).astype(np.int32)


def shuffled_pairs(pairs: np.ndarray, seed: int = 0) -> np.ndarray:
    """``pairs`` with their second words permuted (seeded): the same words at the same
    frequencies, paired at random; a pair that would pair a word with itself is redrawn when possible.

    Example::

        >>> pairs = np.array([[1, 2], [3, 4], [5, 6], [7, 8]])
        >>> shuffled = shuffled_pairs(pairs, seed=0)
        >>> shuffled[:, 0].tolist(), sorted(shuffled[:, 1].tolist())
        ([1, 3, 5, 7], [2, 4, 6, 8])
    """
    pairs = np.asarray(pairs)
    rng = np.random.default_rng([seed, 4])
    second = rng.permutation(pairs[:, 1])
    for _ in range(100):
        same = np.flatnonzero(second == pairs[:, 0])
        if not same.size or pairs.shape[0] < 2:
            break
        for i in same:
            j = rng.integers(pairs.shape[0])
            second[i], second[j] = second[j], second[i]
    return np.stack([pairs[:, 0], second], axis=1).astype(pairs.dtype)


def _unit_rows(embeddings: np.ndarray) -> np.ndarray:
    table = np.asarray(embeddings, dtype=np.float64)
    return table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)


def centered(embeddings: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The vocabulary's rows minus their mean weighted by word counts (the mean vector of the
    corpus' tokens).

    Negative sampling pushes every target vector away from the same frequent context words, so
    trained vectors share one direction and every raw cosine reads high (rare words' most of
    all: they were pushed and little else). Removing that common component, as "all-but-the-top"
    post-processing does, leaves the similarity that tells words apart.

    Example::

        >>> centered(np.array([[2.0, 1.0], [0.0, 1.0], [9.0, 9.0]]), np.array([1, 1])).tolist()
        [[1.0, 0.0], [-1.0, 0.0]]
    """
    counts = np.asarray(counts, dtype=np.float64)
    table = np.asarray(embeddings, dtype=np.float64)[:counts.size]
    return table - np.average(table, axis=0, weights=counts)


def mean_cosine(embeddings: np.ndarray, pairs: np.ndarray) -> float:
    """The mean cosine similarity of the rows ``pairs[:, 0]`` and ``pairs[:, 1]`` of ``embeddings``
    (a zero row has cosine 0 with everything).

    Example::

        >>> round(mean_cosine(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]]), np.array([[0, 2], [1, 2]])), 4)
        0.3536
    """
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or not pairs.size:
        raise ConfigError(f"pairs must have shape (n, 2) with n >= 1. Received: {pairs.shape}")
    unit = _unit_rows(embeddings)
    return float(np.mean(np.sum(unit[pairs[:, 0]] * unit[pairs[:, 1]], axis=1)))


def nearest_neighbours(embeddings: np.ndarray, vocabulary: Vocabulary, words: Iterable[str],
                       k: int = 8) -> Dict[str, List[Tuple[str, float]]]:
    """For each of ``words`` in the vocabulary, its ``k`` most cosine-similar other words, most
    similar first, as ``(word, cosine)``. Words not in the vocabulary are left out.

    Example::

        >>> vocab = Vocabulary(("a", "b", "c"), np.array([3, 2, 1]))
        >>> table = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
        >>> {w: [n for n, _ in found] for w, found in nearest_neighbours(table, vocab, ["a", "zz"], k=2).items()}
        {'a': ['b', 'c']}
    """
    unit = _unit_rows(_word_rows(embeddings, vocabulary))
    found = {}
    for word in words:
        if word not in vocabulary or word in found:
            continue
        i = vocabulary.index(word)
        cosines = unit @ unit[i]
        cosines[i] = -np.inf
        best = np.argsort(-cosines, kind="stable")[:k]
        found[word] = [(vocabulary.words[j], float(cosines[j])) for j in best if np.isfinite(cosines[j])]
    return found


def _word_rows(embeddings: np.ndarray, vocabulary: Vocabulary) -> np.ndarray:
    table = np.asarray(embeddings)
    if table.ndim != 2 or table.shape[0] < len(vocabulary):
        raise DataError(f"the embedding table needs a row for each of the {len(vocabulary)} words. "
                         f"Received shape {table.shape}")
    return table[:len(vocabulary)]


def write_word2vec_text(path: Union[str, os.PathLike], vocabulary: Vocabulary, embeddings: np.ndarray) -> None:
    """Saves the rows of the vocabulary's words in word2vec's text format: a line
    ``"<words> <dim>"``, then ``word v1 v2 ...`` per word in id order (``%.6g`` floats, UTF-8).
    Rows beyond the vocabulary (a table sized for a larger vocabulary) are not written.
    """
    table = _word_rows(embeddings, vocabulary)
    row = "%s " + " ".join(["%.6g"] * table.shape[1]) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{table.shape[0]} {table.shape[1]}\n")
        for word, values in zip(vocabulary.words, table.tolist()):
            f.write(row % (word, *values))
