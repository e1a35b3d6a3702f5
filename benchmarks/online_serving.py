"""Serving figures of the online loop (issue 26): throughput of ``serve`` against a plain
``predict_on_batch`` loop, freshness of the served model, event-to-prediction latency.

    python -m benchmarks.online_serving                 # 3 repeats of each run, medians and spread
    python -m benchmarks.online_serving --repeats 1 --events 5000

Runs, each in its own process and local mini-cluster (one server, micro-batches of 64, the
quickstart classifier):
- ``plain``: the same events parsed, stacked and answered by ``model.predict_on_batch`` in a loop.
- ``serve``: ``serve`` of a frozen model over events from a collection, as fast as it takes them;
  events/s from the first to the last answer (the job's start-up left out).
- ``serve_training``: the same while two replicas train beside it (20 batches/s) and publish
  updates every 200 ms, which the server applies.
- ``fresh``: events paced at ``--paced-rate`` per second while the replicas train; freshness (a
  training step to its first served prediction) and latency (an event's creation to its answer),
  the first ``--settle-s`` seconds of answers left out.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import subprocess
import sys
import time

import numpy as np

FEATURES, CLASSES, BATCH = 20, 4, 64


def _event(i: int, created_ms: float = 0.0) -> str:
    x = np.random.default_rng([7, i]).normal(size=FEATURES).round(4).tolist()
    return json.dumps({"id": f"{i}:{created_ms:.1f}", "x": x})


class _PacedEvent:
    def __init__(self, rate: float):
        self._rate, self._start = rate, None

    def __call__(self, i: int) -> str:
        if self._start is None:
            self._start = time.time()
        wait = self._start + i / self._rate - time.time()
        if wait > 0:
            time.sleep(wait)
        return _event(i, time.time() * 1000.0)


def run_plain(events: int) -> dict:
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import configure_tensorflow_threads
    from pyflink_tensair.online.serving import json_event

    configure_tensorflow_threads(1, None)
    model = zoo.quickstart_classifier(features=FEATURES, classes=CLASSES)
    texts = [_event(i) for i in range(events)]
    model.predict_on_batch(np.zeros((BATCH, FEATURES), np.float32))  # traced before the clock starts
    began = time.perf_counter()
    for start in range(0, events, BATCH):
        parsed = [json_event(t) for t in texts[start:start + BATCH]]
        model.predict_on_batch(np.stack([np.asarray(x, np.float32) for _, x in parsed]))
    return {"events_per_s": events / (time.perf_counter() - began)}


def _training(env):
    from pyflink_tensair import ModelUpdates, TrainConfig, batch_source, train
    from pyflink_tensair.datasets.teacher import teacher_classification_batch
    from pyflink_tensair.models import zoo

    make = functools.partial(teacher_classification_batch, batch_size=32, features=FEATURES, classes=CLASSES, seed=0)
    return train(batch_source(env, 100_000, make, rate=20), model=zoo.quickstart_classifier,
                 config=TrainConfig(replicas=2, updates=ModelUpdates(every_ms=200)))


def run_flink(kind: str, events: int, paced_rate: float, settle_s: float, python_in: str) -> dict:
    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import ServeConfig, serve
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.flink.sources import number_sequence
    from pyflink_tensair.models import zoo

    env = StreamExecutionEnvironment.get_execution_environment()
    config = ServeConfig(batch_size=BATCH, python_in=python_in)
    if kind == "fresh":
        texts = number_sequence(env, 0, events - 1, name="events", uid="events").map(
            _PacedEvent(paced_rate), output_type=Types.STRING())
    else:
        texts = env.from_collection([_event(i) for i in range(events)], type_info=Types.STRING())
    training = _training(env) if kind in ("serve_training", "fresh") else None
    served = serve(texts, training, model=zoo.quickstart_classifier, config=config)
    folder = os.path.join("/tmp", f"online-serving-{os.getpid()}")
    os.makedirs(folder, exist_ok=True)
    write_json_lines(served.freshness, folder, "freshness").set_parallelism(1)
    answered = []
    with served.predictions.execute_and_collect() as rows:
        for row in rows:
            answered.append((row.served_at_ms, float(row.key.split(":")[1])))
            if len(answered) == events:
                break
    served_at = np.array([a for a, _ in answered], np.float64)
    out = {"events": len(answered)}
    if kind != "fresh":
        out["events_per_s"] = (len(served_at) - 1) / max(1e-3, (served_at.max() - served_at.min()) / 1000.0)
        return out
    first = served_at.min() + settle_s * 1000.0
    latency = np.array([a - c for a, c in answered if a >= first])
    fresh = []
    for name in os.listdir(folder):
        for line in open(os.path.join(folder, name)):
            record = json.loads(line)
            if record["served_at_ms"] >= first:
                fresh += record["freshness_ms"]
    out.update(latency_ms_p50=float(np.percentile(latency, 50)), latency_ms_p99=float(np.percentile(latency, 99)),
               freshness_ms_p50=float(np.percentile(fresh, 50)) if fresh else None,
               freshness_ms_p99=float(np.percentile(fresh, 99)) if fresh else None, freshness_steps=len(fresh))
    return out


def _one(args) -> dict:
    if args.one == "plain":
        return run_plain(args.events)
    return run_flink(args.one, args.events if args.one != "fresh" else int(args.paced_rate * args.paced_s),
                     args.paced_rate, args.settle_s, args.python_in)


def _run_one(command, env) -> "str | None":
    """Runs one ``--one`` process, returns its RESULT line, then stops its process tree by PID
    (its mini-cluster's JVM and Python workers included)."""
    from pyflink_tensair.processes import kill, tree

    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    found, tail = None, collections.deque(maxlen=40)
    try:
        for line in child.stdout:
            tail.append(line)
            if line.startswith("RESULT "):
                found = line.strip()
                break
        if found is None:
            print("".join(tail), end="", file=sys.stderr)
    finally:
        kill(tree([child.pid]))
        child.wait()
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.online_serving", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="events of the throughput runs (default 20000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paced-rate", type=float, default=100.0, help="events/s of the freshness run (default 100)")
    parser.add_argument("--paced-s", type=float, default=40.0, help="seconds of paced events (default 40)")
    parser.add_argument("--settle-s", type=float, default=10.0, help="answers left out at the start (default 10 s)")
    parser.add_argument("--python-in", choices=("jvm", "processes"), default="jvm")
    parser.add_argument("--runs", default="plain,serve,serve_training,fresh")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(_one(args)), flush=True)
        time.sleep(3600)  # a run with training never ends by itself: the driver stops this process tree
        return 0
    from pyflink_tensair.cluster import client_environment

    results = {}
    for repeat in range(args.repeats):
        for kind in args.runs.split(","):  # in turn, so that a noisy minute hits every run alike
            command = [sys.executable, "-m", "benchmarks.online_serving", "--one", kind,
                       *(sys.argv[1:] if argv is None else argv)]
            result_line = _run_one(command, client_environment())
            if result_line is None:
                print(f"{kind}: failed (see the log above)", file=sys.stderr)
                return 1
            result = json.loads(result_line[len("RESULT "):])
            results.setdefault(kind, []).append(result)
            print(f"repeat {repeat + 1} {kind}: {json.dumps(result)}", flush=True)

    def median(kind, key):
        values = [r[key] for r in results.get(kind, []) if r.get(key) is not None]
        return (float(np.median(values)), float(min(values)), float(max(values))) if values else None

    summary = {f"{kind}.{key}": median(kind, key) for kind in results for key in results[kind][0] if key != "events"}
    for kind in ("serve", "serve_training"):
        ratios = [s["events_per_s"] / p["events_per_s"] for s, p in zip(results.get(kind, []), results.get("plain", []))]
        if ratios:
            summary[f"{kind}/plain"] = (float(np.median(ratios)), float(min(ratios)), float(max(ratios)))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
