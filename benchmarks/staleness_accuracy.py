"""Held-out accuracy of 2 replicas on digits against the staleness of their peers' gradients, in simulate().

The image job's defaults (batch 16, Adam at 5e-3, the digits CNN) replayed ``--passes`` times;
``delivery_delay`` D delivers each gradient message D batches after it was sent (a slower loop),
for each staleness bound. Prints, per seed, the held-out accuracy of each replica's final model and
of their averaged weights, the largest weight difference and the largest staleness seen:

    python -m benchmarks.staleness_accuracy                                # seeds 1, 2; D = 0, 4, 16, 48; bounds sync, none, 4
    python -m benchmarks.staleness_accuracy --seeds 1 --delays 16 --bounds none,2,4
"""

from __future__ import annotations

import argparse
import functools
import json
from typing import List, Optional


def _bound(text: str) -> Optional[int]:
    return None if text == "none" else int(text)


def holdout_accuracy(model_fn, weights, holdout) -> float:
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    model = KerasModelAdapter(load_model(model_fn, seed=0))
    model.set_weights(weights)
    return sum(model.evaluate(b).accuracy * b.size for b in holdout) / sum(b.size for b in holdout)


def run(seeds: List[int], delays: List[int], bounds: List[Optional[int]], passes: int, log=print) -> List[dict]:
    from pyflink_tensair.config import TrainConfig
    from pyflink_tensair.core.simulation import simulate
    from pyflink_tensair.datasets.images import ImageStream
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, configure_tensorflow_threads, load_model

    configure_tensorflow_threads(1)
    model_fn = functools.partial(zoo.digits_cnn, learning_rate=5e-3)
    rows = []
    for seed in seeds:
        stream = ImageStream("digits", batch_size=16, seed=seed)
        holdout, batches = stream.holdout(), [stream(i) for i in range(stream.batches_per_pass * passes)]
        for bound in bounds:
            for delay in (delays if bound != 0 else [0]):  # synchronous replicas wait: the delay changes nothing
                result = simulate(lambda r: KerasModelAdapter(load_model(model_fn, seed=seed)), batches,
                                  TrainConfig(replicas=2, staleness_bound=bound), delivery_delay=delay)
                weights = [result.final_models[r].weights for r in (0, 1)]
                averaged = {k: (weights[0][k] + weights[1][k]) / 2 for k in weights[0]}
                row = {"seed": seed, "staleness_bound": bound, "delivery_delay": delay,
                       "replica_accuracy": [round(holdout_accuracy(model_fn, w, holdout), 4) for w in weights],
                       "averaged_accuracy": round(holdout_accuracy(model_fn, averaged, holdout), 4),
                       "max_weight_diff": round(result.replica_max_weight_diff(), 4),
                       "max_staleness": max(m.staleness for m in result.metrics if m.phase == "batch")}
                rows.append(row)
                log(json.dumps(row))
    return rows


def main(argv=None) -> List[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.staleness_accuracy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--delays", default="0,4,16,48", help="delivery delays in batches")
    parser.add_argument("--bounds", default="0,none,4", help="staleness bounds: ints, or none (unbounded DASGD)")
    parser.add_argument("--passes", type=int, default=4)
    args = parser.parse_args(argv)
    return run([int(s) for s in args.seeds.split(",")], [int(d) for d in args.delays.split(",")],
               [_bound(b) for b in args.bounds.split(",")], args.passes)


if __name__ == "__main__":
    main()
