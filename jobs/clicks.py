"""Clicks: a click model over user and item ids that the stream brings, in id tables that admit and evict.

Each event is a line ``user,item,click`` (:class:`~pyflink_tensair.datasets.zipf_clicks.ZipfClicks`:
users and items from Zipf laws whose popular ids move on as the stream goes, so new ids keep
appearing and old ones fade; ``--events`` of them, seeded). The job groups ``--batch-size`` lines on
the JVM and makes each group a batch at one subtask that keeps two id tables in Flink state
(:class:`~pyflink_tensair.embeddings.IdColumnBatches`, one per column, ``--capacity`` rows each): an
id gets a row once seen ``--min-count`` times, the least recently seen id gives its row up when
all are taken (only to an id seen more often), and with ``--expire-after N`` an id unseen for N
events loses its row. Every replica resets a row that changes hands, at the same point of its
stream. The model (``zoo.click_model``: user and item embeddings, their product, an MLP, Adam)
sees rows, never ids.

At the end the job scores the final model on the ``--holdout`` events that follow the stream, ids
looked up through the final model's id maps (an id without a row reads the shared row 0), as
``holdout_auc`` in the summary; exports (``--exports-every-s``) carry the maps beside each ``.keras``.

    python jobs/clicks.py --replicas 2 --summary runs/clicks.json
    python jobs/clicks.py --source kafka --bootstrap-servers 127.0.0.1:19092 --topic clicks
    flink run -py jobs/clicks.py --replicas 2 --capacity 5000

With ``--source kafka`` the lines come from a topic (one ``user,item,click`` line per record;
``python -m benchmarks.id_tables`` shows how the generated stream is made); the held-out events are
then the generated stream's, so give the topic that stream (``--events`` of it) to read the AUC.
"""

from __future__ import annotations

import argparse
import functools

import numpy as np

from pyflink_tensair import keras_model, train
from pyflink_tensair.cli import flags
from pyflink_tensair.cli.run import main_guard, run_job
from pyflink_tensair.core import wire
from pyflink_tensair.datasets.zipf_clicks import ZipfClicks
from pyflink_tensair.embeddings import IdColumnBatches
from pyflink_tensair.embeddings.maps import id_maps
from pyflink_tensair.embeddings.window import DEFAULT_SIZE
from pyflink_tensair.flink.pacing import Pacer
from pyflink_tensair.errors import DataError
from pyflink_tensair.models import zoo

COLUMNS = ("user", "item")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=flags.at_least(1, name="events"), default=100_000,
                        help="events in the generated stream (default: 100000)")
    parser.add_argument("--capacity", type=flags.at_least(1, name="capacity"), default=2_000,
                        help="rows of each id table, users' and items' (default: 2000; the default stream brings "
                             "about 10x as many user ids)")
    parser.add_argument("--min-count", type=flags.at_least(1, name="min_count"), default=2,
                        help="sightings before an id gets a row (default: 2)")
    parser.add_argument("--expire-after", type=flags.at_least(1, name="expire_after"), default=None,
                        help="an id unseen for this many events loses its row (default: never; rows are taken back "
                             "from the least recently seen id when all are used)")
    parser.add_argument("--dim", type=flags.at_least(1, name="dim"), default=16, help="embedding dimension (default: 16)")
    parser.add_argument("--holdout", type=flags.at_least(1, name="holdout"), default=10_000,
                        help="events after the stream the final model is scored on (default: 10000)")
    flags.add_job_arguments(parser, batches=None, batch_size=256, window=50)
    flags.add_kafka_arguments(parser, records="'user,item,click' lines")
    args = flags.parse_job_arguments(parser, argv)
    flags.check_kafka_arguments(args)
    return args


class BlockLines:
    """Block number -> the lines of its ``BLOCK`` events (fewer for the last block). The source
    sends block numbers, not event numbers: a Python operator gets a bundle per record here
    (``LatencySettings.bundle_size`` 1), so a line per record ran at about 300 events/s."""

    BLOCK = 1024

    def __init__(self, stream: ZipfClicks, events: int):
        self.stream, self.events = stream, events

    def blocks(self) -> int:
        return -(-self.events // self.BLOCK)

    def __call__(self, block: int):
        start = int(block) * self.BLOCK
        users, items, clicks = self.stream.events(start, min(self.BLOCK, self.events - start))
        return [f"{u},{i},{c}" for u, i, c in zip(users.tolist(), items.tolist(), clicks.tolist())]


def click_lines(env, args, stream: ZipfClicks):
    """The job's lines: generated from the event numbers, or read from a topic."""
    from pyflink.common import Types

    from pyflink_tensair.flink.sources import number_sequence

    if args.source == "kafka":
        from pyflink_tensair.kafka.source import kafka_examples

        return kafka_examples(env, args.bootstrap_servers, args.topic, group_id=args.group_id, start=args.kafka_start,
                              until=args.kafka_until, connector=args.kafka_connector, name="clicks")
    lines = BlockLines(stream, args.events)
    return (number_sequence(env, 0, lines.blocks() - 1, name="clicks: event blocks", uid="clicks-blocks")
            .flat_map(lines, output_type=Types.STRING()).set_parallelism(1).name("clicks: events").uid("clicks-events"))


def batch_maker(args) -> IdColumnBatches:
    return IdColumnBatches(COLUMNS, args.capacity, min_count=args.min_count, expire_after=args.expire_after,
                           notice_window=max(DEFAULT_SIZE, args.replicas), pacer=Pacer(args.rate))


def holdout_auc(stream: ZipfClicks, args, model):
    """``finish`` for run_job: the final model's AUC on the events after the stream, ids through its maps."""
    from sklearn.metrics import roc_auc_score

    users, items, clicks = stream.events(args.events, args.holdout)

    def finish(summary, metrics, models, probes):
        final = min(models, key=lambda m: m.replica)
        maps = id_maps(final)
        if set(maps) != set(COLUMNS):
            raise DataError(f"the final model carries id maps for {sorted(maps)}, not {list(COLUMNS)}: no id got a row?")
        x = {"user": maps["user"].rows_of(map(str, users.tolist())), "item": maps["item"].rows_of(map(str, items.tolist()))}
        known = {c: float(np.mean(x[c] != 0)) for c in COLUMNS}
        scores = keras_model(final, model).predict(x, batch_size=4096, verbose=0)[:, 0]
        auc = float(roc_auc_score(clicks, scores))
        print(f"held out: AUC {auc:.4f} on the {args.holdout} events after the stream; ids with a row: "
              + ", ".join(f"{c} {share:.0%}" for c, share in known.items())
              + "; " + ", ".join(f"{c} table {len(maps[c])} of {args.capacity} rows" for c in COLUMNS))
        return {"holdout_auc": round(auc, 4), "holdout_events": args.holdout,
                "holdout_ids_with_a_row": {c: round(share, 4) for c, share in known.items()},
                "table_ids": {c: len(maps[c]) for c in COLUMNS}}
    return finish


def main(argv=None):
    args = parse_args(argv)
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair.flink.id_tables import stateful_chunk_batches

    stream = ZipfClicks(seed=args.seed)
    env = StreamExecutionEnvironment.get_execution_environment()
    total = -(-args.events // args.batch_size) if args.source == "generated" else None
    config = flags.config_from_args(args, name="clicks", buffer_capacity=flags.held_batches_capacity(
        args, total or 0, batch_bytes=args.batch_size * 12))
    model = functools.partial(zoo.click_model, users=args.capacity + 1, items=args.capacity + 1, dim=args.dim)
    first = [str(n) for n in range(min(args.batch_size, args.events))]
    sample = wire.decode_batch(next(iter(batch_maker(args)(["0", "0", *(stream.line(int(n)) for n in first)]))))
    batches = stateful_chunk_batches(click_lines(env, args, stream), args.batch_size, batch_maker(args),
                                     max_wait_ms=1000 if args.source == "kafka" and args.kafka_until == "never" else None,
                                     python_in=config.python_in, name="clicks")
    output = train(batches, model=model, config=config, sample=sample)
    return run_job(env, output, args, job_name="clicks", config=config, total_batches=total, model=model,
                   finish=holdout_auc(stream, args, model),
                   extra_summary={"events": args.events if args.source == "generated" else None,
                                  "capacity": args.capacity, "min_count": args.min_count,
                                  "expire_after": args.expire_after, "dim": args.dim})


if __name__ == "__main__":
    main_guard(main)
