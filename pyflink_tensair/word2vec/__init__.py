"""Word2vec, the sparse use case: vocabulary, skip-gram batches, embedding quality, a probe.

No pyflink and no TensorFlow import. The pieces, in the order a job uses them (the corpus itself
comes from :mod:`pyflink_tensair.datasets.corpus`):

- :mod:`.vocabulary`: :func:`tokenize`, :class:`Vocabulary` (words by frequency rank),
  :func:`encode_corpus`;
- :mod:`.skipgram`: :class:`SkipGramBatches` for :func:`pyflink_tensair.models.zoo.word2vec`;
- :mod:`.stream`: :class:`CorpusBatches`, batch ``n`` of a corpus, for a Flink source;
- :mod:`.lines`: :class:`LineChunkBatches`, the batches of a chunk of streamed lines (Kafka);
- :mod:`.evaluation`: pairs of words, cosines, neighbours, the word2vec text format;
- :mod:`.probe`: :func:`neighbours_probe`, what replica 0 reports while it trains.

Example::

    >>> from pyflink_tensair.word2vec import Vocabulary, tokenize
    >>> Vocabulary.build(tokenize("the cat and the hat")).words[0]
    'the'
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# Loaded on first use: importing a package must not import its submodules (see pyflink_tensair._lazy).
_NAMES = {
    "Vocabulary": ".vocabulary", "encode_corpus": ".vocabulary", "encode_line": ".vocabulary",
    "tokenize": ".vocabulary",
    "SkipGramBatches": ".skipgram", "CorpusBatches": ".stream", "LineChunkBatches": ".lines",
    "neighbours_probe": ".probe",
    "centered": ".evaluation", "cooccurring_pairs": ".evaluation", "mean_cosine": ".evaluation",
    "nearest_neighbours": ".evaluation", "random_pairs": ".evaluation", "shuffled_pairs": ".evaluation",
    "write_word2vec_text": ".evaluation",
}
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from .evaluation import (centered, cooccurring_pairs, mean_cosine, nearest_neighbours, random_pairs,
                             shuffled_pairs, write_word2vec_text)
    from .lines import LineChunkBatches
    from .probe import neighbours_probe
    from .skipgram import SkipGramBatches
    from .stream import CorpusBatches
    from .vocabulary import Vocabulary, encode_corpus, encode_line, tokenize

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
