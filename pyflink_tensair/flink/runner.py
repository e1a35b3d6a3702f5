"""What every job in ``jobs/`` shares: its flags, progress lines while it runs, the summary after.

A job builds its batches stream, calls :func:`~pyflink_tensair.flink.train.train`, then hands the
output to :func:`run_job`, which writes metrics and final models under ``--outdir``, starts the job,
prints a progress line every few seconds from those files, and writes the ``--summary`` JSON.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
import time
from typing import Dict, List, Optional

from ..config import LatencySettings, TrainConfig, WorkerMode
from ..core.events import Metrics
from ..core.simulation import max_weight_diff
from .sinks import write_json_lines, write_records
from .types import decode_final_model

def parse_staleness(text: str) -> Optional[int]:
    """``"none"`` -> ``None`` (unbounded DASGD); otherwise an int >= 0."""
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--staleness must be an int >= 0 or 'none', got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--staleness must be an int >= 0 or 'none', got {text!r}")
    return value


def add_job_arguments(parser: argparse.ArgumentParser, *, batches: int, batch_size: int) -> None:
    parser.add_argument("--replicas", type=int, default=2, help="model replicas (default: 2)")
    parser.add_argument("--staleness", type=parse_staleness, default=None,
                        help="staleness bound: an int >= 0 (0 = synchronous SGD) or 'none' (DASGD, default)")
    parser.add_argument("--broadcast-every", type=int, default=1, help="local steps per gradient message")
    parser.add_argument("--batches", type=int, default=batches, help=f"stop after this many mini-batches (default: {batches})")
    parser.add_argument("--batch-size", type=int, default=batch_size, help=f"records per mini-batch (default: {batch_size})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and of the model's initial weights")
    parser.add_argument("--summary", metavar="PATH", help="write a JSON summary of the run to PATH")
    parser.add_argument("--outdir", metavar="DIR", help="where metrics and final models are written (default: runs/<job>-<time>)")
    parser.add_argument("--workers", choices=[m.value for m in WorkerMode], default=WorkerMode.PROCESS.value,
                        help="Python workers of a local mini-cluster: separate processes (default) or loopback")
    parser.add_argument("--tf-threads", type=int, default=1, help="TensorFlow intra-op threads per replica (default: 1)")
    parser.add_argument("--buffer-capacity", type=int, default=None,
                        help="batches a replica may hold while the staleness bound stops it (default: the job's)")
    parser.add_argument("--progress-every", type=float, default=3.0, help="seconds between progress lines")
    defaults = LatencySettings()
    parser.add_argument("--bundle-size", type=int, default=defaults.bundle_size,
                        help=f"python.fn-execution.bundle.size (default: {defaults.bundle_size})")
    parser.add_argument("--bundle-time-ms", type=int, default=defaults.bundle_time_ms,
                        help=f"python.fn-execution.bundle.time in ms (default: {defaults.bundle_time_ms})")
    parser.add_argument("--buffer-timeout-ms", type=int, default=defaults.buffer_timeout_ms,
                        help=f"network buffer timeout in ms (default: {defaults.buffer_timeout_ms})")


def config_from_args(args, **overrides) -> TrainConfig:
    latency = LatencySettings(bundle_size=args.bundle_size, bundle_time_ms=args.bundle_time_ms,
                              buffer_timeout_ms=args.buffer_timeout_ms)
    fields = dict(replicas=args.replicas, staleness_bound=args.staleness, broadcast_every=args.broadcast_every,
                  seed=args.seed, workers=args.workers, tf_intra_op_threads=args.tf_threads, latency=latency)
    if args.buffer_capacity is not None:
        fields["buffer_capacity"] = args.buffer_capacity
    fields.update(overrides)
    return TrainConfig(**fields)


def default_outdir(job: str) -> str:
    return os.path.abspath(os.path.join("runs", f"{job}-{time.strftime('%Y%m%d-%H%M%S')}"))


class _MetricsFollower:
    """Reads the metrics files as the job appends to them."""

    def __init__(self, folder: str):
        self._folder = folder
        self._offsets: Dict[str, int] = {}
        self.records: List[Metrics] = []

    def poll(self) -> List[Metrics]:
        new = []
        for path in sorted(glob.glob(os.path.join(self._folder, "metrics-*.jsonl"))):
            with open(path, encoding="utf-8") as f:
                f.seek(self._offsets.get(path, 0))
                chunk = f.read()
            complete = chunk[:chunk.rfind("\n") + 1]  # a line still being written waits for next time
            self._offsets[path] = self._offsets.get(path, 0) + len(complete.encode("utf-8"))
            new.extend(Metrics.from_json(line) for line in complete.splitlines() if line.strip())
        self.records.extend(new)
        return new


def _latest_per_replica(records: List[Metrics]) -> Dict[int, Metrics]:
    latest: Dict[int, Metrics] = {}
    for m in records:
        if m.replica not in latest or (m.local_step, m.time) >= (latest[m.replica].local_step, latest[m.replica].time):
            latest[m.replica] = m
    return latest


def progress_line(records: List[Metrics], total: int, elapsed: float) -> str:
    latest = _latest_per_replica(records)
    if not latest:
        return f"[{elapsed:7.1f}s] waiting for the first trained batch ..."
    done = sum(m.local_step for m in latest.values())
    losses = [m.loss for m in latest.values() if m.loss is not None]
    accs = [m.accuracy for m in latest.values() if m.accuracy is not None]
    parts = [f"[{elapsed:7.1f}s] batches {done}/{total}"]
    if losses:
        parts.append(f"loss {sum(losses) / len(losses):.4f}")
    if accs:
        parts.append(f"acc {sum(accs) / len(accs):.3f}")
    parts.append(f"{sum(m.batches_per_s for m in latest.values()):.1f} batches/s")
    parts.append(f"staleness max {max(m.staleness for m in latest.values())}")
    parts.append(f"msgs {sum(m.messages_sent for m in latest.values())}")
    return " | ".join(parts)


def _tail_mean(values: List[float]) -> Optional[float]:
    values = [v for v in values if v is not None]
    if not values:
        return None
    window = max(1, math.ceil(len(values) / 10))
    return sum(values[-window:]) / window


def summarize(records: List[Metrics], models, config: TrainConfig, wall_s: float) -> dict:
    """The run's summary. ``final_loss``/``final_accuracy``: the mean prequential loss/accuracy of
    the last 10% of trained batches; ``batches_per_s``: trained batches over the time from the
    first to the last trained batch (job start-up excluded; ``wall_s`` includes it)."""
    batch_records = sorted((m for m in records if m.phase == "batch"), key=lambda m: m.time)
    finals = {m.replica: m for m in records if m.phase == "final"}
    latest = finals or _latest_per_replica(records)
    trained = len(batch_records)
    span = batch_records[-1].time - batch_records[0].time if trained > 1 else 0.0
    messages = sum(m.messages_sent for m in latest.values())
    message_bytes = sum(m.bytes_sent for m in latest.values())
    models = sorted(models, key=lambda m: m.replica)
    return {
        "replicas": config.replicas,
        "staleness_bound": config.staleness_bound,
        "broadcast_every": config.broadcast_every,
        "batches": trained,
        "final_loss": _tail_mean([m.loss for m in batch_records]),
        "final_accuracy": _tail_mean([m.accuracy for m in batch_records]),
        "wall_s": round(wall_s, 3),
        "batches_per_s": (trained - 1) / span if span > 0 else None,
        "gradient_messages": messages,
        "gradient_bytes": message_bytes,
        "mean_gradient_message_bytes": message_bytes / messages if messages else None,
        "dense_gradient_bytes": sum(m.dense_bytes_sent for m in latest.values()),
        "messages_per_s": messages / span if span > 0 else None,
        "model_versions": [m.model_version for m in models],
        "replica_max_weight_diff": max_weight_diff([m.weights for m in models]) if len(models) > 1 else 0.0,
        "initial_weights_equal": len({m.initial_digest for m in models}) <= 1,
        "max_staleness": max((m.staleness for m in batch_records), default=0),
        "bound_overflows": sum(m.bound_overflows for m in latest.values()),
        "duplicates_dropped": sum(m.duplicates_dropped for m in latest.values()),
        "finished_replicas": sorted(finals),
    }


def evaluate_models(models, model_spec, batches) -> dict:
    """Mean loss and accuracy of each final model on held-out ``batches``, averaged over replicas."""
    from ..models.keras_adapter import KerasModelAdapter, load_model

    if not models:
        return {}
    adapter = KerasModelAdapter(load_model(model_spec))
    losses, accuracies = [], []
    for final in models:
        adapter.set_weights(final.weights)
        results = [adapter.evaluate(b) for b in batches]
        losses.append(sum(r.loss for r in results) / len(results))
        if all(r.accuracy is not None for r in results):
            accuracies.append(sum(r.accuracy for r in results) / len(results))
    return {"holdout_loss": sum(losses) / len(losses),
            "holdout_accuracy": sum(accuracies) / len(accuracies) if accuracies else None,
            "holdout_batches": len(batches)}


def _attached(env) -> bool:
    from .environment import _env_configuration

    return _env_configuration(env).get_string("execution.attached", "true").lower() != "false"


def run_job(env, output, args, *, job_name: str, config: TrainConfig, total_batches: int,
            extra_summary: Optional[dict] = None, holdout=None) -> dict:
    """Attaches the result writers, runs the job with progress lines, returns (and writes) the summary.

    ``holdout``: optional ``(model_spec, batches)``; each final model is scored on those batches.
    """
    """Attaches the result writers, runs the job with progress lines, returns (and writes) the summary."""
    outdir = os.path.abspath(args.outdir or default_outdir(job_name))
    os.makedirs(outdir, exist_ok=True)
    for stale in glob.glob(os.path.join(outdir, "metrics-*.jsonl")) + glob.glob(os.path.join(outdir, "model-*.bin")):
        os.remove(stale)  # the writers append: results of an earlier run must not mix in
    write_json_lines(output.metrics, outdir, "metrics", name=config.name).set_parallelism(config.replicas)
    write_records(output.models, outdir, "model", name=config.name).set_parallelism(config.replicas)
    print(f"{job_name}: {config.replicas} replica(s), staleness bound {config.staleness_bound}, "
          f"{total_batches} batches; results in {outdir}", flush=True)
    follower = _MetricsFollower(outdir)
    start = time.time()
    client = env.execute_async(job_name)
    if not _attached(env):  # flink run -d: the job runs on; nothing to follow from here
        print(f"submitted detached as job {client.get_job_id()}; metrics and models will be in {outdir}", flush=True)
        return {"job": job_name, "job_id": str(client.get_job_id()), "outdir": outdir, "detached": True}
    # A local mini-cluster shuts down with its job, so wait on the result, not on the status.
    result = client.get_job_execution_result()
    next_line = start + args.progress_every
    while not result.done():
        time.sleep(0.2)
        follower.poll()
        if time.time() >= next_line:
            print(progress_line(follower.records, total_batches, time.time() - start), flush=True)
            next_line = time.time() + args.progress_every
    wall = time.time() - start
    result.result()  # raises the job's failure, if it failed
    follower.poll()
    models = [decode_final_model(open(p, "rb").read()) for p in sorted(glob.glob(os.path.join(outdir, "model-*.bin")))]
    summary = summarize(follower.records, models, config, wall)
    summary.update({"job": job_name, "batch_size": args.batch_size, "seed": args.seed, "outdir": outdir,
                    "latency": None if config.latency is None else vars(config.latency),
                    **(extra_summary or {})})
    if holdout is not None:
        summary.update(evaluate_models(models, *holdout))
    print(progress_line(follower.records, total_batches, wall), flush=True)
    print(json.dumps({k: summary.get(k) for k in ("batches", "final_loss", "final_accuracy", "holdout_loss",
                                                  "batches_per_s", "replica_max_weight_diff", "model_versions")}),
          flush=True)
    if args.summary:
        with open(args.summary, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        print(f"summary written to {args.summary}", flush=True)
    return summary


def exit_on_bad_arguments(parser: argparse.ArgumentParser, args) -> None:
    for name in ("replicas", "batches", "batch_size", "broadcast_every", "tf_threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")


def main_guard(fn) -> None:
    """Runs a job's main and turns configuration errors into a one-line message and exit code 2."""
    from ..errors import TensairError

    try:
        fn(sys.argv[1:])
    except TensairError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
