"""Flink ML's ``OnlineLogisticRegression`` (apache-flink-ml 2.3.0 on Flink 1.17.1) on the ingestion
benchmark's stream: labelled vectors read from a file of JSON lines by the Table API's filesystem
connector (``--from-file``, the stream ``benchmarks.peers`` writes) or made in the client with
``env.from_collection``, trained at parallelism 1 with a global batch size; the last model's
coefficients scored on the held-out examples. ``--read-only`` reads the file's table into a
blackhole sink and nothing else: the rate of the source Flink ML (and our table path) reads. Runs in the Python 3.8 side environment
``benchmarks.peers`` builds; prints one JSON line.

    JDK_JAVA_OPTIONS="--add-opens=..." python benchmarks/peers_flinkml.py --examples 249600 --batch-size 64 \
        --from-file .peers/stream-249600.jsonl

The rate inside the job is read from the model versions, each stamped with the job's clock as it
leaves the estimator (``CURRENT_TIMESTAMP``, evaluated per row in streaming mode, as text: the
bridge that collects Flink ML's rows cannot pickle a timestamp).

Facts this needs (checked 2026-12-07): the Python estimator has no ``set_initial_model_data``
(the Java object's is called); a vector column cannot be collected (``vector_to_array`` first);
the model data's version column is ``modelVersion``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.ingestion_job import FEATURES, HELDOUT, SEED, linear_examples  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--from-file", help="a file of JSON lines {\"x\": [...], \"y\": label} to read (default: "
                        "from_collection of the generated stream)")
    parser.add_argument("--read-only", action="store_true",
                        help="with --from-file: only read the table into a blackhole sink (the source's ceiling)")
    parser.add_argument("--alpha", type=float, default=0.1, help="FTRL's alpha (Flink ML's default 0.1)")
    args = parser.parse_args(argv)
    import numpy as np
    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.ml.classification.logisticregression import OnlineLogisticRegression
    from pyflink.ml.functions import array_to_vector, vector_to_array
    from pyflink.ml.linalg import DenseVectorTypeInfo, Vectors
    from pyflink.table import DataTypes, StreamTableEnvironment
    from pyflink.table.expressions import col, current_timestamp

    began = time.perf_counter()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    t_env = StreamTableEnvironment.create(env)
    if args.from_file:
        t_env.execute_sql(f"CREATE TEMPORARY TABLE examples (x ARRAY<DOUBLE>, y DOUBLE) WITH ('connector' = "
                          f"'filesystem', 'path' = '{os.path.abspath(args.from_file)}', 'format' = 'json')")
        if args.read_only:
            t_env.execute_sql("CREATE TEMPORARY TABLE discard (x ARRAY<DOUBLE>, y DOUBLE) WITH ('connector' = 'blackhole')")
            t_env.from_path("examples").execute_insert("discard").wait()
            print(json.dumps({"system": "flink 1.17 table source", "input": "table rows, JSON file, discarded",
                              "examples": args.examples, "seconds": time.perf_counter() - began}))
            return 0
        train = t_env.from_path("examples").select(array_to_vector(col("x")).alias("features"), col("y").alias("label"))
    else:
        x, y = linear_examples(args.examples)
        train = t_env.from_data_stream(env.from_collection(
            [(Vectors.dense(row), float(label)) for row, label in zip(x.tolist(), y.tolist())],
            type_info=Types.ROW_NAMED(["features", "label"], [DenseVectorTypeInfo(), Types.DOUBLE()])))
    initial = env.from_collection([(Vectors.dense([0.0] * FEATURES), 0)],
                                  type_info=Types.ROW_NAMED(["coefficient", "modelVersion"],
                                                            [DenseVectorTypeInfo(), Types.LONG()]))
    estimator = (OnlineLogisticRegression().set_features_col("features").set_label_col("label")
                 .set_global_batch_size(args.batch_size).set_alpha(args.alpha))
    estimator._java_obj.setInitialModelData(t_env.from_data_stream(initial)._j_table)
    model = estimator.fit(train)
    data = model.get_model_data()[0]
    versions = t_env.to_data_stream(data.select(vector_to_array(col("coefficient")).alias("c"), col("modelVersion"),
                                                current_timestamp().cast(DataTypes.STRING()).alias("at")))
    last, count, stamps = None, 0, []
    with versions.execute_and_collect() as rows:
        for row in rows:
            last, count = row, count + 1
            stamps.append((datetime.datetime.fromisoformat(row[2]).timestamp(), int(row[1])))
    elapsed = time.perf_counter() - began
    # the rate inside the job, as ours is timed: the model versions after the first fifth, by the job's clock
    (t0, v0), (t1, v1) = stamps[len(stamps) // 5], stamps[-1]
    in_job = (v1 - v0) * args.batch_size / (t1 - t0) if t1 > t0 else None
    coefficients = np.asarray(last[0], dtype=np.float64)
    test_x, test_y = linear_examples(HELDOUT, seed=SEED + 1)
    accuracy = float(np.mean((test_x @ coefficients > 0).astype(np.int64) == test_y))
    print(json.dumps({"system": "flink-ml", "input": "table rows, JSON file" if args.from_file else "Rows of (vector, label), from_collection", "examples": args.examples,
                      "batch_size": args.batch_size, "seconds": elapsed, "model_versions": count,
                      "last_version": int(last[1]), "in_job_examples_per_s": in_job, "heldout_accuracy": accuracy}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
