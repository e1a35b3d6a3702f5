"""A corpus as a Flink source's stream: batch ``n`` of the skip-gram passes over a text corpus.

No pyflink and no TensorFlow import.
"""

from __future__ import annotations

import hashlib
import os
from typing import Optional, Union

import numpy as np

from ..core.messages import Batch
from ..datasets.corpus import read_corpus
from ..errors import ConfigError, DataError
from .skipgram import SkipGramBatches
from .vocabulary import Vocabulary, encode_corpus, tokenize


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
            raise ConfigError(f"passes must be >= 1. Received: passes={passes}")
        self.corpus = os.fspath(corpus)
        self.settings = dict(window=window, negatives=negatives, batch_size=batch_size, subsample=subsample, seed=seed)
        self.vocab_size = vocab_size
        self.passes = passes
        self._fingerprint: Optional[str] = None
        self._load()

    def _load(self) -> None:
        self.bad_lines = []  # lines that are not UTF-8: set aside (DeadLetters), not trained on
        lines = list(read_corpus(self.corpus, self.bad_lines))
        vocabulary = Vocabulary.build((w for line in lines for w in tokenize(line)), max_size=self.vocab_size)
        if len(vocabulary) < 2:
            raise DataError(f"the corpus {self.corpus!r} has {len(vocabulary)} distinct word(s); word2vec needs more")
        digest = hashlib.sha1("\n".join(vocabulary.words).encode("utf-8"))
        digest.update(np.ascontiguousarray(vocabulary.counts, np.int64).tobytes())
        fingerprint = f"{len(vocabulary)} words, {digest.hexdigest()[:12]}"
        if self._fingerprint is not None and fingerprint != self._fingerprint:
            raise DataError(f"the corpus {self.corpus!r} changed since the job was built (vocabulary "
                               f"{fingerprint} here, {self._fingerprint} in the client)")
        self._fingerprint = fingerprint
        self.vocabulary = vocabulary
        self.encoded = encode_corpus(vocabulary, lines)
        self.skipgrams = SkipGramBatches(self.encoded, vocabulary.counts, **self.settings)
        self.batches_per_pass = [self.skipgrams.batches_per_pass(p) for p in range(self.passes)]
        if not all(self.batches_per_pass):
            raise DataError(f"the corpus {self.corpus!r} is too small for one batch of "
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
                 if k not in ("vocabulary", "encoded", "skipgrams", "batches_per_pass", "_starts", "bad_lines")}
        state["_loaded"] = False
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __getattr__(self, name):
        # a copy that crossed a process boundary loads the corpus when first used
        if name in ("vocabulary", "encoded", "skipgrams", "batches_per_pass", "_starts", "bad_lines") and not self.__dict__.get("_loading"):
            self.__dict__["_loading"] = True
            try:
                self._load()
            finally:
                self.__dict__["_loading"] = False
            return self.__dict__[name]
        raise AttributeError(name)
