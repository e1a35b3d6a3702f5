"""Candidates for the replica path, each against the plain loop measured beside it: a before/after table.

Every candidate is a set of ``probe_job.py`` arguments (joined with ``+``). For each repetition,
each candidate runs once unpaced (the source as fast as the job takes it: the figure is the most
the replicas train, not the sustainable rate the full benchmark searches for), right after the
machine's ceiling for the same replica count and pixels (``limit``: as many plain loops in as many
processes at once). The ratio of the two is the figure; its median and spread over repetitions
are printed with the per-batch profile of the candidate's replicas::

    python -m benchmarks.replica_path --workload dense --replicas 1 --repeats 3 --candidates no-trainer-thread,trainer-thread,trainer-thread+uint8
    python -m benchmarks.replica_path --workload sparse --replicas 2 --candidates no-trainer-thread,trainer-thread --batches 200
    python -m benchmarks.replica_path --workload dense --replicas 2 --candidates trainer-thread+jvm,trainer-thread+jvm+cluster
    python -m benchmarks.replica_path --workload sparse --replicas 1 --candidates jvm,single+jvm --batches 200

Profile per trained batch (from the replicas' metrics, first fifth left out): ``model`` inside the
model, ``codec`` decoding inputs and encoding outputs in the function, ``callback`` inside Flink's
callbacks in all (without a trainer thread the model is part of it), ``idle`` the trainer thread's
wait for work, ``outside`` the function thread's time between callbacks (Java, the crossings,
waiting for input). ``CPU ms per batch``: all the job's processes' CPU time per trained batch
over the same window, by kind (the JVM, the Python workers: trainer and host threads together;
with ``jvm`` the replicas' Python is inside the JVM's figure).

A candidate without ``jvm`` runs its replicas in Python worker processes (``processes``). The
part ``cluster`` submits the run with ``flink run`` to a standalone cluster of two TaskManagers
(one JVM each, slots spread evenly: one replica per TaskManager), started once for the whole
command and stopped at its end; without it a run is a local mini-cluster (one JVM).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Dict, List, Optional

CANDIDATES: Dict[str, List[str]] = {  # named as the probe's flags (TrainConfig's fields) say
    "no-trainer-thread": ["--no-trainer-thread"],  # each Flink callback trains before it returns
    "trainer-thread": ["--trainer-thread"],
    "own-process": ["--option", "python.fn-execution.memory.managed=false"],
    "uint8": ["--pixels", "uint8"],  # the dense workload's default since 2026-12-01
    "float32": ["--pixels", "float32"],
    "float16": ["--sparse-values", "float16"],  # sparse rows as half floats in gradient messages
    "jvm": ["--python-in", "jvm"],  # the replicas inside the TaskManager's JVM (PEMJA)
    "processes": ["--python-in", "processes"],  # the replicas in Python worker processes
    "source-jvm": ["--source-python-in", "jvm"],  # the batch source's make_batch in the JVM (default)
    "source-processes": ["--source-python-in", "processes"],  # ... in a Python worker (the default until 2026-12-01)
    "broadcast-2": ["--broadcast-every", "2"],  # a replica's gradients of 2 local steps summed into one message
    "broadcast-4": ["--broadcast-every", "4"],  # ... of 4
    "broadcast-8": ["--broadcast-every", "8"],  # ... of 8 (TensAIR's knob: fewer messages, staler peers)
    "unfused": ["--unfused-step"],  # compute, then apply, in two calls (before 2026-12-02); its limit too
    # the staleness bound (the later --system wins over the candidate runner's "dasgd")
    "bound-1": ["--system", "bounded", "--staleness-bound", "1"],
    "bound-2": ["--system", "bounded", "--staleness-bound", "2"],
    "bound-4": ["--system", "bounded", "--staleness-bound", "4"],
    "average-8": ["--peer-updates-average-every", "8"],  # periodic model averaging every 8 local steps
    # one Keras model trained with train_on_batch in one operator (the full benchmark's `single`):
    # with --replicas 1, the other ceiling of issue 27's "1 replica / max(limit, single)"
    "single": ["--system", "single"],
}
RENAMED = {"inline": "no-trainer-thread", "thread": "trainer-thread", "embedded": "jvm", "process": "processes",
           "source-embedded": "source-jvm", "source-process": "source-processes"}  # before TrainConfig.python_in


CLUSTER = "cluster"  # a candidate part that is not a probe_job argument: where the run is submitted


def on_cluster(name: str) -> bool:
    return CLUSTER in name.split("+")


def candidate_args(name: str) -> List[str]:
    renamed = [f"{part!r} is now {RENAMED[part]!r}" for part in name.split("+") if part in RENAMED]
    if renamed:
        raise SystemExit(f"renamed candidate parts in {name!r}: {', '.join(renamed)}")
    args = []
    for part in name.split("+"):
        if part == CLUSTER:
            continue
        if part not in CANDIDATES:
            raise SystemExit(f"unknown candidate part {part!r}; known: {', '.join([*CANDIDATES, CLUSTER])}")
        args += CANDIDATES[part]
    if "--unfused-step" in args and on_cluster(name):
        raise SystemExit("the candidate part 'unfused' is set in the client's environment: local runs only")
    if "--python-in" not in args:  # a candidate says where the replicas run, whatever the default
        args += CANDIDATES["processes"]
    return args


def profile(records) -> dict:
    """Milliseconds per trained batch, averaged over replicas, from cumulative metrics."""
    rows = []
    for replica in sorted({m.replica for m in records}):
        own = sorted((m for m in records if m.replica == replica), key=lambda m: m.time)
        own = own[len(own) // 5:]
        if len(own) < 2 or own[-1].local_step <= own[0].local_step:
            continue
        first, last = own[0], own[-1]
        steps = last.local_step - first.local_step

        def per_batch(field):
            a, b = getattr(first, field), getattr(last, field)
            return None if a is None or b is None else 1000 * (b - a) / steps

        wall = 1000 * (last.time - first.time) / steps
        callback = per_batch("callback_s")
        rows.append({"wall": wall, "model": per_batch("model_busy_s"), "codec": per_batch("codec_s"),
                     "callback": callback, "idle": per_batch("idle_s"),
                     "outside": None if callback is None else wall - callback})
    if not rows:
        return {}
    return {k: (round(statistics.mean(r[k] for r in rows), 1) if all(r[k] is not None for r in rows) else None)
            for k in rows[0]}


def _median_cpu(runs, kind: str) -> str:
    values = [r["cpu_ms_per_batch"].get(kind) for r in runs if r.get("cpu_ms_per_batch")]
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):.0f}" if values else "-"


def run_candidate(spec, workload: str, replicas: int, batches: int, args: List[str], cluster_dir: str = None) -> dict:
    """One unpaced run; with ``cluster_dir`` submitted to that standalone cluster (``flink run``)."""
    from benchmarks.throughput.run import _rate, _run_probe

    mode = "cluster" if cluster_dir else "local"
    result = _run_probe(spec, "dasgd", workload, replicas, 0.0, batches, mode, cluster_dir, extra=args)
    records = sorted(result["records"], key=lambda m: m.time)
    kept = records[len(records) // 5:]
    used = result["cpu"].seconds_between(kept[0].time, kept[-1].time)
    cpu = {kind: round(1000 * seconds / (len(kept) - 1), 1) for kind, seconds in used.items() if seconds > 0}
    losses = [m.loss for m in records[-max(1, len(records) // 5):] if m.loss is not None]
    return {"rate": _rate(kept), "profile": profile(records), "final_loss": sum(losses) / len(losses) if losses else None,
            "cpu_ms_per_batch": cpu, "wall_s": result["wall_s"], "steps_per_message": steps_per_message(records)}


def steps_per_message(records) -> Optional[float]:
    """Local steps per gradient message a replica sent (its broadcast period, on average), from
    each replica's last metrics record; ``None`` without peers."""
    last = {m.replica: m for m in sorted(records, key=lambda m: m.local_step)}
    sent = sum(m.gradient_messages_sent for m in last.values())
    return round(sum(m.local_step for m in last.values()) / sent, 2) if sent and len(last) > 1 else None


def run_ceiling(spec, workload: str, replicas: int, extra: List[str]) -> float:
    from benchmarks.throughput.run import run_limit

    return run_limit(spec, workload, replicas, extra=extra)["sustainable_rate"]


def _median_loss(done) -> str:
    losses = [r["final_loss"] for r in done if r.get("final_loss") is not None]
    return f"{statistics.median(losses):.4f}" if losses else "-"


def main(argv=None) -> int:
    from benchmarks.throughput.workloads import NAMES

    parser = argparse.ArgumentParser(prog="python -m benchmarks.replica_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=NAMES, default="dense")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--candidates", default="no-trainer-thread,trainer-thread",
                        help="comma-separated; parts joined with '+': " + ", ".join([*CANDIDATES, CLUSTER]))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, default=300, help="batches per candidate run")
    parser.add_argument("--results", default=os.path.join("benchmarks", "results", "replica_path.jsonl"))
    args = parser.parse_args(argv)
    from benchmarks.throughput.run import Spec, machine, start_cluster

    spec = Spec(limit_batches=max(60, args.batches // (3 * args.replicas)), probe_timeout_s=900)
    names = [n for n in args.candidates.split(",") if n]
    for name in names:
        candidate_args(name)  # fails early on a bad name
    runs: Dict[str, list] = {n: [] for n in names}
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    cluster_dir = start_cluster() if any(on_cluster(n) for n in names) else None
    try:
        for repeat in range(args.repeats):
            for name in names:
                extra = candidate_args(name)
                pixels = [a for i, a in enumerate(extra) if a == "--pixels" or (i and extra[i - 1] == "--pixels")]
                step = [a for a in extra if a == "--unfused-step"]  # the ceiling runs the candidate's step
                limit = run_ceiling(spec, args.workload, args.replicas, pixels + step)
                got = run_candidate(spec, args.workload, args.replicas, args.batches, extra,
                                    cluster_dir if on_cluster(name) else None)
                got.update(limit=limit, ratio=got["rate"] / limit if got["rate"] and limit else None, repeat=repeat)
                runs[name].append(got)
                print(f"[{repeat + 1}/{args.repeats}] {name}: {got['rate']:.2f} batches/s, limit {limit:.2f}, "
                      f"ratio {got['ratio']:.2f}; per batch (ms) {json.dumps(got['profile'])}; "
                      f"CPU per batch (ms) {json.dumps(got['cpu_ms_per_batch'])}; final loss {got['final_loss']}; "
                      f"steps per message {got['steps_per_message']}", flush=True)
    finally:
        if cluster_dir:
            from pyflink_tensair import cluster

            cluster.stop(cluster_dir)
    print(f"\n{args.workload}, {args.replicas} replica(s), {args.repeats} repetitions, {args.batches} batches per run, "
          f"started {started}\n")
    print("| candidate | probe_job arguments | batches/s (median, range) | limit | ratio (median, range) | "
          "per batch ms: wall / model / codec / callback / idle / outside | CPU ms per batch: JVM / Python workers | "
          "loss, last fifth |")
    print("|---|---|---|---|---|---|---|---|")
    summary = []
    for name in names:
        done = [r for r in runs[name] if r["ratio"]]
        if not done:
            continue
        rates, limits, ratios = ([r[k] for r in done] for k in ("rate", "limit", "ratio"))
        prof = {k: statistics.median(r["profile"][k] for r in done) if all(r["profile"].get(k) is not None for r in done)
                else None for k in done[0]["profile"]}
        cells = " / ".join("-" if prof.get(k) is None else f"{prof[k]:.0f}"
                           for k in ("wall", "model", "codec", "callback", "idle", "outside"))
        print(f"| {name} | `{' '.join(candidate_args(name))}` | {statistics.median(rates):.2f} ({min(rates):.2f}-{max(rates):.2f}) | "
              f"{statistics.median(limits):.2f} | {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {cells} | "
              f"{_median_cpu(done, 'jvm')} / {_median_cpu(done, 'python_worker')} | {_median_loss(done)} |")
        summary.append({"candidate": name, "args": candidate_args(name), "workload": args.workload,
                        "replicas": args.replicas, "mode": "cluster" if on_cluster(name) else "local", "batches": args.batches, "runs": runs[name], "started": started,
                        "machine": machine()})
    os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
    with open(args.results, "a") as f:
        for record in summary:
            f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
