"""Training from a Kafka topic: our replicas against one Keras model behind a plain Kafka consumer.

    python -m benchmarks.kafka_throughput --records 6000 --repeats 3      # about 10 minutes

The baseline is how Kafka-ML and TensorFlow-IO train: one Keras model in a plain Python process
that polls the topic with a Kafka client from PyPI (kafka-python), parses each record, and calls
``train_on_batch`` on every mini-batch. Ours is ``jobs/image_classification.py --source kafka``
(Flink's KafkaSource, ``to_batches``, the replicas) on a local mini-cluster. Both read the same
topic of ``--records`` digits images (JSON, :mod:`pyflink_tensair.kafka.source`) from the start,
with the same model (the digits CNN, Adam 5e-3) and batch size, unpaced: the rate at which each
drains a full topic is the most it can sustain. Ours is timed from the job's first to its last
trained batch (the job's ``batches_per_s``), the baseline from its first to its last step, so
neither counts start-up. Each figure is repeated ``--repeats`` times, alternating, and the ratio
is taken per repeat; prints medians with their spread. Needs a broker: ``--bootstrap-servers``,
or one is started for the run (``--dir``) and stopped after.

``--in-job``: against the same image job fed by ``batch_source`` (the digits made in the job, the
same number of batches) instead of the consumer: what coming in from Kafka costs the replicas.

    python -m benchmarks.kafka_throughput --in-job --records 6000 --repeats 3 --replicas 1

``--paced``: the sustainable rate instead of the drain rate, found as ``benchmarks run`` finds
it (:mod:`benchmarks.throughput.search`: double while sustainable, then ``--bisections`` steps):
at a probe rate R (records/s) batch ``i`` of the topic is due at ``start + i * batch / R``, each
side waits for it (ours: ``--rate`` of the job, the batcher's pacer; the consumer: a sleep before
the step), and R is sustainable when the delay of the trained batches behind their schedule
stays bounded (:mod:`benchmarks.throughput.verdict`, the same judge as the other systems).

    python -m benchmarks.kafka_throughput --paced --records 6000 --repeats 1 --replicas 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from benchmarks.jobrun import run_job

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join(ROOT, "jobs", "image_classification.py")
BATCH_SIZE = 16
LEARNING_RATE = 5e-3


def consumer_baseline(servers: str, topic: str, records: int, batch_size: int = BATCH_SIZE, rate: float = 0.0) -> dict:
    """Kafka-ML's way: poll, parse, ``train_on_batch``; returns records/s between the first and last
    step. ``rate`` > 0 (records/s): batch ``i`` waits until it is due, and its delay behind the
    schedule is recorded (``delays``: ``(due, delay_s)`` per step)."""
    import numpy as np
    from kafka import KafkaConsumer

    from pyflink_tensair.kafka.source import json_example
    from pyflink_tensair.models import zoo

    model = zoo.digits_cnn(learning_rate=LEARNING_RATE)
    consumer = KafkaConsumer(topic, bootstrap_servers=servers, auto_offset_reset="earliest", enable_auto_commit=False,
                             group_id=f"baseline-{time.time()}", consumer_timeout_ms=30000)
    pending, seen, steps, first, loss, delays, start = [], 0, 0, None, None, [], None
    try:
        for message in consumer:
            x, y = json_example(message.value.decode())
            pending.append((x, y))
            seen += 1
            if len(pending) == batch_size or seen == records:
                xs = np.asarray([p[0] for p in pending], dtype=np.float32)
                ys = np.asarray([p[1] for p in pending])
                if first is None:
                    model.train_on_batch(xs, ys)  # the first step builds and compiles: not timed
                    first = start = time.perf_counter()
                else:
                    due = None
                    if rate > 0:
                        due = start + steps * batch_size / rate
                        wait = due - time.perf_counter()  # read the clock once: a second read may be past due
                        if wait > 0:
                            time.sleep(wait)
                    loss = model.train_on_batch(xs, ys)
                    steps += 1
                    if due is not None:
                        delays.append((due, time.perf_counter() - due))
                pending = []
            if seen == records:
                break
    finally:
        consumer.close()
    elapsed = time.perf_counter() - first
    return {"records": seen, "records_per_s": steps * batch_size / elapsed, "final_loss": float(np.ravel(loss)[0]),
            "steps": steps, "delays": delays}


def ours(servers: str, topic: str, replicas: int, outdir: str, rate: float = 0.0) -> dict:
    """The image job from the topic; ``rate`` > 0 (records/s) paces its batches, and ``delays``
    are the trained batches' ``(scheduled, delay_s)`` from its metrics."""
    from pyflink_tensair.cli.progress import LinesFollower
    from pyflink_tensair.core.events import Metrics

    summary = run_job(IMAGES, ["--source", "kafka", "--bootstrap-servers", servers, "--topic", topic,
                               "--replicas", str(replicas), "--batch-size", str(BATCH_SIZE),
                               "--learning-rate", str(LEARNING_RATE), "--outdir", outdir, "--rate", str(rate / BATCH_SIZE)],
                      timeout=None, log=os.path.join(outdir, "job.log"))
    metrics = [m for m in LinesFollower(outdir, "metrics", Metrics.from_json).poll() if m.phase == "batch"]
    return {"records_per_s": summary["batches_per_s"] * BATCH_SIZE, "batches": summary["batches"],
            "holdout_accuracy": summary.get("holdout_accuracy"),
            "delays": [(m.time - m.delay_s, m.delay_s) for m in metrics if m.delay_s is not None]}


def in_job(records: int, replicas: int, outdir: str) -> dict:
    """The same image job with its batches made in the job (``batch_source``): what the replicas
    take when no record has to come in."""
    summary = run_job(IMAGES, ["--replicas", str(replicas), "--batch-size", str(BATCH_SIZE), "--batches",
                               str(-(-records // BATCH_SIZE)), "--learning-rate", str(LEARNING_RATE), "--outdir", outdir],
                      timeout=None, log=os.path.join(outdir, "job.log"))
    return {"records_per_s": summary["batches_per_s"] * BATCH_SIZE, "batches": summary["batches"],
            "holdout_accuracy": summary.get("holdout_accuracy")}


def sustainable_rate(run, batches: int, start: float, bisections: int) -> dict:
    """The highest records/s ``run(rate)`` keeps up with: the rate search and verdict of ``benchmarks run``."""
    from benchmarks.throughput.search import best_rate, search
    from benchmarks.throughput.verdict import judge

    def probe(rate):
        result = run(rate)
        verdict = judge(result["delays"], expected=batches)
        print(f"    {rate:.0f} records/s: {'sustainable' if verdict.sustainable else 'NOT sustainable'} "
              f"({verdict.reason})", flush=True)
        return verdict.sustainable, verdict.to_dict()

    probes = search(probe, start=start, bisections=bisections, max_rate=16384, min_rate=16)
    return {"records_per_s": best_rate(probes) or 0.0,
            "probes": [{"rate": p.rate, "sustainable": p.sustainable, **p.detail} for p in probes]}


def _paced(servers, topic, records, counts, repeats, start, bisections) -> dict:
    """Per repeat, the sustainable rate of the consumer and of ours at each replica count."""
    batches = -(-records // BATCH_SIZE)
    runs = {"baseline": []}
    runs.update({f"ours x{r}": [] for r in counts})
    for repeat in range(repeats):
        print(f"repeat {repeat + 1}: baseline", flush=True)
        runs["baseline"].append(sustainable_rate(
            lambda rate: consumer_baseline(servers, topic, records, rate=rate), batches - 1, start, bisections))  # step 0 is untimed
        for r in counts:
            print(f"repeat {repeat + 1}: ours x{r}", flush=True)

            def run_ours(rate, r=r):
                with tempfile.TemporaryDirectory(prefix="tensair-kafka-ours-") as outdir:
                    return ours(servers, topic, r, outdir, rate=rate)
            runs[f"ours x{r}"].append(sustainable_rate(run_ours, batches, start, bisections))
        print(f"repeat {repeat + 1}: " + ", ".join(f"{k} {v[-1]['records_per_s']:.0f} records/s sustained"
                                                   for k, v in runs.items()), flush=True)
    return runs


def _median(values):
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", help="a running broker (default: start one under --dir)")
    parser.add_argument("--dir", default=None, help="where to start a broker for the run (default: a temporary folder)")
    parser.add_argument("--records", type=int, default=6000, help="digits records in the topic (default: 6000, 4 passes)")
    parser.add_argument("--replicas", default="1,2", help="replica counts of ours (default: 1,2)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="write the figures here")
    parser.add_argument("--paced", action="store_true", help="sustainable rates by a rate search, not drain rates")
    parser.add_argument("--start-rate", type=float, default=400.0, help="--paced: the first probe, records/s (default 400)")
    parser.add_argument("--bisections", type=int, default=2, help="--paced: bisection steps (default 2)")
    parser.add_argument("--in-job", action="store_true",
                        help="against the same job with its batches made in the job (batch_source), not the consumer")
    args = parser.parse_args(argv)

    from pyflink_tensair.kafka import broker
    from pyflink_tensair.cli.produce import examples
    from pyflink_tensair.kafka.produce import produce

    folder = None
    servers = args.bootstrap_servers
    if servers is None:
        folder = args.dir or tempfile.mkdtemp(prefix="tensair-kafka-bench-")
        servers = broker.start(folder, port=19392)
    try:
        topic = f"bench-digits-{int(time.time())}"
        passes = -(-args.records // 1500)
        produce(servers, topic, examples("digits", passes=passes, limit=args.records), progress_every=30)
        counts = [int(r) for r in args.replicas.split(",")]
        if args.paced:
            runs = _paced(servers, topic, args.records, counts, args.repeats, args.start_rate, args.bisections)
        else:
            runs = {"baseline": []}
            runs.update({f"ours x{r}": [] for r in counts})
            runs.update({f"in-job x{r}": [] for r in counts} if args.in_job else {})
            for repeat in range(args.repeats):
                if not args.in_job:
                    runs["baseline"].append(consumer_baseline(servers, topic, args.records))
                for r in counts:
                    with tempfile.TemporaryDirectory(prefix="tensair-kafka-ours-") as outdir:
                        runs[f"ours x{r}"].append(ours(servers, topic, r, outdir))
                    if args.in_job:
                        with tempfile.TemporaryDirectory(prefix="tensair-in-job-") as outdir:
                            runs[f"in-job x{r}"].append(in_job(args.records, r, outdir))
                print(f"repeat {repeat + 1}: " + ", ".join(f"{k} {v[-1]['records_per_s']:.0f} records/s"
                                                           for k, v in runs.items() if v), flush=True)
        table = {name: _median([run["records_per_s"] for run in values]) for name, values in runs.items() if values}
        for r in counts if args.in_job else []:
            ratios = [o["records_per_s"] / b["records_per_s"] for o, b in zip(runs[f"ours x{r}"], runs[f"in-job x{r}"])]
            table[f"ours x{r} / in-job"] = {"median": round(statistics.median(ratios), 2),
                                            "min": round(min(ratios), 2), "max": round(max(ratios), 2)}
        for r in counts if not args.in_job else []:
            ratios = [o["records_per_s"] / b["records_per_s"] if b["records_per_s"] else 0.0
                      for o, b in zip(runs[f"ours x{r}"], runs["baseline"])]
            table[f"ours x{r} / baseline"] = {"median": round(statistics.median(ratios), 2),
                                              "min": round(min(ratios), 2), "max": round(max(ratios), 2)}
        print(json.dumps(table, indent=2))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"records": args.records, "batch_size": BATCH_SIZE, "paced": args.paced, "table": table,
                           "runs": runs}, f, indent=2)
    finally:
        if folder is not None:
            broker.stop(folder)


if __name__ == "__main__":
    main()
