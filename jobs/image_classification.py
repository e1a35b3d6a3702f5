"""Image classification: replicas of a CNN trained on a stream of images, predicting every batch first.

Data (``--data``): ``digits`` (default; scikit-learn's 1,797 real handwritten 8x8 digits, the last
297 held out), ``cifar10:FOLDER`` (CIFAR-10's binary batches ``data_batch_*.bin``), or
``synthetic`` (generated 32x32x3 images, for throughput runs only). The data set is replayed
``--passes`` times, freshly shuffled each pass, optionally paced at ``--rate`` batches per second.
Every batch is predicted before it is trained on (prequential, test-then-train): the progress lines
show the accuracy over the last ``--score-window`` batches, the summary the accuracy of every pass, and
``<outdir>/predictions-*.jsonl`` the predicted labels of every batch.

Model: the reference CIFAR-10 CNN (122,570 parameters, Adam) for 32x32x3 images, the same shape
of CNN sized for 8x8 digits, or ``--model PATH`` to continue training a saved ``.keras`` model.

    python jobs/image_classification.py --replicas 2 --staleness-bound 0 --passes 5 --summary runs/digits.json
    python jobs/image_classification.py --data cifar10:/data/cifar-10-batches-bin --batch-size 128 --save runs/cnn.keras
    flink run -py jobs/image_classification.py --data synthetic --batches 500 --rate 20
    python jobs/image_classification.py --source kafka --bootstrap-servers 127.0.0.1:19092 --topic digits

With ``--source kafka`` the images come from a topic, one JSON record per image
(``{"x": [[[...]]], "y": 3}``, :mod:`pyflink_tensair.kafka.source`; ``python -m
pyflink_tensair.cli.produce --data digits`` writes one), batched inside the job; ``--data``
still names their kind (for the model, the held-out set and the records' shape).
"""

from __future__ import annotations

import argparse
import functools

import numpy as np

import math

from pyflink_tensair import batch_source, text_batches, train
from pyflink_tensair.cli import flags
from pyflink_tensair.cli.run import main_guard, run_job
from pyflink_tensair.core.prequential import segment_means
from pyflink_tensair.datasets.images import ImageStream, parse_image_spec
from pyflink_tensair.errors import ModelError
from pyflink_tensair.models import zoo

# Per data set: batch size, Adam learning rate, passes. For digits, chosen with a simulated sweep
# (docs/use_cases.md): batch 16 and lr 5e-3 keep DASGD within a few points of synchronous SGD.
DEFAULTS = {
    "digits": dict(batch_size=16, learning_rate=5e-3, passes=4),
    "cifar10": dict(batch_size=128, learning_rate=1e-3, passes=1),
    "synthetic": dict(batch_size=128, learning_rate=1e-3, passes=1),
}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="digits", type=flags.checked_by(parse_image_spec, keep_text=True),
                        help="digits (default), cifar10:FOLDER or synthetic")
    parser.add_argument("--model", metavar="PATH", help="continue training this saved .keras model")
    parser.add_argument("--passes", type=flags.at_least(1, name="passes"), default=None,
                        help="times the data set is replayed (default: 4 for digits, else 1)")
    parser.add_argument("--learning-rate", type=flags.greater_than(0, "learning_rate"), default=None,
                        help="Adam learning rate of the built model (default: 5e-3 for digits, else 1e-3)")
    flags.add_job_arguments(parser, batches=None, batch_size=None, window=20)
    flags.add_kafka_arguments(parser)
    args = flags.parse_job_arguments(parser, argv)
    flags.check_kafka_arguments(args)
    kind, _ = parse_image_spec(args.data)
    for name, value in DEFAULTS[kind].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.model and args.learning_rate != DEFAULTS[kind]["learning_rate"]:
        print("note: --learning-rate is ignored with --model (the saved model keeps its optimizer settings)")
    return args


def choose_model(args, stream: ImageStream):
    """The model to train: ``--model PATH``, or the CNN for the data's image size."""
    if args.model:
        from pyflink_tensair.models.keras_adapter import load_model

        shape = tuple(load_model(args.model).input_shape[1:])
        if shape != stream.input_shape:
            raise ModelError(f"--model {args.model} takes inputs of shape {shape}, but {args.data} images are {stream.input_shape}")
        return args.model
    builder = zoo.digits_cnn if stream.input_shape == (8, 8, 1) else zoo.cifar10_cnn
    return functools.partial(builder, learning_rate=args.learning_rate)


def per_pass_accuracy(batches_per_pass: int):
    def finish(summary, metrics, models, probes):
        passes = segment_means([m for m in metrics if m.phase == "batch"], "accuracy", segment=batches_per_pass)
        return {"pass_accuracy": passes, "last_pass_accuracy": passes[-1] if passes else None,
                "batches_per_pass": batches_per_pass}
    return finish


def image_batches(env, args, stream: ImageStream, total: int, config):
    """The job's batch stream: made inside the job from the data set, or batched from a Kafka topic."""
    if args.source != "kafka":
        return batch_source(env, total, stream, rate=args.rate, name="images", python_in=config.python_in)
    from pyflink_tensair.kafka.source import json_example, kafka_examples

    records = kafka_examples(env, args.bootstrap_servers, args.topic, group_id=args.group_id, start=args.kafka_start,
                             until=args.kafka_until, connector=args.kafka_connector, name="images")
    return text_batches(records, args.batch_size, parse=json_example, classes=10, features_shape=stream.input_shape,
                        rate=args.rate, max_wait_ms=1000 if args.kafka_until == "never" else None,
                        python_in=config.python_in, name="images")


def main(argv=None):
    args = parse_args(argv)
    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair.flink import types

    stream = ImageStream(args.data, batch_size=args.batch_size, seed=args.seed)
    total = stream.batches_per_pass * args.passes
    if args.source == "kafka":
        from pyflink_tensair.kafka.source import topic_size

        records = topic_size(args.bootstrap_servers, args.topic) if args.kafka_until == "latest" else None
        total = None if records is None else math.ceil(records / args.batch_size)
        print(f"data: Kafka topic {args.topic} at {args.bootstrap_servers}, "
              + (f"{records} records now" if records is not None else "followed until the job is stopped"))
    elif args.batches is not None:
        total = min(total, args.batches)
    if stream.synthetic:
        print("data: SYNTHETIC images (generated patterns plus noise): for throughput runs, not a measure of accuracy")
    if args.source != "kafka":
        print(f"data: {args.data}, {stream.train_size} training images, {stream.batches_per_pass} batches of "
              f"{args.batch_size} per pass, {total} batches in all")
    model = choose_model(args, stream)
    env = StreamExecutionEnvironment.get_execution_environment()
    batch_bytes = args.batch_size * (int(np.prod(stream.input_shape)) + 2) * 4
    config = flags.config_from_args(args, name="images",
                                    buffer_capacity=flags.held_batches_capacity(args, total or 0, batch_bytes))
    output = train(image_batches(env, args, stream, total, config), model=model, config=config, sample=stream(0))
    labels = (output.predictions.map(types.predicted_labels_json, output_type=Types.STRING())
              .name("images: predicted labels").uid("images-predicted-labels").set_parallelism(config.replicas))
    return run_job(env, output, args, job_name="image_classification", config=config, total_batches=total,
                   model=model, holdout=stream.holdout(), predictions=labels,
                   extra_summary={"data": args.data, "synthetic_data": stream.synthetic, "passes": args.passes,
                                  "model": args.model or model.func.__name__},
                   finish=per_pass_accuracy(stream.batches_per_pass))


if __name__ == "__main__":
    main_guard(main)
