"""Serving figures of the online loop (issue 26): throughput of ``serve`` against a plain
``predict_on_batch`` loop, freshness of the served model, event-to-prediction latency.

    python -m benchmarks.online_serving                 # 3 repeats of each run, medians and spread
    python -m benchmarks.online_serving --repeats 1 --events 50000

Runs, each in its own process and local mini-cluster (one server, micro-batches of 64, the
quickstart classifier):
- ``plain``: the same events parsed, stacked and answered by ``model.predict_on_batch`` in a loop.
- ``plain_compiled``: the same loop answered by the model's forward pass traced once
  (``KerasModelAdapter.predict_function``, what the servers call): the leaner ceiling.
- ``serve``: ``serve`` of a frozen model over events from a collection, as fast as it takes them;
  events/s from the first to the last answer (the job's start-up left out). The predictions are
  written to a file on the JVM (``write_json_lines``), as a job would hand them to Kafka: no
  per-row crossing into Python behind the servers.
- ``serve_training``: the same while two replicas train beside it (20 batches/s) and publish
  updates every 200 ms, which the server applies.
- ``fresh``: events paced at half the rate ``serve_training`` sustained in the same repeat (or
  ``--paced-rate``) while the replicas train; freshness (a training step to its first served
  prediction) and latency (an event's creation to its answer), the first ``--settle-s`` seconds
  of answers left out.
- ``fresh_sparse`` (not in the default runs): ``fresh`` with a model that embeds 8 ids out of
  10,000 (its updates carry the table's changed rows only), events of ids at ``--paced-rate``
  (default 2,000/s).
- ``udf`` (not in the default runs): the same training writes its updates to a folder, and
  ``tensair_predict`` (:mod:`pyflink_tensair.online.udf`) answers a datagen table's rows in SQL
  while following it: the freshness of the SQL path (the run lasts ``--paced-s`` + ``--settle-s``
  + 40 s of start-up; the first ``--settle-s`` s after its first update used are left out).

The events of the Flink runs are made on the JVM (:mod:`pyflink_tensair.online.synthetic`), the
plain loop's in Python in the same format. Each run reports events/s and events per CPU second
of the job's processes (every thread of the mini-cluster's JVM and its Python workers, not the
driver that counts the answers; the plain loop's own) over its steady part (a Flink run's from the
answer to a tenth of the events to the answer to nine tenths; the plain loop's whole loop, its
model traced before the clock), so that ``serve/plain per core`` is the cost of
an event in Flink against the plain loop's. With training beside it, the trainers' CPU is in that figure too.
``serve/plain per serving core`` leaves out the CPU of the harness's two JVM threads (by their
Java names): the source that makes the events (the plain loop's texts are made before its clock)
and the sink that writes each prediction as a JSON line (the plain loop writes nothing); the
servers' grouping, parsing, Python, TensorFlow, rows and their hand-off to the sink stay in.
"""

from __future__ import annotations

import argparse
import collections
import functools
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

FEATURES, CLASSES, BATCH = 20, 4, 64


def _event(i: int) -> str:
    """Event ``i`` as the JVM's ``SyntheticEvents`` writes it (the same format and length; other draws)."""
    x = np.random.default_rng([7, i]).normal(size=FEATURES)
    return '{"id":"%d:%d","x":[%s]}' % (i, 1764000000000 + i, ",".join("%.4f" % v for v in x))


def run_plain(events: int, compiled: bool = False) -> dict:
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, configure_tensorflow_threads
    from pyflink_tensair.online.serving import json_event

    configure_tensorflow_threads(1, None)
    model = zoo.quickstart_classifier(features=FEATURES, classes=CLASSES)
    predict = KerasModelAdapter(model).predict_function() if compiled else model.predict_on_batch
    texts = [_event(i) for i in range(events)]
    predict(np.zeros((BATCH, FEATURES), np.float32))  # traced before the clock starts
    began, cpu = time.perf_counter(), _cpu_s()
    for start in range(0, events, BATCH):
        parsed = [json_event(t) for t in texts[start:start + BATCH]]
        predict(np.stack([np.asarray(x, np.float32) for _, x in parsed]))
    return {"events_per_s": events / (time.perf_counter() - began), "events_per_cpu_s": events / (_cpu_s() - cpu)}


HARNESS_THREADS = ("Source: synthetic events", "tensair: write predictions")  # Java names' prefixes


def _java_children() -> list:
    import psutil

    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.name() == "java":
                found.append(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return found


def _jvm_thread_cpu() -> dict:
    """``{(pid, tid): CPU seconds}`` of every thread of this process's JVM children."""
    from benchmarks.thread_cpu import thread_cpu

    return {(pid, tid): cpu for pid in _java_children() for tid, (_, cpu) in thread_cpu(pid).items()}


def _jvm_thread_names() -> dict:
    """``{(pid, tid): Java thread name}`` of this process's JVM children (``jcmd``: empty without it)."""
    from benchmarks.thread_cpu import java_thread_names

    return {(pid, tid): name for pid in _java_children() for tid, name in java_thread_names(pid).items()}


def _harness_cpu_s(names: dict, before: dict, after: dict) -> "float | None":
    """CPU seconds between two :func:`_jvm_thread_cpu` samples of the threads whose Java name
    starts with one of :data:`HARNESS_THREADS` (the benchmark's event source and predictions
    writer; ``names`` from :func:`_jvm_thread_names` at both ends), or ``None`` unless each of
    them was sampled at both ends (a thread that ended in between, no ``jcmd``)."""
    harness = {key for key, name in names.items() if name.startswith(HARNESS_THREADS)}
    named = {prefix for key in harness for prefix in HARNESS_THREADS if names[key].startswith(prefix)}
    if named != set(HARNESS_THREADS) or not harness <= set(before) & set(after):
        return None
    return sum(after[key] - before[key] for key in harness)


def _cpu_s(children_only: bool = False) -> float:
    """CPU seconds of this process (unless ``children_only``) and all its children (a local
    mini-cluster's JVM, its Python workers; a child that exits between two samples is lost, none
    of these does)."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for proc in ([] if children_only else [me]) + me.children(recursive=True):
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


VOCABULARY, IDS = 10_000, 8  # the sparse model: a bag of 8 ids out of 10,000 embedded in 32 dimensions


def _sparse_batch(index: int):
    """A batch of the sparse model: 32 rows of 8 ids, label = the parity of the first id."""
    from pyflink_tensair import Batch

    ids = np.random.default_rng([11, index]).integers(0, VOCABULARY, size=(32, IDS)).astype(np.int32)
    return Batch(ids, (ids[:, 0] % 2).astype(np.int64))


def _sparse_model():
    from pyflink_tensair.models import zoo

    return zoo.embedding_classifier(vocabulary=VOCABULARY, dim=32, length=IDS, classes=2)


def _training(env, sparse: bool = False):
    from pyflink_tensair import ModelUpdates, TrainConfig, batch_source, train
    from pyflink_tensair.datasets.teacher import teacher_classification_batch
    from pyflink_tensair.models import zoo

    if sparse:
        make, model = _sparse_batch, _sparse_model
    else:
        make = functools.partial(teacher_classification_batch, batch_size=32, features=FEATURES, classes=CLASSES,
                                 seed=0)
        model = zoo.quickstart_classifier
    return train(batch_source(env, 100_000, make, rate=20), model=model,
                 config=TrainConfig(replicas=2, updates=ModelUpdates(every_ms=200)))


def run_udf(rate: float, run_s: float, settle_s: float) -> dict:
    """Freshness of the SQL path: a training job writes its updates to a folder; a pandas UDF
    (``tensair_predict``) over a datagen table at ``rate`` rows/s follows the folder."""
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    from pyflink_tensair.flink.sinks import write_json_lines, write_records
    from pyflink_tensair.models import zoo
    from pyflink_tensair.online.udf import predict_function

    folder = os.path.join("/tmp", f"online-serving-udf-{os.getpid()}")
    os.makedirs(folder, exist_ok=True)
    env = StreamExecutionEnvironment.get_execution_environment()
    write_records(_training(env).updates, folder, "update").set_parallelism(1)
    t_env = StreamTableEnvironment.create(env)
    names = [f"f{j}" for j in range(FEATURES)]
    t_env.execute_sql(f"CREATE TABLE events ({', '.join(n + ' DOUBLE' for n in names)}) WITH ("
                      f"'connector' = 'datagen', 'rows-per-second' = '{rate:.0f}')")
    t_env.create_temporary_function("tensair_predict", predict_function(
        zoo.quickstart_classifier, features=FEATURES, updates_folder=folder, freshness_folder=folder))
    answers = t_env.sql_query(f"SELECT tensair_predict({', '.join(names)}) AS p FROM events")
    write_json_lines(t_env.to_data_stream(answers), folder, "answers").set_parallelism(1)
    env.execute_async("online serving, SQL function")
    time.sleep(run_s)  # a run that never ends by itself: measured over a fixed time
    fresh, first = [], None
    for path in glob.glob(os.path.join(folder, "udf-freshness-*.jsonl")):
        for record in (json.loads(line) for line in open(path)):
            first = record["served_at_ms"] if first is None else min(first, record["served_at_ms"])
    for path in glob.glob(os.path.join(folder, "udf-freshness-*.jsonl")):
        for record in (json.loads(line) for line in open(path)):
            if first is not None and record["served_at_ms"] >= first + settle_s * 1000.0:
                fresh += record["freshness_ms"]
    return {"freshness_ms_p50": float(np.percentile(fresh, 50)) if fresh else None,
            "freshness_ms_p99": float(np.percentile(fresh, 99)) if fresh else None, "freshness_steps": len(fresh)}


def run_flink(kind: str, events: int, paced_rate: float, settle_s: float, python_in: str) -> dict:
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import ServeConfig, serve
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.models import zoo
    from pyflink_tensair.online.synthetic import synthetic_events
    from pyflink_tensair.waiting import wait_until

    env = StreamExecutionEnvironment.get_execution_environment()
    config = ServeConfig(batch_size=BATCH, python_in=python_in)
    paced = kind.startswith("fresh")
    sparse = kind == "fresh_sparse"
    texts = synthetic_events(env, events, features=IDS if sparse else FEATURES, rate=paced_rate if paced else None,
                             ids_below=VOCABULARY if sparse else None)
    training = _training(env, sparse) if kind in ("serve_training", "fresh", "fresh_sparse") else None
    served = serve(texts, training, model=_sparse_model if sparse else zoo.quickstart_classifier, config=config)
    folder = os.path.join("/tmp", f"online-serving-{os.getpid()}")
    os.makedirs(folder, exist_ok=True)
    write_json_lines(served.freshness, folder, "freshness").set_parallelism(1)
    # written on the JVM, so that no per-row crossing into this process slows the servers down
    write_json_lines(served.predictions, folder, "predictions").set_parallelism(1).disable_chaining()
    env.execute_async("online serving")
    path = os.path.join(folder, "predictions-0.jsonl")

    seen = {"offset": 0, "lines": 0}

    def lines():  # counts only what was appended since the last call: the driver stays light
        if os.path.exists(path):
            with open(path, "rb") as f:
                f.seek(seen["offset"])
                chunk = f.read()
            seen["offset"] += len(chunk)
            seen["lines"] += chunk.count(b"\n")
        return seen["lines"]

    # CPU of the whole job (every thread of the JVM and its Python workers) over the steady part of
    # the run: from the answer to a tenth of the events (start-up and warm-up before it) to the last
    steady = events // 10 if not paced else 0
    names = {}
    if not paced:  # the threads' names (jcmd costs some CPU: before the window, and after it)
        wait_until(lambda: lines() >= events // 20, timeout_s=600, interval_s=0.05, what=f"{events // 20} predictions")
        names = _jvm_thread_names()
    wait_until(lambda: lines() >= steady, timeout_s=600, interval_s=0.05, what=f"{steady} predictions")
    # to nine tenths of them: the source's thread ends once it has made every event, and with it its CPU figure
    threads_from, cpu_from, lines_from = _jvm_thread_cpu(), _cpu_s(children_only=True), lines()
    until = events - steady  # (paced: steady is 0)
    wait_until(lambda: lines() >= until, timeout_s=600, interval_s=0.05, what=f"{until} predictions")
    cpu, threads, counted = _cpu_s(children_only=True) - cpu_from, _jvm_thread_cpu(), max(1, lines() - lines_from)
    harness = None
    if not paced:  # threads named alike at both ends
        ended = _jvm_thread_names()
        harness = _harness_cpu_s({key: name for key, name in names.items() if ended.get(key) == name},
                                 threads_from, threads)
    wait_until(lambda: lines() >= events, timeout_s=600, interval_s=0.05, what=f"{events} predictions")
    answered = []
    with open(path) as f:
        for line, _ in zip(f, range(events)):  # complete lines only: the sink may be writing the next
            row = json.loads(line)
            answered.append((row["served_at_ms"], float(row["key"].split(":")[1]), row["model_version"]))
    served_at = np.array([a for a, _, _ in answered], np.float64)
    out = {"events": len(answered)}
    if not paced:
        # events/s over the CPU's window too: jcmd at its end costs the last tenth some CPU
        served_at = np.sort(served_at)[steady:until]
        out["events_per_s"] = (len(served_at) - 1) / max(1e-3, (served_at[-1] - served_at[0]) / 1000.0)
        out["events_per_cpu_s"] = counted / cpu
        if harness is not None and cpu > harness:
            out["events_per_serving_cpu_s"] = counted / (cpu - harness)
            out["harness_cpu_share"] = harness / cpu
        return out
    first = served_at.min() + settle_s * 1000.0
    latency = np.array([a - c for a, c, _ in answered if a >= first])
    fresh, steps = [], []
    with open(os.path.join(folder, "freshness-0.jsonl")) as f:
        records = [json.loads(line) for line in f.read().splitlines(keepends=True) if line.endswith("\n")]
    for record in records:  # complete lines only
        steps += [(record["served_at_ms"] - f, v) for f, v in zip(record["freshness_ms"], record["step_versions"])]
        if record["served_at_ms"] >= first:
            fresh += record["freshness_ms"]
    out.update(latency_ms_p50=float(np.percentile(latency, 50)), latency_ms_p99=float(np.percentile(latency, 99)),
               freshness_ms_p50=float(np.percentile(fresh, 50)) if fresh else None,
               freshness_ms_p99=float(np.percentile(fresh, 99)) if fresh else None, freshness_steps=len(fresh))
    behind = versions_behind(steps, [(a, v) for a, _, v in answered if a >= first])
    if len(behind):
        out.update(versions_behind_p50=float(np.percentile(behind, 50)),
                   versions_behind_p99=float(np.percentile(behind, 99)))
    return out


def versions_behind(steps, answers) -> np.ndarray:
    """For each answer ``(served_at_ms, model_version)``, how many model versions the trainer had
    made by then that the answer's model did not hold: the newest version among ``steps``
    (``(made_at_ms, version)`` of every training step a server received) made up to
    ``served_at_ms``, less the version that answered (0 at the least).

        >>> versions_behind([(10.0, 1), (20.0, 2), (30.0, 3)], [(25.0, 1), (35.0, 3), (5.0, 0)]).tolist()
        [1, 0, 0]
    """
    if not steps or not answers:
        return np.zeros(0, np.int64)
    steps = sorted(steps)
    made_at = np.array([t for t, _ in steps])
    newest = np.maximum.accumulate(np.array([v for _, v in steps], np.int64))
    at = np.searchsorted(made_at, np.array([a for a, _ in answers]), side="right") - 1
    held = np.where(at >= 0, newest[np.maximum(at, 0)], 0)
    return np.maximum(0, held - np.array([v for _, v in answers], np.int64))


def _one(args) -> dict:
    if args.one in ("plain", "plain_compiled"):
        return run_plain(args.events, compiled=args.one == "plain_compiled")
    if args.one == "udf":
        return run_udf(args.paced_rate or 1000.0, args.paced_s + args.settle_s + 40.0, args.settle_s)
    if args.one == "fresh_sparse" and args.paced_rate is None:
        args.paced_rate = 2000.0
    return run_flink(args.one, args.events if not args.one.startswith("fresh") else int(args.paced_rate * args.paced_s),
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
    # a million: with 100,000 the steady part lasted 2 s, in the JIT compilers' warm-up (serve/plain
    # 0.78 against 0.98 with a million, docs/measurements.md 2026-12-06)
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the throughput runs (default 1000000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paced-rate", type=float, default=None,
                        help="events/s of the freshness run (default: half the rate serve_training sustained "
                             "in the same repeat)")
    parser.add_argument("--paced-s", type=float, default=30.0, help="seconds of paced events (default 30)")
    parser.add_argument("--settle-s", type=float, default=10.0, help="answers left out at the start (default 10 s)")
    parser.add_argument("--python-in", choices=("jvm", "processes"), default="jvm")
    parser.add_argument("--runs", default="plain,plain_compiled,serve,serve_training,fresh",
                        help="of plain, plain_compiled, serve, serve_training, fresh, fresh_sparse (embedding deltas, "
                             "--paced-rate default 2000), udf (the SQL function's freshness, --paced-rate "
                             "rows/s, default 1000)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        from pyflink_tensair.processes import kill, tree

        try:
            print("RESULT " + json.dumps(_one(args)), flush=True)
        finally:  # a failed run's mini-cluster would outlive it, adopted by init, and load the next runs
            if sys.exc_info()[0] is not None:
                kill(tree([os.getpid()])[1:])
        time.sleep(3600)  # a run with training never ends by itself: the driver stops this process tree
        return 0
    from pyflink_tensair.cluster import client_environment

    results = {}
    for repeat in range(args.repeats):
        for kind in args.runs.split(","):  # in turn, so that a noisy minute hits every run alike
            extra = []
            if kind == "fresh" and args.paced_rate is None:  # (udf: 1000 rows/s unless given)
                sustained = results.get("serve_training", results.get("serve", [{}]))[-1].get("events_per_s")
                if sustained is None:
                    print("fresh: give --paced-rate, or run serve_training before it", file=sys.stderr)
                    return 2
                extra = ["--paced-rate", f"{sustained / 2:.0f}"]
            command = [sys.executable, "-m", "benchmarks.online_serving", "--one", kind,
                       *(sys.argv[1:] if argv is None else argv), *extra]
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
        for plain in ("plain", "plain_compiled"):
            for key, label in (("events_per_s", ""), ("events_per_cpu_s", " per core"),
                               ("events_per_serving_cpu_s", " per serving core")):
                ratios = [s[key] / p[key.replace("serving_", "")]
                          for s, p in zip(results.get(kind, []), results.get(plain, [])) if key in s]
                if ratios:
                    summary[f"{kind}/{plain}{label}"] = (float(np.median(ratios)), float(min(ratios)),
                                                         float(max(ratios)))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
