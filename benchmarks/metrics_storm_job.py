"""Short thread-mode training jobs, submitted one after the other by one ``flink run -py``.

The job of :mod:`benchmarks.metrics_storm`: ``--jobs`` copies of the quickstart job (``--replicas``
replicas and their batch source with ``python_in="jvm"``, PyFlink's thread mode; ``--batches``
batches unpaced), each submitted as soon as the one before is (``execute_async``): they wait for
slots, start, train and end one after another, so that Python operators close often while the
metrics are queried. Prints ``JobID <id>`` per job and
exits once every job has ended (non-zero if one failed).

    flink run -py benchmarks/metrics_storm_job.py --jobs 4 --replicas 2 --batches 40
"""

from __future__ import annotations

import argparse
import functools
import sys


def build(env, replicas: int, batches: int, batch_size: int, name: str):
    """One quickstart training graph (its outputs unused: the job is its training)."""
    from pyflink_tensair import TrainConfig, batch_source, train
    from pyflink_tensair.datasets.teacher import teacher_classification_batch
    from pyflink_tensair.models import zoo

    make = functools.partial(teacher_classification_batch, batch_size=batch_size, features=20, classes=4, seed=0)
    config = TrainConfig(name=name, replicas=replicas, python_in="jvm")
    stream = batch_source(env, batches, make, name=name, python_in=config.python_in)
    train(stream, model=functools.partial(zoo.quickstart_classifier, features=20, classes=4), config=config,
          check_model=False)


def main(argv=None) -> int:
    from pyflink_tensair.cli.flags import parse_job_arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parse_job_arguments(parser, argv)  # a mistyped flag: usage, exit status 2

    from pyflink.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    clients = []
    for i in range(args.jobs):
        build(env, args.replicas, args.batches, args.batch_size, name=f"storm{i}")
        client = env.execute_async(f"metrics-storm-{i}")
        print(f"JobID {client.get_job_id()}", flush=True)
        clients.append(client)
    failed = 0
    for client in clients:
        try:
            client.get_job_execution_result().result()
        except Exception as err:  # the job's failure: counted, the others still awaited
            failed += 1
            print(f"job {client.get_job_id()} failed: {str(err).splitlines()[0]}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
