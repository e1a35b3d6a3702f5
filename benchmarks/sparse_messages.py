"""Bytes per gradient message of a sparse embedding model, against what the dense gradient weighs.

Encodes real gradient messages (the wire format, header included) of a bag-of-embeddings model
for several batch sizes, and prints them beside the dense size TensAIR's messages would have:

    python -m benchmarks.sparse_messages --vocabulary 50000 --dim 300
"""

from __future__ import annotations

import argparse
import functools
import json

import numpy as np


def main(argv=None):
    from pyflink_tensair.core import Batch, wire
    from pyflink_tensair.core.gradients import dense_nbytes
    from pyflink_tensair.core.messages import GradientMessage, SparseGradient
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocabulary", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--length", type=int, default=8, help="tokens per example")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128, 512, 2048])
    args = parser.parse_args(argv)
    adapter = KerasModelAdapter(load_model(functools.partial(
        zoo.embedding_classifier, vocabulary=args.vocabulary, dim=args.dim, length=args.length), seed=0))
    rng = np.random.default_rng(0)
    rows = []
    for size in args.batch_sizes:
        # Zipf-distributed tokens, as in text: frequent words repeat within a batch
        tokens = np.minimum(rng.zipf(1.3, size=(size, args.length)), args.vocabulary) - 1
        grads = adapter.compute_gradients(Batch(tokens.astype(np.int32), rng.integers(0, 2, size))).gradients
        message = wire.encode_message(GradientMessage(0, 1, 1, grads))
        touched = sum(len(g.indices) for g in grads.values() if isinstance(g, SparseGradient))
        rows.append({"batch_size": size, "touched_rows": touched, "message_bytes": len(message),
                     "dense_bytes": dense_nbytes(grads), "dense_over_message": round(dense_nbytes(grads) / len(message), 1)})
    print(json.dumps({"vocabulary": args.vocabulary, "dim": args.dim, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    main()
