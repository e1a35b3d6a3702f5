"""Bytes per gradient message of a sparse embedding model, against what the dense gradient weighs.

Encodes real gradient messages (the wire format, header included) of a bag-of-embeddings model
for several batch sizes, and prints them beside the dense size TensAIR's messages would have:

    python -m benchmarks.investigations.sparse_messages --vocabulary 50000 --dim 300
    python -m benchmarks.investigations.sparse_messages --values-effect 150   # float16 rows against float32

``--values-effect N``: 2 synchronous replicas simulated in-process (through the wire format) on the
first N batches of the benchmark's sparse workload (word2vec, two 50,000 x 300 tables), once with
float32 rows in the messages and once with ``TrainConfig(sparse_values="float16")``: bytes per
message, the final prequential loss (last tenth of the batches) and the weights' difference.

A one-off (issues 2 and 10): its answers are in docs/measurements.md, "Sparse gradient messages"
and the float16 rows' "Effect on learning".
"""

from __future__ import annotations

import argparse
import functools
import json

import numpy as np


def values_effect(batches: int) -> dict:
    """See the module docstring."""
    from benchmarks.throughput import workloads
    from pyflink_tensair import TrainConfig
    from pyflink_tensair.core.simulation import simulate
    from pyflink_tensair.core.summary import tail_mean
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model
    from pyflink_tensair.testing import max_weight_diff

    workload = workloads.get("sparse")
    stream = [workload.make_batch(i) for i in range(batches)]
    out, weights = {}, {}
    for values in ("float32", "float16"):
        config = TrainConfig(replicas=2, staleness_bound=0, sparse_values=values)
        result = simulate(lambda r: KerasModelAdapter(load_model(workload.model, seed=0), sparse_values=values), stream, config)
        losses = [p.loss for p in sorted(result.predictions, key=lambda p: p.batch_id)]
        out[values] = {"bytes_per_message": round(result.message_bytes / max(1, result.messages)),
                       "final_loss": round(tail_mean(losses), 5), "first_loss": round(losses[0], 5),
                       "replica_max_weight_diff": result.replica_max_weight_diff()}
        weights[values] = result.replicas[0].model.get_weights()
    out["float16_over_float32"] = {"bytes": round(out["float16"]["bytes_per_message"] / out["float32"]["bytes_per_message"], 3),
                                   "final_loss": round(out["float16"]["final_loss"] / out["float32"]["final_loss"], 5),
                                   "max_weight_diff": max_weight_diff([weights["float32"], weights["float16"]])}
    return {"batches": batches, **out}


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
    parser.add_argument("--values-effect", type=int, metavar="N", help="float16 against float32 rows over N batches")
    args = parser.parse_args(argv)
    if args.values_effect:
        result = values_effect(args.values_effect)
        print(json.dumps(result, indent=2))
        return result
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
