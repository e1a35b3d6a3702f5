"""Records into replicas: examples/s of a logistic regression trained from each input path a user
takes (Rows, JSON text, the README's Python tuples, a Kafka topic) against the same replicas fed by
batches made in the job (``batch_source``, their ceiling), in the same run.

    python -m benchmarks.ingestion --repeats 3 --json runs/ingestion.json          # about 15 minutes
    python -m benchmarks.ingestion --paths tuples --examples 6144 --python OLD/.venv/bin/python

Each repeat runs every path once for each replica count and batch size, one job at a time
(benchmarks/ingestion_job.py, a local mini-cluster in its own process); the ratio to
``batch_source`` is taken within a repeat, so the machine's drift between repeats cancels. Prints
and writes medians with their spread: rows ``{system, input, replicas, batch_size,
examples_per_s, heldout_accuracy}`` as ``benchmarks.peers`` writes them, plus ``ratio_to_batch_source``.
``kafka`` needs a broker: ``--bootstrap-servers``, or one is started for the run and stopped after.
``--python``: the interpreter of the jobs (another checkout's, to measure its code on the same stream).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from benchmarks.jobrun import run_job

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ingestion_job.py")
PATHS = ("batch_source", "rows", "json", "tuples", "kafka")


def spread(values) -> dict:
    """``{median, min, max}`` of ``values``."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _fill_topic(servers: str, examples: int) -> str:
    from benchmarks.ingestion_job import linear_examples
    from pyflink_tensair.kafka.produce import produce

    topic = f"ingestion-{int(time.time())}"
    x, y = linear_examples(examples)
    produce(servers, topic, zip(x, y), progress_every=30)
    return topic


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated of {', '.join(PATHS)}")
    parser.add_argument("--replicas", default="1,2", help="comma-separated replica counts (default 1,2)")
    parser.add_argument("--batch-sizes", default="64", help="comma-separated global batch sizes (default 64)")
    parser.add_argument("--examples", type=int, default=249_600, help="examples in the stream (default 249,600)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python", default=sys.executable, help="the jobs' interpreter (default this one)")
    parser.add_argument("--bootstrap-servers", help="kafka: a running broker (default: start one for the run)")
    parser.add_argument("--json", help="write the rows and every run here")
    args = parser.parse_args(argv)
    paths = args.paths.split(",")
    if not set(paths) <= set(PATHS):
        parser.error(f"--paths takes {', '.join(PATHS)}; received {args.paths}")
    counts = [int(r) for r in args.replicas.split(",")]
    sizes = [int(b) for b in args.batch_sizes.split(",")]

    from pyflink_tensair.cluster import client_environment
    from pyflink_tensair.kafka import broker

    folder, servers, topic = None, args.bootstrap_servers, None
    if "kafka" in paths:
        if servers is None:
            folder = tempfile.mkdtemp(prefix="tensair-kafka-ingestion-")
            servers = broker.start(folder, port=19492)
        topic = _fill_topic(servers, args.examples)
    runs: dict = {}
    try:
        for repeat in range(args.repeats):
            for replicas in counts:
                for size in sizes:
                    for path in paths:
                        extra = ["--bootstrap-servers", servers, "--topic", topic] if path == "kafka" else []
                        summary = run_job(JOB, ["--path", path, "--replicas", str(replicas), "--batch-size", str(size),
                                                "--examples", str(args.examples), *extra],
                                          timeout=3600, env=client_environment(), python=args.python)
                        runs.setdefault((path, replicas, size), []).append(summary)
                        print(f"repeat {repeat + 1}: {path} x{replicas} batch {size}: "
                              f"{summary['examples_per_s']:,.0f} examples/s, held-out accuracy "
                              f"{summary['heldout_accuracy']:.3f}", flush=True)
    finally:
        if folder is not None:
            broker.stop(folder)
    rows = []
    for (path, replicas, size), summaries in runs.items():
        row = {"system": "pyflink_tensair", "input": path, "replicas": replicas, "batch_size": size,
               "examples_per_s": spread([s["examples_per_s"] for s in summaries]),
               "heldout_accuracy": spread([s["heldout_accuracy"] for s in summaries])}
        ceiling = runs.get(("batch_source", replicas, size))
        if ceiling is not None and path != "batch_source":
            row["ratio_to_batch_source"] = spread([s["examples_per_s"] / c["examples_per_s"]
                                                    for s, c in zip(summaries, ceiling)])
        rows.append(row)
    print(f"{'input':>13} {'replicas':>8} {'batch':>6} {'examples/s median [min, max]':>34} {'/ batch_source':>22} {'accuracy':>9}")
    for row in rows:
        rate, ratio = row["examples_per_s"], row.get("ratio_to_batch_source")
        print(f"{row['input']:>13} {row['replicas']:>8} {row['batch_size']:>6} "
              f"{rate['median']:>12,.0f} [{rate['min']:,.0f}, {rate['max']:,.0f}]".ljust(70)
              + (f"{ratio['median']:.2f} [{ratio['min']:.2f}, {ratio['max']:.2f}]" if ratio else "").rjust(22)
              + f" {row['heldout_accuracy']['median']:>9.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"examples": args.examples, "python": args.python, "rows": rows,
                       "runs": [{"input": k[0], "replicas": k[1], "batch_size": k[2], "summaries": v}
                                for k, v in runs.items()]}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
