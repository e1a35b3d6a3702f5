"""One run of the ingestion benchmark (benchmarks/ingestion.py): a logistic regression trained
from one input path on a local mini-cluster, with its rate and held-out accuracy in the summary.

    python benchmarks/ingestion_job.py --path json --replicas 1 --batch-size 64 --summary out.json

Paths (the same generated stream, :func:`linear_examples`, whatever the path):
``batch_source`` (batches made in the job, the replicas' ceiling), ``rows`` (Java tuples of a
double array and a long from ``env.from_collection`` with a type), ``json`` (JSON text records,
``to_batches(parse=json_example)``), ``tuples`` (the README's: Python ``(list, int)`` tuples from
``env.from_collection`` without a type) and ``kafka`` (the JSON records from a topic,
``--bootstrap-servers`` and ``--topic``). With ``--from-file`` (a file of the stream's JSON lines,
as ``benchmarks.peers`` writes), ``json`` reads its lines with Flink's ``FileSource`` and ``rows``
reads it as a table (the filesystem connector's JSON format) through ``batches_from_table``.

The rate is the replicas' own: the examples of the batches trained after the first fifth, over the
time from the first of them to the last (metrics' ``time``), so start-up and the sources'
preparation (``from_collection`` serializes its records in the client) do not count.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import sys
import tempfile

import numpy as np

PATHS = ("batch_source", "rows", "json", "tuples", "kafka")
FEATURES, HELDOUT, SEED = 20, 10_000, 0
WARMUP_SHARE = 0.2


def linear_examples(count: int, seed: int = SEED):
    """``(x, y)``: ``count`` examples of 20 standard normal features whose label is the sign of a
    fixed linear score plus noise (a logistic regression's best held-out accuracy is about 0.9)."""
    rng = np.random.default_rng(seed)
    weights = np.random.default_rng(1234).normal(size=FEATURES)
    x = rng.normal(size=(count, FEATURES))
    score = x @ weights / np.linalg.norm(weights) + rng.normal(scale=0.3, size=count)
    return x, (score > 0).astype(np.int64)


def json_text(x, y) -> str:
    return json.dumps({"x": x.tolist(), "y": int(y)}, separators=(",", ":"))


def slice_batch(index: int, *, count: int, batch_size: int, _made: dict = {}):  # noqa: B006 - the worker's cache
    """Batch ``index`` of the stream (``batch_source``'s maker; each worker makes the stream once)."""
    from pyflink_tensair import Batch

    if count not in _made:
        _made[count] = linear_examples(count)
    x, y = _made[count]
    at = index * batch_size
    return Batch(x[at:at + batch_size].astype(np.float32), y[at:at + batch_size], {"id": int(index)})


def logistic_regression(features: int, classes: int, learning_rate: float):
    """The zoo's, built here where the package predates it (``--python`` of an older checkout)."""
    from pyflink_tensair.models import zoo

    if hasattr(zoo, "logistic_regression"):
        return zoo.logistic_regression(features=features, classes=classes, learning_rate=learning_rate)
    import keras

    model = keras.Sequential([keras.Input(shape=(features,)), keras.layers.Dense(classes, activation="softmax")])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="sparse_categorical_crossentropy")
    return model


def batches(env, args):
    from pyflink.common import Types

    from pyflink_tensair import batch_source, to_batches
    from pyflink_tensair.kafka.source import json_example, kafka_examples

    if args.path == "batch_source":
        return batch_source(env, args.examples // args.batch_size,
                            functools.partial(slice_batch, count=args.examples, batch_size=args.batch_size),
                            python_in=getattr(args, "python_in", "jvm"))
    if args.path == "kafka":
        records = kafka_examples(env, args.bootstrap_servers, args.topic, group_id=f"ingestion-{os.getpid()}")
        return to_batches(records, args.batch_size, parse=json_example)
    if args.from_file:
        return file_batches(env, args)
    x, y = linear_examples(args.examples)
    if args.path == "rows":
        records = env.from_collection([(f.tolist(), int(c)) for f, c in zip(x, y)],
                                      type_info=Types.TUPLE([Types.PRIMITIVE_ARRAY(Types.DOUBLE()), Types.LONG()]))
        return to_batches(records, args.batch_size)
    if args.path == "json":
        records = env.from_collection([json_text(f, c) for f, c in zip(x, y)], type_info=Types.STRING())
        return to_batches(records, args.batch_size, parse=json_example)
    records = env.from_collection([(f.tolist(), int(c)) for f, c in zip(x, y)])  # the README's
    return to_batches(records, args.batch_size)


def file_batches(env, args):
    """Batches of the JSON lines in ``args.from_file``: text lines (``json``) or a table's rows (``rows``)."""
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
    from pyflink.common import WatermarkStrategy
    from pyflink.table import StreamTableEnvironment

    from pyflink_tensair import batches_from_table, to_batches
    from pyflink_tensair.kafka.source import json_example

    path = os.path.abspath(args.from_file)
    if args.path == "json":
        source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).build()
        lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "examples")
        return to_batches(lines, args.batch_size, parse=json_example)
    if args.path != "rows":
        raise SystemExit(f"--from-file takes --path json or rows; received {args.path}")
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql(f"CREATE TEMPORARY TABLE examples (x ARRAY<DOUBLE>, y BIGINT) WITH ('connector' = "
                      f"'filesystem', 'path' = '{path}', 'format' = 'json')")
    return batches_from_table(t_env, "examples", args.batch_size, features="x", label="y", classes=2)


def window_rate(metrics: list, batch_size: int) -> float:
    """Examples per second of the batches trained after the first fifth (see the module docstring)."""
    times = sorted(m["time"] for m in metrics if m["phase"] == "batch")
    window = times[int(len(times) * WARMUP_SHARE):]
    if len(window) < 2 or window[-1] <= window[0]:
        raise RuntimeError(f"too few trained batches to time: {len(times)}")
    return (len(window) - 1) * batch_size / (window[-1] - window[0])


def window_shares(metrics: list) -> dict:
    """Over the same window as :func:`window_rate`: the share of its time the replicas spent inside
    their models, inside the function's callbacks, and with the trainer thread waiting for work
    (high: the input binds, not the replica)."""
    records = sorted((m for m in metrics if m["phase"] == "batch"), key=lambda m: m["time"])
    window = records[int(len(records) * WARMUP_SHARE):]
    shares = {}
    for field in ("model_busy_s", "callback_s", "idle_s"):
        per_replica = {}
        for m in window:
            if m.get(field) is not None:
                per_replica.setdefault(m["replica"], []).append((m["time"], m[field]))
        spans = [(points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])
                 for points in per_replica.values() if len(points) > 1 and points[-1][0] > points[0][0]]
        shares[field.replace("_s", "_share")] = round(sum(spans) / len(spans), 3) if spans else None
    return shares


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", choices=PATHS, required=True)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--examples", type=int, default=249_600)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--topic")
    parser.add_argument("--python-in", default="jvm", choices=("jvm", "processes"),
                        help="where the replicas' Python runs (TrainConfig.python_in)")
    parser.add_argument("--from-file", help="json or rows: read this file of JSON lines instead")
    parser.add_argument("--summary", required=True)
    args = parser.parse_args(argv)

    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import TrainConfig, train
    from pyflink_tensair.flink.sinks import write_json_lines

    env = StreamExecutionEnvironment.get_execution_environment()
    model = functools.partial(logistic_regression, features=FEATURES, classes=2, learning_rate=args.learning_rate)
    out = train(batches(env, args), model=model,
                config=TrainConfig(replicas=args.replicas, name="ingest", python_in=args.python_in))
    outdir = tempfile.mkdtemp(prefix="ingestion-")
    write_json_lines(out.metrics, outdir, "metrics", name="ingest")
    models = out.collect_keras_models()
    metrics = [json.loads(line) for path in glob.glob(os.path.join(outdir, "metrics-*.jsonl")) for line in open(path)]
    x, y = linear_examples(HELDOUT, seed=SEED + 1)
    accuracy = float(np.mean(models[0].predict(x, verbose=0, batch_size=4096).argmax(axis=1) == y))
    trained = sum(1 for m in metrics if m["phase"] == "batch")
    summary = {"system": "pyflink_tensair", "input": args.path, "replicas": args.replicas, "batch_size": args.batch_size,
               "examples": args.examples, "batches_trained": trained,
               "examples_per_s": window_rate(metrics, args.batch_size), "heldout_accuracy": accuracy,
               **window_shares(metrics)}
    with open(args.summary, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
