"""Held-out accuracy of DASGD replicas on digits against their peers' staleness and the remedies for it, in simulate().

The image job's defaults (batch 16, Adam at 5e-3, the digits CNN) replayed ``--passes`` times;
``delivery_delay`` D delivers each gradient message D batches after it was sent (a slower loop),
for each staleness bound and each way of applying peer gradients (``--remedies``, each a
:class:`~pyflink_tensair.config.PeerUpdates`: ``plain`` (TensAIR's rule), ``scale=F``,
``inverse`` (damped by 1 / (1 + staleness)), ``sgd=LR`` (a plain step for peers), joined with
``+``). Prints, per seed, the held-out accuracy of each replica's final model and of their
averaged weights, the largest weight difference and the largest staleness seen; synchronous SGD
(bound 0) and one replica on the same batches are the references:

    python -m benchmarks.staleness_accuracy                                # seeds 1, 2; D = 0, 4, 16, 48; bounds sync, none, 4
    python -m benchmarks.staleness_accuracy --seeds 1 --delays 16 --bounds none,2,4 --remedies plain,scale=0.5
    python -m benchmarks.staleness_accuracy --replicas 4 --json runs/staleness.jsonl
"""

from __future__ import annotations

import argparse
import functools
import json
from typing import List, Optional


def _bound(text: str) -> Optional[int]:
    return None if text == "none" else int(text)


def peer_updates(spec: str):
    """A ``--remedies`` item as a PeerUpdates: ``plain``, or ``scale=F``, ``inverse``, ``sgd=LR`` joined by ``+``.

    Example::

        >>> peer_updates("scale=0.5+inverse")
        PeerUpdates(scale=0.5, damping='inverse', rule='optimizer', sgd_learning_rate=None)
    """
    from pyflink_tensair.config import PeerUpdates

    fields = {}
    for part in spec.split("+"):
        key, _, value = part.partition("=")
        if key == "plain" and not value:
            continue
        if key == "scale" and value:
            fields["scale"] = float(value)
        elif key == "inverse" and not value:
            fields["damping"] = "inverse"
        elif key == "sgd" and value:
            fields.update(rule="sgd", sgd_learning_rate=float(value))
        else:
            raise ValueError(f"a remedy is plain, scale=F, inverse or sgd=LR, joined by '+'. Received: {spec!r}")
    return PeerUpdates(**fields)


def holdout_accuracy(model_fn, weights, holdout) -> float:
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    model = KerasModelAdapter(load_model(model_fn, seed=0))
    model.set_weights(weights)
    return sum(model.evaluate(b).accuracy * b.size for b in holdout) / sum(b.size for b in holdout)


def run(seeds: List[int], delays: List[int], bounds: List[Optional[int]], passes: int, remedies=("plain",),
        replicas: int = 2, log=print) -> List[dict]:
    from pyflink_tensair.config import TrainConfig
    from pyflink_tensair.core.gradients import average_weights
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
        runs = [(1, None, 0, "plain")]  # one replica: the reference the replicas should match
        for bound in bounds:
            for delay in (delays if bound != 0 else [0]):  # synchronous replicas wait: the delay changes nothing
                runs += [(replicas, bound, delay, remedy) for remedy in (remedies if bound != 0 else ["plain"])]
        for n, bound, delay, remedy in runs:
            config = TrainConfig(replicas=n, staleness_bound=bound, peer_updates=peer_updates(remedy))
            result = simulate(lambda r: KerasModelAdapter(load_model(model_fn, seed=seed)), batches, config,
                              delivery_delay=delay)
            weights = [result.final_models[r].weights for r in range(n)]
            row = {"seed": seed, "replicas": n, "staleness_bound": bound, "delivery_delay": delay, "remedy": remedy,
                   "replica_accuracy": [round(holdout_accuracy(model_fn, w, holdout), 4) for w in weights],
                   "averaged_accuracy": round(holdout_accuracy(model_fn, average_weights(weights), holdout), 4),
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
    parser.add_argument("--remedies", default="plain", help="ways to apply peer gradients, comma-separated: plain, "
                                                           "scale=F, inverse, sgd=LR, or several joined by '+'")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON lines")
    args = parser.parse_args(argv)
    remedies = args.remedies.split(",")
    for remedy in remedies:
        peer_updates(remedy)  # a typo fails before the first run
    rows = run([int(s) for s in args.seeds.split(",")], [int(d) for d in args.delays.split(",")],
               [_bound(b) for b in args.bounds.split(",")], args.passes, remedies, args.replicas)
    if args.json:
        with open(args.json, "w") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows)
    return rows


if __name__ == "__main__":
    main()
