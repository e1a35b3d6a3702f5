"""Two candidates of issue 27, timed in one process with no Flink (the model's own cost only).

``peer-applies``: three peers' gradient messages applied one by one (what a replica of four does
per step today) against summed first and applied once (coalesced): the sum's cost, the one
apply's, and, for sparse tables, the sum of rows without merging duplicates (TensorFlow's
scatter adds duplicate rows itself).

``row-order``: a peer's sparse message applied with its rows in ascending order (as replicas
send them) against the same rows in ``tf.unique``'s order of first lookup (as they were sent
before), through the replica's apply and as the bare scatter into one table.

``alone``: one model's step, in a plain loop over the same batches: Keras's ``train_on_batch``
against the replica's fused step (``train_step(return_gradients=False)``, a replica without peers),
the same step as a replica with peers takes it (an embedding table's rows gathered into unique
rows, left in TensorFlow), and a plain tape-and-apply with and without the finiteness guard over
every gradient value, with one over the loss only, or over the sum of every gradient's values.

Each figure is batches/s (or ms) over ``--batches`` batches; the variants take turns within every
repeat, and the median and [min, max] over ``--repeats`` are printed::

    python -m benchmarks.investigations.replica_step peer-applies --workload sparse --repeats 5
    python -m benchmarks.investigations.replica_step alone --workload sparse --batches 20 --repeats 5
    python -m benchmarks.investigations.replica_step row-order --workload sparse --repeats 9

One-offs (issue 27): their answers are in docs/measurements.md, "One replica's step and coalesced
peer applies" and "Rows sent in ascending order".
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, List


def _summary(samples: List[float]) -> str:
    return f"{statistics.median(samples):.1f} [{min(samples):.1f}, {max(samples):.1f}]"


def _take_turns(variants: Dict[str, Callable[[], float]], repeats: int, alternate: bool = False) -> Dict[str, List[float]]:
    """Every variant once a repeat, in the given order (``alternate``: reversed every other repeat,
    so that none always runs right after the same one)."""
    for run in variants.values():
        run()  # compile
    samples: Dict[str, List[float]] = {name: [] for name in variants}
    for repeat in range(repeats):
        names = list(variants)[::-1] if alternate and repeat % 2 else list(variants)
        for name in names:
            samples[name].append(variants[name]())
    return samples


def _model(workload):
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    return KerasModelAdapter(load_model(workload.model, seed=0))


def peer_applies(workload, repeats: int) -> Dict[str, List[float]]:
    import numpy as np

    from pyflink_tensair.core.gradients import sum_gradients
    from pyflink_tensair.core.messages import SparseGradient

    model = _model(workload)
    messages = [model.compute_gradients(workload.make_batch(i)).gradients for i in range(3)]

    def concatenated():
        out = {}
        for name in messages[0]:
            parts = [m[name] for m in messages]
            out[name] = (SparseGradient(np.concatenate([p.indices for p in parts]), np.concatenate([p.values for p in parts]),
                                        parts[0].dense_shape) if isinstance(parts[0], SparseGradient) else sum(parts[1:], parts[0].copy()))
        return out

    def timed(work):
        def run():
            began = time.perf_counter()
            work()
            return (time.perf_counter() - began) * 1000
        return run

    return _take_turns({
        "3 applies, one by one (ms)": timed(lambda: [model.apply_gradients(m) for m in messages]),
        "sum (merged rows) (ms)": timed(lambda: sum_gradients(messages)),
        "sum (merged rows) + 1 apply (ms)": timed(lambda: model.apply_gradients(sum_gradients(messages))),
        "sum (rows concatenated) + 1 apply (ms)": timed(lambda: model.apply_gradients(concatenated())),
    }, repeats)


def row_order(workload, repeats: int) -> Dict[str, List[float]]:
    """A peer's message applied with its rows in ascending order (as replicas send them since
    2026-12-07) against the same batches' messages in ``tf.unique``'s order of first lookup (as
    they were sent before: the step traced with ``tf.unique`` in place of the ascending one),
    through the replica's apply and as the bare scatter into the table with the most rows in a
    message; ms per message, three messages a repeat, the variants' order reversed every other
    repeat."""
    import numpy as np
    import tensorflow as tf

    from pyflink_tensair.core.messages import SparseGradient
    from pyflink_tensair.models import keras_adapter

    batches = [workload.make_batch(i) for i in range(3)]
    model = _model(workload)
    ascending = [model.compute_gradients(b).gradients for b in batches]
    sparse = [name for name, grad in ascending[0].items() if isinstance(grad, SparseGradient)]
    if not sparse:
        raise SystemExit("row-order needs a workload whose messages carry sparse rows (sparse)")
    ascending_unique, keras_adapter._ascending_unique = keras_adapter._ascending_unique, tf.unique
    try:  # a second model, traced while the step took tf.unique's order
        first_lookup = [_model(workload).compute_gradients(b).gradients for b in batches]
    finally:
        keras_adapter._ascending_unique = ascending_unique
    for new, old in zip(ascending, first_lookup):
        for name in sparse:
            order = np.argsort(old[name].indices)
            if not (np.array_equal(old[name].indices[order], new[name].indices)
                    and np.array_equal(old[name].values[order], new[name].values)):
                raise SystemExit(f"table {name}: the two orders do not hold the same rows")
    largest = max(sparse, key=lambda n: len(ascending[0][n].indices))
    variable = model._variables[model.names.index(largest)].value  # the tf.Variable inside Keras's

    def scatter(messages):
        slices = [tf.IndexedSlices(tf.constant(m[largest].values), tf.constant(m[largest].indices)) for m in messages]
        return lambda: [variable.scatter_sub(s) for s in slices]

    def per_message(work):
        def run():
            began = time.perf_counter()
            work()
            return (time.perf_counter() - began) * 1000 / 3
        return run

    return _take_turns({
        "apply, rows ascending (ms a message)": per_message(lambda: [model.apply_gradients(m) for m in ascending]),
        "apply, rows in first-lookup order (ms a message)": per_message(lambda: [model.apply_gradients(m) for m in first_lookup]),
        f"scatter into table {largest}, ascending (ms)": per_message(scatter(ascending)),
        f"scatter into table {largest}, first-lookup order (ms)": per_message(scatter(first_lookup)),
    }, repeats, alternate=True)


def alone(workload, batches: int, repeats: int) -> Dict[str, List[float]]:
    import tensorflow as tf

    from pyflink_tensair.models.keras_adapter import _all_finite

    data = [workload.make_batch(i) for i in range(batches)]

    def rate(step, pairs: bool = True):
        inputs = [(dict(b.x) if isinstance(b.x, dict) else b.x, b.y) for b in data] if pairs else [(b,) for b in data]

        def run():
            began = time.perf_counter()
            for args in inputs:
                step(*args)
            return len(inputs) / (time.perf_counter() - began)
        return run

    def plain(guard: str):
        adapter = _model(workload)
        model, variables = adapter.model, adapter._variables

        def step(x, y):
            with tf.GradientTape() as tape:
                y_pred = model(x, training=True)
                loss = model.compute_loss(x=x, y=y, y_pred=y_pred, training=True)
            grads = tape.gradient(loss, variables)
            if guard == "none":
                model.optimizer.apply_gradients(zip(grads, variables))
                return loss, y_pred
            finite = tf.math.is_finite(loss)
            values = [g.values if isinstance(g, tf.IndexedSlices) else g for g in grads]
            if guard == "gradients":
                finite = tf.logical_and(finite, _all_finite(values))
            elif guard == "sums":  # a sum is finite when every term is (or overflows: a false alarm)
                finite = tf.logical_and(finite, tf.math.is_finite(tf.add_n([tf.reduce_sum(v) for v in values])))

            def apply():
                model.optimizer.apply_gradients(zip(grads, variables))
                return tf.constant(True)

            tf.cond(finite, apply, lambda: tf.constant(False))
            return loss, y_pred

        compiled = tf.function(step, reduce_retracing=True)

        def call(x, y):
            loss, y_pred = compiled(x, y)
            return float(loss), y_pred.numpy()  # what the replica takes out of every step
        return call

    keras_model = _model(workload).model
    ours = _model(workload)
    return _take_turns({
        "keras train_on_batch": rate(lambda x, y: keras_model.train_on_batch(x, y)),
        "replica's fused step": rate(lambda batch: ours.train_step(batch, return_gradients=False), pairs=False),
        # the step a replica with peers takes, its rows gathered, without taking them out of TensorFlow
        "fused step with message rows": rate(lambda x, y: [float(r) if i == 0 else r.numpy() for i, r in
                                                          enumerate(ours._train_fn(x, y)[:2])]),
        "tape + apply": rate(plain("none")),
        "tape + apply, guard on every gradient": rate(plain("gradients")),
        "tape + apply, guard on the loss": rate(plain("loss")),
        "tape + apply, guard on gradient sums": rate(plain("sums")),
    }, repeats)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question", choices=["peer-applies", "alone", "row-order"])
    parser.add_argument("--workload", choices=["dense", "sparse"], default="sparse")
    parser.add_argument("--batches", type=int, default=20, help="alone: batches per timed loop")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    from benchmarks.throughput import workloads
    from pyflink_tensair.models.keras_adapter import configure_tensorflow_threads

    configure_tensorflow_threads(1, None)  # as the benchmark's replicas and baselines run
    workload = workloads.get(args.workload)
    samples = (peer_applies(workload, args.repeats) if args.question == "peer-applies"
               else row_order(workload, args.repeats) if args.question == "row-order"
               else alone(workload, args.batches, args.repeats))
    unit = " batches/s" if args.question == "alone" else ""
    print(f"{args.question}, {args.workload}: median [min, max] of {args.repeats}")
    for name, values in samples.items():
        print(f"  {name:50s} {_summary(values)}{unit}")


if __name__ == "__main__":
    main()
