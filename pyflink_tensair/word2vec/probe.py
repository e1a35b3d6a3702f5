"""What replica 0 reports about a word2vec model while it trains: nearest neighbours of probe words.

No pyflink import; the probe runs on the Keras model inside the replica.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from .evaluation import nearest_neighbours
from .vocabulary import Vocabulary


def neighbours_probe(model, *, vocabulary: Vocabulary, words: Sequence[str], k: int = 5,
                     layer: str = "target_embedding") -> Dict[str, List[Tuple[str, float]]]:
    """The nearest neighbours of ``words`` in a Keras model's embedding ``layer``: a probe for
    :func:`pyflink_tensair.flink.training.train` (``probe=functools.partial(neighbours_probe, ...)``)."""
    table = model.get_layer(layer).get_weights()[0]
    return {w: [(n, round(c, 3)) for n, c in found] for w, found in nearest_neighbours(table, vocabulary, words, k).items()}
