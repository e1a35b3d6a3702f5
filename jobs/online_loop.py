"""The online loop: live click events answered by the freshest model, labels joined back in when they come.

A generated click stream (seeded, :class:`~pyflink_tensair.datasets.clicks.ClickStream`): each
event is answered at once by servers that apply the replicas' model updates as they arrive; its
click label comes seconds to minutes later (stream time; the clock runs ``--compression`` times
faster), a share never comes, and the users' taste turns around half way. Events wait for their
label in keyed state for ``--label-timeout-s``; then they train as "no click". A frozen copy of
the starting model answers the same events, to show what training in real time is worth.

    python jobs/online_loop.py --events 6000 --summary runs/online.json
    flink run -py jobs/online_loop.py --replicas 2 --serve-parallelism 2

The summary holds freshness_ms_p50 / p99 (a training step to the first prediction made with
it), served_accuracy and frozen_accuracy over the labelled events, both before and after the
drift, events_served, labels_joined, label_timeouts and dead_letters.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import glob
import json
import os
import time

import numpy as np

from pyflink_tensair import ModelUpdates, ServeConfig, join_labels, serve, text_batches, train
from pyflink_tensair.online.scoring import score
from pyflink_tensair.cli import flags
from pyflink_tensair.cli.run import main_guard, run_job
from pyflink_tensair.datasets.clicks import ClickStream
from pyflink_tensair.flink.sources import number_sequence
from pyflink_tensair.kafka.source import json_example
from pyflink_tensair.models import zoo

JOB_CONFIG = dataclasses.replace(flags.JOB_CONFIG, updates=ModelUpdates())


WARMUP_EVENTS = 3  # answered by each server before the stream's clock starts
READY_WAIT_S = 600


def ready_file(outdir: str, prefix: str) -> str:
    """The predictions file of ``prefix``'s servers: its first line is a warm-up event's answer
    (only warm-up events come before the stream's clock starts)."""
    return os.path.join(outdir, f"{prefix}-0.jsonl")


class Paced:
    """``text(n)`` of record ``n``, held back until its stream time is due (the clock compressed).

    The clock starts ``settle_s`` after the servers have answered warm-up events (``ready``: the
    trained and the frozen model's predictions files are no longer empty; with more than one
    server each, the first to answer): a live stream does not wait for TensorFlow to load, and its first minute
    would otherwise reach the job as one burst, answered by the starting model."""

    def __init__(self, stream: ClickStream, kind: str, ready: tuple = (), settle_s: float = 0.0,
                 unpaced_after_restore: bool = False):
        self._stream, self._kind, self._ready, self._settle_s, self._start = stream, kind, ready, settle_s, None
        self._unpaced_after_restore = unpaced_after_restore
        self._paced = True

    def _wait_until_ready(self) -> None:
        deadline = time.time() + READY_WAIT_S
        while not all(os.path.exists(p) and os.path.getsize(p) > 0 for p in self._ready) and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(self._settle_s)  # the replicas load TensorFlow too, on the same cores

    def __call__(self, n: int) -> str:
        stream = self._stream
        at = stream.event_time_ms(n) if self._kind == "event" else stream.label_time_ms(n)
        if self._start is None:
            # a first record past the stream's first: the numbers resumed from a checkpoint
            self._paced = not (self._unpaced_after_restore and n > 0)
            self._wait_until_ready()
            self._start = time.time() - stream.wall_s(at)
        wait = self._start + stream.wall_s(at) - time.time()
        if wait > 0 and self._paced:
            time.sleep(wait)
        return stream.event_text(n) if self._kind == "event" else stream.label_text(n)


def timed_source(env, stream: ClickStream, kind: str, count: int, ready: tuple, settle_s: float,
                 unpaced_after_restore: bool = False):
    from pyflink.common import Duration, Types, WatermarkStrategy
    from pyflink.common.watermark_strategy import TimestampAssigner

    class JsonTime(TimestampAssigner):
        """The ``"t"`` of a JSON record: its event time (stream milliseconds)."""

        def extract_timestamp(self, value, record_timestamp) -> int:
            return int(json.loads(value)["t"])

    texts = (number_sequence(env, 0, count - 1, name=f"online: {kind} numbers", uid=f"online-{kind}-numbers")
             .map(Paced(stream, kind, ready, settle_s, unpaced_after_restore), output_type=Types.STRING()).set_parallelism(1).name(f"online: {kind}s").uid(f"online-{kind}s"))
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0))
                .with_timestamp_assigner(JsonTime()))
    return (texts.assign_timestamps_and_watermarks(strategy).set_parallelism(1).name(f"online: {kind} times")
            .uid(f"online-{kind}-times"))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=flags.at_least(1, name="events"), default=6000,
                        help="events in the generated stream (default 6000: about 2 minutes on two cores)")
    parser.add_argument("--events-per-s", type=flags.greater_than(0, "events_per_s"), default=100.0,
                        help="events per second of wall time (default 100)")
    parser.add_argument("--compression", type=flags.greater_than(0, "compression"), default=60.0,
                        help="stream seconds per wall second (default 60: a label a minute late comes a second late)")
    parser.add_argument("--label-timeout-s", type=flags.greater_than(0, "label_timeout_s"), default=90.0,
                        help="stream seconds an event waits for its label, then trains as 'no click' (default 90)")
    parser.add_argument("--serve-parallelism", type=flags.at_least(1, name="serve_parallelism"), default=1,
                        help="inference subtasks (default 1)")
    parser.add_argument("--serve-batch-size", type=flags.at_least(1, name="serve_batch_size"), default=16,
                        help="events per micro-batch of the servers at most (default 16)")
    parser.add_argument("--serve-max-wait-ms", type=flags.greater_than(0, "serve_max_wait_ms"), default=20.0,
                        help="the longest an event waits for its micro-batch (default 20)")
    parser.add_argument("--online-python-in", choices=("jvm", "processes"), default="jvm",
                        help="where the servers', the label join's and the scorers' Python runs (default jvm: in "
                             "worker processes each record crosses into Python in a bundle of its own, and the join "
                             "fell minutes behind the stream on two cores; docs/measurements.md, 2026-12-05)")
    parser.add_argument("--online-score-window", type=flags.at_least(1, name="online_score_window"), default=200,
                        help="labelled events in the in-job windows of served and frozen accuracy (default 200)")
    parser.add_argument("--warmup-s", type=flags.at_least(0, float, "warmup_s"), default=15.0,
                        help="seconds the stream waits after the servers have answered their first events, while "
                             "the rest of the job starts (default 15)")
    parser.add_argument("--unpaced-after-restore", action="store_true",
                        help="after a restore, the rest of the stream comes as fast as the job takes it (a "
                             "recovery test need not wait out the clock; the counts, in stream time, are the same)")
    flags.add_job_arguments(parser, batches=None, batch_size=16, window=20, config=JOB_CONFIG)
    return flags.parse_job_arguments(parser, argv)


def _lines(outdir: str, prefix: str) -> list:
    out = []
    for path in sorted(glob.glob(os.path.join(outdir, f"{prefix}-*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def online_figures(outdir: str, stream: ClickStream) -> dict:
    """The loop's figures from the files the job wrote (module docstring)."""
    served, frozen = ([r for r in _lines(outdir, prefix) if not r["key"].startswith("warmup-")]
                      for prefix in ("served", "frozen"))
    labels = {rec["id"]: rec["y"] for rec in map(json.loads, (stream.label_text(j) for j in range(stream.labels)))}
    fresh = np.array([f for rec in _lines(outdir, "freshness") for f in rec["freshness_ms"]])
    drift = int(stream.events * stream.drift_at)

    def accuracy(rows, after=None):
        hits = [int(np.argmax(r["prediction"]) == labels[int(r["key"])]) for r in rows
                if int(r["key"]) in labels and (after is None or (int(r["key"]) >= drift) == after)]
        return (float(np.mean(hits)) if hits else None), len(hits)

    def recovery(rows, window=200):
        """Labelled events after the drift until a window's served accuracy is back at the level before it."""
        before, _ = accuracy(rows, after=False)
        ordered = sorted((int(r["key"]), int(np.argmax(r["prediction"]) == labels[int(r["key"])])) for r in rows
                         if int(r["key"]) in labels and int(r["key"]) >= drift)
        for end in range(window, len(ordered) + 1, window // 4):
            if before is not None and np.mean([h for _, h in ordered[end - window:end]]) >= before - 0.02:
                return end
        return None

    served_accuracy, scored = accuracy(served)
    ages = np.array([r["model_age_ms"] for r in served if r["model_age_ms"] >= 0])
    return {
        "events": stream.events, "labels_sent": stream.labels,
        "events_served": len(served), "frozen_served": len(frozen), "labelled_events_scored": scored,
        "served_accuracy": served_accuracy, "frozen_accuracy": accuracy(frozen)[0],
        "served_accuracy_before_drift": accuracy(served, False)[0], "served_accuracy_after_drift": accuracy(served, True)[0],
        "frozen_accuracy_before_drift": accuracy(frozen, False)[0], "frozen_accuracy_after_drift": accuracy(frozen, True)[0],
        "events_to_recover": recovery(served),
        "freshness_ms_p50": float(np.percentile(fresh, 50)) if len(fresh) else None,
        "freshness_ms_p99": float(np.percentile(fresh, 99)) if len(fresh) else None,
        "freshness_steps": int(len(fresh)),
        "model_age_ms_p50": float(np.percentile(ages, 50)) if len(ages) else None,
        "versions_served": len({r["model_version"] for r in served}),
        "labels_joined": sum(1 for r in _lines(outdir, "joined") if not r.get("timed_out")),
        "label_timeouts": len(_lines(outdir, "timeouts")),
        "online_dead_letters": len(_lines(outdir, "online-dead-letters")),
        # the in-job windows of score() (Flink gauges tensair.<name>.*, TensorBoard): the last of each
        **{f"{prefix}_last_window": (_lines(outdir, f"score-{prefix}") or [None])[-1] for prefix in ("served", "frozen")},
    }


def warmup_event(n: int, features: int) -> str:
    return json.dumps({"id": f"warmup-{n}", "x": [0.0] * features, "t": 0})


def main(argv=None):
    args = parse_args(argv)

    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair.flink.sinks import write_json_lines

    stream = ClickStream(events=args.events, seed=args.seed, gap_ms=1000.0 * args.compression / args.events_per_s,
                         compression=args.compression)
    env = StreamExecutionEnvironment.get_execution_environment()
    config = flags.config_from_args(args, name="online")
    model = functools.partial(zoo.quickstart_classifier, features=stream.features, classes=2, hidden=16,
                              learning_rate=0.01)
    outdir = os.path.abspath(args.outdir or flags.default_outdir("online_loop"))
    args.outdir = outdir
    os.makedirs(outdir, exist_ok=True)
    for stale in (p for prefix in ("served", "frozen", "freshness", "joined", "timeouts", "online-dead-letters",
                                    "score-served", "score-frozen")
                  for p in glob.glob(os.path.join(outdir, f"{prefix}-*.jsonl"))):
        os.remove(stale)  # the writers append: an earlier run's results must not mix in
    ready = (ready_file(outdir, "served"), ready_file(outdir, "frozen"))
    events = timed_source(env, stream, "event", stream.events, ready, args.warmup_s, args.unpaced_after_restore)
    labels = timed_source(env, stream, "label", stream.labels, ready, args.warmup_s, args.unpaced_after_restore)
    warmup = (number_sequence(env, 0, WARMUP_EVENTS - 1, name="online: warm-up numbers", uid="online-warmup-numbers")
              .map(functools.partial(warmup_event, features=stream.features), output_type=Types.STRING())
              .name("online: warm-up events").uid("online-warmup-events"))

    joined = join_labels(events, labels, timeout_ms=args.label_timeout_s * 1000.0, default_label=0,
                         python_in=args.online_python_in)
    batches = text_batches(joined.records, args.batch_size, parse=json_example, classes=2,
                           features_shape=(stream.features,), max_wait_ms=200, python_in=config.python_in, name="online")
    output = train(batches, model=model, config=config)
    serve_config = ServeConfig(parallelism=args.serve_parallelism, batch_size=args.serve_batch_size,
                               max_wait_ms=args.serve_max_wait_ms, seed=config.seed, python_in=args.online_python_in)
    served = serve(events.union(warmup), output, model=model, config=serve_config)
    frozen = serve(events.union(warmup), None, model=model, config=dataclasses.replace(serve_config, name="frozen"))

    score_dead_letters = []
    for prediction_stream, prefix in ((served.predictions, "served"), (frozen.predictions, "frozen")):
        write_json_lines(prediction_stream, outdir, prefix, name="online").set_parallelism(1)  # as JSON, on the JVM
        scores = score(prediction_stream, joined.records, window=args.online_score_window,
                       report_every=max(1, args.online_score_window // 4), python_in=args.online_python_in,
                       name=prefix)
        write_json_lines(scores.windows, outdir, f"score-{prefix}", name="online").set_parallelism(1)
        score_dead_letters.append(scores.dead_letters)
    write_json_lines(served.freshness, outdir, "freshness", name="online").set_parallelism(1)
    write_json_lines(joined.records, outdir, "joined", name="online").set_parallelism(1)
    write_json_lines(joined.timeouts, outdir, "timeouts", name="online").set_parallelism(1)
    dead = joined.dead_letters.union(served.dead_letters, frozen.dead_letters, *score_dead_letters)
    write_json_lines(dead, outdir, "online-dead-letters", name="online").set_parallelism(1)

    def finish(summary, metrics, models, probes):
        figures = online_figures(outdir, stream)
        figures["dead_letters"] = (summary.get("dead_letters") or 0) + figures.pop("online_dead_letters")
        print(json.dumps({k: figures[k] for k in ("freshness_ms_p50", "freshness_ms_p99", "served_accuracy",
                                                   "frozen_accuracy", "events_served", "labels_joined",
                                                   "label_timeouts", "dead_letters")}), flush=True)
        return figures

    return run_job(env, output, args, job_name="online_loop", config=config, total_batches=None, model=model,
                   finish=finish, score_prefixes=("score-served", "score-frozen"))


if __name__ == "__main__":
    main_guard(main)
