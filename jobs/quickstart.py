"""Quickstart: replicas of a small Keras classifier trained on a generated stream.

Each mini-batch holds ``--batch-size`` points in 20 dimensions whose label (one of 4) is drawn from a
softmax over a fixed random linear map of the point: a noisy teacher, so the best achievable loss
is the teacher's own entropy (about 0.4) and the accuracy about 0.83, as on real labelled data.
Batches are made inside the job from their number, so the stream is the same for any replica count.

    python jobs/quickstart.py --replicas 2 --staleness-bound 0 --summary runs/sync.json
    flink run -py jobs/quickstart.py --replicas 2 --staleness-bound none
"""

from __future__ import annotations

import argparse
import functools

from pyflink_tensair import batch_source, train
from pyflink_tensair.cli import flags
from pyflink_tensair.cli.run import main_guard, run_job
from pyflink_tensair.datasets.teacher import teacher_classification_batch
from pyflink_tensair.models import zoo

FEATURES, CLASSES = 20, 4
HOLDOUT_START = 10 ** 9  # batch numbers of the held-out set, never in the stream


def build_batches(env, args, config):
    make = functools.partial(teacher_classification_batch, batch_size=args.batch_size, features=FEATURES,
                             classes=CLASSES, seed=args.seed)
    return batch_source(env, args.batches, make, rate=args.rate, name="quickstart", python_in=config.python_in)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    flags.add_job_arguments(parser, batches=1000, batch_size=64)
    return flags.parse_job_arguments(parser, argv)


def main(argv=None):
    args = parse_args(argv)

    from pyflink.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    capacity = flags.held_batches_capacity(args, args.batches, batch_bytes=args.batch_size * (FEATURES + 2) * 4)
    config = flags.config_from_args(args, name="quickstart", buffer_capacity=capacity)
    model = functools.partial(zoo.quickstart_classifier, features=FEATURES, classes=CLASSES)
    output = train(build_batches(env, args, config), model=model, config=config,
                   sample=teacher_classification_batch(0, batch_size=args.batch_size, features=FEATURES,
                                                       classes=CLASSES, seed=args.seed))
    holdout = [teacher_classification_batch(HOLDOUT_START + i, batch_size=256, features=FEATURES,
                                                 classes=CLASSES, seed=args.seed) for i in range(16)]
    return run_job(env, output, args, job_name="quickstart", config=config, total_batches=args.batches,
                   model=model, holdout=holdout)


if __name__ == "__main__":
    main_guard(main)
