"""Held-out accuracy of DASGD replicas against their peers' staleness and the remedies for it, in simulate().

``--workload digits``: the image job's defaults (batch 16, Adam at 5e-3, the digits CNN) replayed
``--passes`` times; ``quickstart``: its job's 1,000 teacher batches of 64 (the final prequential
loss is its figure). ``delivery_delay`` D delivers each gradient message D batches after it was
sent (a slower loop), for each staleness bound and each way of applying peer gradients
(``--remedies``, each a :class:`~pyflink_tensair.config.PeerUpdates`: ``plain`` (TensAIR's rule),
``scale=F``, ``inverse`` (damped by 1 / (1 + staleness)), ``sgd=LR`` (a plain step for peers),
``average=K`` (periodic model averaging every K steps), joined with ``+``). Prints, per seed, the
held-out accuracy and loss of each replica's final model and of their averaged weights, the final
prequential loss, the largest weight difference and the largest staleness seen; synchronous SGD
(bound 0) and one replica on the same batches are the references:

    python -m benchmarks.staleness_accuracy                                # seeds 1, 2; D = 0, 4, 16, 48; bounds sync, none, 4
    python -m benchmarks.staleness_accuracy --seeds 1 --delays 16 --bounds none,2,4 --remedies plain,scale=0.5
    python -m benchmarks.staleness_accuracy --replicas 4 --json runs/staleness.jsonl
    python -m benchmarks.staleness_accuracy --workload quickstart --seeds 1,2 --delays 16 --bounds 0,4
"""

from __future__ import annotations

import argparse
import functools
import json
from typing import List, Optional, Tuple


def _bound(text: str) -> Optional[int]:
    return None if text == "none" else int(text)


def peer_updates(spec: str):
    """A ``--remedies`` item as a PeerUpdates: ``plain``, or ``scale=F``, ``inverse``, ``sgd=LR``, ``average=K``
    (periodic averaging every K steps) joined by ``+``. Only the named remedies apply: ``plain`` is
    TensAIR's rule, without the library's default averaging.

    Example::

        >>> peer_updates("scale=0.5+inverse")
        PeerUpdates(scale=0.5, damping='inverse', rule='optimizer', sgd_learning_rate=None, average_every=None)
    """
    from pyflink_tensair.config import PeerUpdates

    fields = {"average_every": None}
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
        elif key == "average" and value:
            fields["average_every"] = int(value)
        else:
            raise ValueError(f"a remedy is plain, scale=F, inverse, sgd=LR or average=K, joined by '+'. Received: {spec!r}")
    return PeerUpdates(**fields)


def holdout_scores(model_fn, weights, holdout) -> Tuple[float, float]:
    """Mean loss and accuracy of ``weights`` on the held-out batches, weighted by batch size."""
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    model = KerasModelAdapter(load_model(model_fn, seed=0))
    model.set_weights(weights)
    results = [(model.evaluate(b), b.size) for b in holdout]
    total = sum(size for _, size in results)
    return (sum(r.loss * size for r, size in results) / total, sum(r.accuracy * size for r, size in results) / total)


def workload(name: str, seed: int, passes: int):
    """``(model_fn, batches, holdout)`` of a use case: ``digits`` (the image job's defaults,
    replayed ``passes`` times) or ``quickstart`` (its job's defaults: 1,000 teacher batches of 64;
    ``passes`` is ignored)."""
    from pyflink_tensair.models import zoo

    if name == "digits":
        from pyflink_tensair.datasets.images import ImageStream

        stream = ImageStream("digits", batch_size=16, seed=seed)
        return (functools.partial(zoo.digits_cnn, learning_rate=5e-3),
                [stream(i) for i in range(stream.batches_per_pass * passes)], stream.holdout())
    if name == "quickstart":
        from pyflink_tensair.datasets.teacher import teacher_classification_batch

        make = functools.partial(teacher_classification_batch, features=20, classes=4, seed=seed)
        return (functools.partial(zoo.quickstart_classifier, features=20, classes=4),
                [make(i, batch_size=64) for i in range(1000)], [make(10 ** 9 + i, batch_size=256) for i in range(16)])
    raise ValueError(f"workload must be 'digits' or 'quickstart'. Received: {name!r}")


def run(seeds: List[int], delays: List[int], bounds: List[Optional[int]], passes: int, remedies=("plain",),
        replicas: int = 2, log=print, workload_name: str = "digits") -> List[dict]:
    from pyflink_tensair.config import TrainConfig
    from pyflink_tensair.core.gradients import average_weights
    from pyflink_tensair.core.simulation import simulate
    from pyflink_tensair.core.summary import tail_mean
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, configure_tensorflow_threads, load_model

    configure_tensorflow_threads(1)
    rows = []
    for seed in seeds:
        model_fn, batches, holdout = workload(workload_name, seed, passes)
        runs = [(1, None, 0, "plain")]  # one replica: the reference the replicas should match
        for bound in bounds:
            for delay in (delays if bound != 0 else [0]):  # synchronous replicas wait: the delay changes nothing
                runs += [(replicas, bound, delay, remedy) for remedy in (remedies if bound != 0 else ["plain"])]
        for n, bound, delay, remedy in runs:
            config = TrainConfig(replicas=n, staleness_bound=bound, peer_updates=peer_updates(remedy))
            result = simulate(lambda r: KerasModelAdapter(load_model(model_fn, seed=seed)), batches, config,
                              delivery_delay=delay)
            weights = [result.final_models[r].weights for r in range(n)]
            own = [holdout_scores(model_fn, w, holdout) for w in weights]
            averaged = holdout_scores(model_fn, average_weights(weights), holdout)
            trained = [m for m in result.metrics if m.phase == "batch"]
            row = {"workload": workload_name, "seed": seed, "replicas": n, "staleness_bound": bound,
                   "delivery_delay": delay, "remedy": remedy,
                   "replica_accuracy": [round(a, 4) for _, a in own], "averaged_accuracy": round(averaged[1], 4),
                   "replica_loss": [round(loss, 4) for loss, _ in own], "averaged_loss": round(averaged[0], 4),
                   "final_loss": round(tail_mean([m.loss for m in trained]), 4),
                   "max_weight_diff": round(result.replica_max_weight_diff(), 4),
                   "max_staleness": max(m.staleness for m in trained)}
            rows.append(row)
            log(json.dumps(row))
    return rows


def main(argv=None) -> List[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.staleness_accuracy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=["digits", "quickstart"], default="digits")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--delays", default="0,4,16,48", help="delivery delays in batches")
    parser.add_argument("--bounds", default="0,none,4", help="staleness bounds: ints, or none (unbounded DASGD)")
    parser.add_argument("--remedies", default="plain", help="ways to apply peer gradients, comma-separated: plain, "
                                                           "scale=F, inverse, sgd=LR, average=K, or several joined by '+'")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--passes", type=int, default=4, help="digits: passes over the data set")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON lines")
    args = parser.parse_args(argv)
    remedies = args.remedies.split(",")
    for remedy in remedies:
        peer_updates(remedy)  # a typo fails before the first run
    rows = run([int(s) for s in args.seeds.split(",")], [int(d) for d in args.delays.split(",")],
               [_bound(b) for b in args.bounds.split(",")], args.passes, remedies, args.replicas,
               workload_name=args.workload)
    if args.json:
        with open(args.json, "w") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows)
    return rows


if __name__ == "__main__":
    main()
