"""Overhead of Flink: one replica inside a Flink job against the same compiled train step in a plain loop.

Both sides decode the same encoded batches with the same codec, run the same compiled step
(``train_step``, as a replica without peers) with the same TensorFlow thread budget, and
are timed from the first to the last trained batch (start-up excluded). Printed as a ratio from
one run:

    python -m benchmarks.investigations.overhead --batches 600
    python -m benchmarks.investigations.overhead --model wide --batches 400 --json runs/overhead.json

A one-off (issue 2): its answer is in docs/measurements.md, "Overhead of Flink for one replica";
the throughput benchmark's ``limit`` (``python -m benchmarks run``) is the plain loop it compares with.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import tempfile
import time

from pyflink_tensair.config import PythonIn

MODELS = {
    # name: (features, classes, hidden, batch size)
    "quickstart": (20, 4, 32, 64),
    "wide": (784, 10, 512, 128),
}


def _maker_and_model(name: str):
    from pyflink_tensair.datasets import encoded_teacher_batch
    from pyflink_tensair.models import zoo

    features, classes, hidden, batch_size = MODELS[name]
    maker = functools.partial(encoded_teacher_batch, batch_size=batch_size, features=features,
                              classes=classes, seed=0)
    model = functools.partial(zoo.quickstart_classifier, features=features, classes=classes, hidden=hidden)
    return maker, model


def plain_loop(maker, model, batches: int, threads: int) -> float:
    """Trained batches per second of a plain Python loop (first to last batch, as in Flink)."""
    from pyflink_tensair.core import wire
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, configure_tensorflow_threads, load_model

    configure_tensorflow_threads(threads)
    adapter = KerasModelAdapter(load_model(model, seed=0))
    encoded = [maker(i) for i in range(batches)]
    times = []
    for data in encoded:
        adapter.train_step(wire.decode_batch(data), return_gradients=False)  # a lone replica's step
        times.append(time.perf_counter())
    return (len(times) - 1) / (times[-1] - times[0])


def in_flink(maker, model, batches: int, threads: int, python_in: str, latency=None) -> float:
    """Trained batches per second of one replica inside a Flink job (first to last trained batch)."""
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import TrainConfig, train
    from pyflink_tensair.core.events import Metrics
    from pyflink_tensair.flink import types
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.flink.sources import number_sequence

    outdir = tempfile.mkdtemp(prefix="tensair-overhead-")
    env = StreamExecutionEnvironment.get_execution_environment()
    numbers = number_sequence(env, 0, batches - 1, name="numbers", uid="numbers")
    stream = numbers.map(maker, output_type=types.bytes_type()).name("batches").uid("batches").set_parallelism(1)
    config = TrainConfig(replicas=1, tf_intra_op_threads=threads, python_in=python_in, name="overhead",
                         **({"latency": latency} if latency is not None else {}))
    out = train(stream, model=model, config=config)
    write_json_lines(out.metrics, outdir, "metrics", name="overhead").set_parallelism(1)
    env.execute("overhead")
    records = [Metrics.from_json(line) for name in os.listdir(outdir) for line in open(os.path.join(outdir, name))]
    times = sorted(m.time for m in records if m.phase == "batch")
    return (len(times) - 1) / (times[-1] - times[0])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="quickstart")
    parser.add_argument("--batches", type=int, default=600)
    parser.add_argument("--tf-intra-op-threads", type=int, default=1, help="TrainConfig.tf_intra_op_threads")
    parser.add_argument("--python-in", choices=[p.value for p in PythonIn], default="jvm",
                        help="TrainConfig.python_in of the replica (default: jvm)")
    parser.add_argument("--latency-bundle-size", type=int, help="override LatencySettings.bundle_size "
                                                                "(python.fn-execution.bundle.size)")
    parser.add_argument("--latency-bundle-time-ms", type=int, help="override LatencySettings.bundle_time_ms "
                                                                   "(python.fn-execution.bundle.time)")
    parser.add_argument("--latency-buffer-timeout-ms", type=int, help="override LatencySettings.buffer_timeout_ms "
                                                                      "(the network buffer timeout)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    maker, model = _maker_and_model(args.model)
    from pyflink_tensair import LatencySettings

    overrides = {k: v for k, v in (("bundle_size", args.latency_bundle_size),
                                   ("bundle_time_ms", args.latency_bundle_time_ms),
                                   ("buffer_timeout_ms", args.latency_buffer_timeout_ms)) if v is not None}
    latency = LatencySettings(**overrides)
    flink = in_flink(maker, model, args.batches, args.tf_intra_op_threads, args.python_in, latency)
    plain = plain_loop(maker, model, args.batches, args.tf_intra_op_threads)
    features, classes, hidden, batch_size = MODELS[args.model]
    figures = {"model": args.model, "features": features, "hidden": hidden, "classes": classes,
               "batch_size": batch_size, "batches": args.batches, "tf_intra_op_threads": args.tf_intra_op_threads,
               "python_in": args.python_in, "latency": vars(latency), "flink_batches_per_s": round(flink, 2),
               "plain_loop_batches_per_s": round(plain, 2), "flink_over_plain": round(flink / plain, 3)}
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return figures


if __name__ == "__main__":
    main()
