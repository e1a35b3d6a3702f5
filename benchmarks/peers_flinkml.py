"""Flink ML's ``OnlineLogisticRegression`` (apache-flink-ml 2.3.0 on Flink 1.17.1) on the ingestion
benchmark's stream: labelled vectors from ``env.from_collection``, trained at parallelism 1 with
a global batch size; the last model's coefficients scored on the held-out examples. Runs in the
Python 3.8 side environment ``benchmarks.peers`` builds; prints one JSON line.

    JDK_JAVA_OPTIONS="--add-opens=..." python benchmarks/peers_flinkml.py --examples 249600 --batch-size 64

Facts this needs (checked 2026-12-07): the Python estimator has no ``set_initial_model_data``
(the Java object's is called); a vector column cannot be collected (``vector_to_array`` first);
the model data's version column is ``modelVersion``.
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--alpha", type=float, default=0.1, help="FTRL's alpha (Flink ML's default 0.1)")
    args = parser.parse_args(argv)
    import numpy as np
    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.ml.classification.logisticregression import OnlineLogisticRegression
    from pyflink.ml.functions import vector_to_array
    from pyflink.ml.linalg import DenseVectorTypeInfo, Vectors
    from pyflink.table import StreamTableEnvironment
    from pyflink.table.expressions import col

    began = time.perf_counter()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    t_env = StreamTableEnvironment.create(env)
    x, y = linear_examples(args.examples)
    train = env.from_collection([(Vectors.dense(row), float(label)) for row, label in zip(x.tolist(), y.tolist())],
                                type_info=Types.ROW_NAMED(["features", "label"], [DenseVectorTypeInfo(), Types.DOUBLE()]))
    initial = env.from_collection([(Vectors.dense([0.0] * FEATURES), 0)],
                                  type_info=Types.ROW_NAMED(["coefficient", "modelVersion"],
                                                            [DenseVectorTypeInfo(), Types.LONG()]))
    estimator = (OnlineLogisticRegression().set_features_col("features").set_label_col("label")
                 .set_global_batch_size(args.batch_size).set_alpha(args.alpha))
    estimator._java_obj.setInitialModelData(t_env.from_data_stream(initial)._j_table)
    model = estimator.fit(t_env.from_data_stream(train))
    data = model.get_model_data()[0]
    versions = t_env.to_data_stream(data.select(vector_to_array(col("coefficient")).alias("c"), col("modelVersion")))
    last, count, arrivals = None, 0, []
    with versions.execute_and_collect() as rows:
        for row in rows:
            last, count = row, count + 1
            arrivals.append((time.perf_counter(), int(row[1])))
    elapsed = time.perf_counter() - began
    # the rate inside the job, as ours is timed: model versions after the first fifth, as they reach this client
    (t0, v0), (t1, v1) = arrivals[len(arrivals) // 5], arrivals[-1]
    in_job = (v1 - v0) * args.batch_size / (t1 - t0) if t1 > t0 else None
    coefficients = np.asarray(last[0], dtype=np.float64)
    test_x, test_y = linear_examples(HELDOUT, seed=SEED + 1)
    accuracy = float(np.mean((test_x @ coefficients > 0).astype(np.int64) == test_y))
    print(json.dumps({"system": "flink-ml", "input": "Rows of (vector, label), from_collection", "examples": args.examples,
                      "batch_size": args.batch_size, "seconds": elapsed, "model_versions": count,
                      "last_version": int(last[1]), "in_job_examples_per_s": in_job, "heldout_accuracy": accuracy}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
