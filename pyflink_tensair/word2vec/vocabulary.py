"""Words to ids: tokens, a vocabulary numbered by frequency rank, encoded corpora.

No pyflink and no TensorFlow import.

Example::

    >>> corpus = ["To be, or not to be:", "that is the question."]
    >>> vocab = Vocabulary.build(word for line in corpus for word in tokenize(line))
    >>> vocab.words[:2], [ids.tolist() for ids in encode_corpus(vocab, corpus)]
    (('be', 'to'), [[1, 0, 4, 3, 1, 0], [6, 2, 7, 5]])
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Sequence, Tuple, Union

import numpy as np

from ..errors import ConfigError, DataError

WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")
"""A word: ASCII letters, with inner apostrophes kept ("o'er", "king's"); others split words."""

Encoded = Union[np.ndarray, Sequence[np.ndarray]]
"""An encoded corpus: one 1-D array of word ids (one sentence), or one array per line."""


def tokenize(text: str) -> List[str]:
    """The lowercase words of ``text`` (see :data:`WORD`); digits, punctuation and non-ASCII
    letters separate words and are dropped.

    Example::

        >>> tokenize("O'er the Hills -- 'tis KING's 2nd day!")
        ["o'er", 'the', 'hills', 'tis', "king's", 'nd', 'day']
    """
    return WORD.findall(text.lower())


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """Words numbered by frequency rank: ``words[0]`` is the most frequent; ``counts`` (int64)
    holds how often each occurred in the corpus the vocabulary was built from.

    Example::

        >>> vocab = Vocabulary.build("b a b c b a".split(), max_size=2)
        >>> vocab.words, vocab.counts.tolist(), "c" in vocab, vocab.encode("a c b".split()).tolist()
        (('b', 'a'), [3, 2], False, [1, 0])
    """

    words: Tuple[str, ...]
    counts: np.ndarray
    _ids: Dict[str, int] = field(init=False, repr=False)

    def __post_init__(self):
        counts = np.asarray(self.counts, dtype=np.int64)
        if counts.shape != (len(self.words),):
            raise DataError(f"Vocabulary needs one count per word. Received: {len(self.words)} words, "
                             f"counts of shape {counts.shape}")
        ids = {w: i for i, w in enumerate(self.words)}
        if len(ids) != len(self.words):
            raise DataError("Vocabulary words must be distinct")
        object.__setattr__(self, "words", tuple(self.words))
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "_ids", ids)

    @classmethod
    def build(cls, tokens: Iterable[str], max_size: int = 50_000, min_count: int = 1) -> "Vocabulary":
        """The ``max_size`` most frequent of ``tokens`` that occur at least ``min_count`` times;
        equal counts are ordered alphabetically, so the result depends on the counts only."""
        if isinstance(tokens, str):
            raise TypeError("Vocabulary.build takes an iterable of words, not a string: use tokenize(text)")
        if max_size < 1 or min_count < 1:
            raise ConfigError(f"max_size and min_count must be at least 1. Received: max_size={max_size}, "
                             f"min_count={min_count}")
        counted = collections.Counter(tokens)
        ranked = sorted((item for item in counted.items() if item[1] >= min_count), key=lambda wc: (-wc[1], wc[0]))
        ranked = ranked[:max_size]
        return cls(tuple(w for w, _ in ranked), np.array([c for _, c in ranked], dtype=np.int64))

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word) -> bool:
        return word in self._ids

    def index(self, word: str) -> int:
        try:
            return self._ids[word]
        except KeyError:
            raise KeyError(f"{word!r} is not in the vocabulary ({len(self)} words)") from None

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """The ids (int32) of ``tokens``, in order; words not in the vocabulary are dropped."""
        ids = self._ids
        return np.fromiter((ids[t] for t in tokens if t in ids), dtype=np.int32)


def encode_line(vocabulary: Vocabulary, line: str) -> np.ndarray:
    """``vocabulary.encode(tokenize(line))``."""
    return vocabulary.encode(tokenize(line))


def encode_corpus(vocabulary: Vocabulary, lines: Iterable[str]) -> List[np.ndarray]:
    """One id array per line that keeps at least one word (lines left empty are dropped)."""
    encoded = (encode_line(vocabulary, line) for line in lines)
    return [ids for ids in encoded if ids.size]


def flatten(lines: Encoded) -> Tuple[np.ndarray, np.ndarray]:
    """Concatenated ids (int32) and, per id, its line number (int64)."""
    if isinstance(lines, np.ndarray) and lines.ndim == 1:
        lines = [lines]
    arrays = [np.asarray(line) for line in lines]
    if any(a.ndim != 1 for a in arrays):
        raise DataError("an encoded corpus is one 1-D array of word ids, or one 1-D array per line")
    if not arrays:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    ids = np.concatenate(arrays).astype(np.int32)
    return ids, np.repeat(np.arange(len(arrays)), [a.size for a in arrays])
