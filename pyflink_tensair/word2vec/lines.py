"""Skip-gram batches from a stream of text lines (e.g. a Kafka topic), a chunk of lines at a time.

No pyflink and no TensorFlow import. The word2vec job reads a topic of lines with
``--source kafka``: the JVM groups them into chunks (:func:`pyflink_tensair.flink.batching.chunked_batches`)
and :class:`LineChunkBatches` turns each chunk into skip-gram batches with the vocabulary of the
job's ``--corpus``. Within a chunk the pairs are made, subsampled and shuffled as a pass over a
corpus makes them (:class:`~.skipgram.SkipGramBatches`, seeded by the chunk's number, so a
restored job makes the same batches); no pair crosses a chunk. Every batch has ``batch_size``
pairs: the chunk's last batch is topped up with pairs of the same chunk drawn at random, so every
pair is trained at least once and the model sees one batch shape. A line that is not valid UTF-8
(the string deserializer marks such bytes with U+FFFD) becomes a dead letter; a line without a
word of the vocabulary makes no pairs.

Example::

    >>> import os, tempfile
    >>> from pyflink_tensair.word2vec import CorpusBatches
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "a.txt"), "w") as f:
    ...     _ = f.write("the cat sat on the mat\\nthe dog sat on the log\\n" * 20)
    >>> make = LineChunkBatches(CorpusBatches(folder, vocab_size=100, batch_size=16, subsample=0))
    >>> made = list(make(["3", "40", "the cat sat on the mat", "the dog sat", "bad \\ufffd line"]))
    >>> decode(made[0]).reason, decode(made[0]).position, [decode(b).id for b in made[1:]]
    ('bad_utf8', 42, [196608, 196609])
    >>> decode(made[1]).x["context"].shape    # 30 pairs: two batches of 16, the second topped up
    (16, 5)
"""

from __future__ import annotations

import math
from typing import Generator, List, Sequence

import numpy as np

from ..core import wire
from ..core.messages import Batch, DeadLetter, preview
from ..errors import DataError
from .skipgram import SkipGramBatches
from .stream import CorpusBatches
from .vocabulary import encode_corpus

#: Batch ids of chunk ``n`` are ``n * CHUNK_IDS + j``: distinct, and in stream order.
CHUNK_IDS = 1 << 16
REPLACEMENT = "\ufffd"


def decode(data: bytes):
    """A batch or dead letter that :class:`LineChunkBatches` made (for tests and examples)."""
    return wire.decode_dead_letter(data) if wire.peek_kind(data) == wire.KIND_DEAD_LETTER else wire.decode_batch(data)


class LineChunkBatches:
    """Chunk ``[n, lines before it, line, ...]`` -> the encoded skip-gram batches of its lines
    (and a dead letter per line that is not UTF-8). ``corpus`` gives the vocabulary, its word
    counts (for subsampling and negatives) and the skip-gram settings (window, negatives, batch
    size, subsample, seed); on a Flink worker it rebuilds the vocabulary from the same files (see
    :class:`~.stream.CorpusBatches`). ``pacer``: an optional :class:`~pyflink_tensair.flink.pacing.Pacer`."""

    def __init__(self, corpus: CorpusBatches, pacer=None):
        self.corpus = corpus
        self.pacer = pacer
        self._made = 0

    def __call__(self, chunk):
        number, before, lines = int(chunk[0]), int(chunk[1]), list(chunk[2:])
        good = yield from good_lines(before, lines)
        encoded = encode_corpus(self.corpus.vocabulary, good)
        for batch in chunk_batches(number, encoded, self.corpus.vocabulary.counts, self.corpus.settings):
            if self.pacer is not None:
                batch = Batch(batch.x, batch.y, {**batch.meta, **self.pacer.meta(batch.id, position=self._made)})
            self._made += 1
            yield wire.encode_batch(batch)


def good_lines(before: int, lines: Sequence[str]) -> Generator[bytes, None, List[str]]:
    """Yields an encoded dead letter for each line that is not UTF-8 (line ``i`` is at stream
    position ``before + i``); returns the other lines."""
    good = []
    for i, line in enumerate(lines):
        if REPLACEMENT in line:
            yield wire.encode_dead_letter(DeadLetter(
                "bad_utf8", "the record is not valid UTF-8 (the string deserializer replaced bytes with U+FFFD)",
                "line", "kafka", before + i, preview(line)))
        else:
            good.append(line)
    return good


def chunk_batches(number: int, encoded: List[np.ndarray], counts: np.ndarray, settings: dict) -> List[Batch]:
    """The skip-gram batches of chunk ``number``'s encoded lines (word ids; ``counts`` per id for
    subsampling and negatives; ``settings``: window, negatives, batch_size, subsample, seed),
    numbered ``number * CHUNK_IDS + j``; the last one topped up with pairs of the same chunk."""
    if not encoded:
        return []
    settings = dict(settings)
    size = settings["batch_size"]
    settings["seed"] = settings["seed"] * (1 << 32) + number
    skipgrams = SkipGramBatches(encoded, counts, **settings)
    targets, contexts = skipgrams.pairs(0)
    if targets.size == 0:
        return []
    count = math.ceil(targets.size / size)
    if count > CHUNK_IDS:
        raise DataError(f"chunk {number} makes {count} batches of {size} pairs, more than {CHUNK_IDS}: "
                        "use fewer lines per chunk")
    extra = count * size - targets.size
    if extra:
        rng = np.random.default_rng([settings["seed"], 3])
        top_up = rng.choice(targets.size, size=extra, replace=extra > targets.size)
        targets, contexts = np.concatenate([targets, targets[top_up]]), np.concatenate([contexts, contexts[top_up]])
    return [skipgrams.batch_of(targets[j * size:(j + 1) * size], contexts[j * size:(j + 1) * size], number * CHUNK_IDS + j)
            for j in range(count)]
