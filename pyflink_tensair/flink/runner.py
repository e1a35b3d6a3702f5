"""What every job in ``jobs/`` shares: its flags, progress lines while it runs, the summary after.

A job builds its batches stream, calls :func:`~pyflink_tensair.flink.training.train`, then hands the
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
from typing import Callable, Dict, List, Optional

from ..config import LatencySettings, TrainConfig, WorkerMode
from ..core.events import Metrics
from ..core.prequential import sliding_mean
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


def add_job_arguments(parser: argparse.ArgumentParser, *, batches: Optional[int], batch_size: Optional[int],
                      window: int = 50, staleness: Optional[int] = None) -> None:
    """The flags every job shares. ``batches``/``batch_size`` ``None``: the job picks them (say so in its help)."""
    parser.add_argument("--replicas", type=int, default=2, help="model replicas (default: 2)")
    parser.add_argument("--staleness", type=parse_staleness, default=staleness,
                        help="staleness bound: an int >= 0 (0 = synchronous SGD) or 'none' (unbounded DASGD); "
                             f"default: {'none' if staleness is None else staleness}")
    parser.add_argument("--broadcast-every", type=int, default=1, help="local steps per gradient message")
    parser.add_argument("--batches", type=int, default=batches,
                        help=f"stop after this many mini-batches (default: {batches or 'the whole stream'})")
    parser.add_argument("--batch-size", type=int, default=batch_size,
                        help=f"records per mini-batch (default: {batch_size or 'the job decides'})")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="pace the source at this many mini-batches per second (default 0: as fast as the job takes them)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and of the model's initial weights")
    parser.add_argument("--summary", metavar="PATH", help="write a JSON summary of the run to PATH")
    parser.add_argument("--outdir", metavar="DIR", help="where metrics and final models are written (default: runs/<job>-<time>)")
    parser.add_argument("--logdir", metavar="DIR", help="write TensorBoard logs (loss, accuracy, batches/s, staleness) to DIR")
    parser.add_argument("--save", metavar="PATH", help="save replica 0's final model to PATH (a .keras file)")
    parser.add_argument("--score-window", type=int, default=window,
                        help=f"batches in the sliding window of the prequential scores (default: {window})")
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


HELD_BYTES_PER_REPLICA = 1 << 30


def held_batches_capacity(args, total_batches: int, batch_bytes: int) -> int:
    """``--buffer-capacity``, or a default that lets the staleness bound hold on an unpaced stream.

    Unpaced, the source outruns replicas that wait for the gradient loop; when their buffer is
    full they train beyond the bound, and every such step puts one more message in the loop,
    which then grows without end (messages are far larger than batches). So a bounded stream is
    held whole, up to about 1 GiB of batches per replica; a paced one keeps the usual 256.
    """
    if args.buffer_capacity is not None:
        return args.buffer_capacity
    if args.rate > 0:
        return 256
    per_replica = -(-total_batches // args.replicas)
    return max(256, min(per_replica, HELD_BYTES_PER_REPLICA // max(1, batch_bytes)))


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


class _LinesFollower:
    """Reads ``<prefix>-*.jsonl`` files in a folder as the job appends to them."""

    def __init__(self, folder: str, prefix: str, parse=json.loads):
        self._folder = folder
        self._prefix = prefix
        self._parse = parse
        self._offsets: Dict[str, int] = {}
        self.records: List = []

    def poll(self) -> List:
        new = []
        for path in sorted(glob.glob(os.path.join(self._folder, f"{self._prefix}-*.jsonl"))):
            with open(path, "rb") as f:
                f.seek(self._offsets.get(path, 0))
                chunk = f.read()
            complete = chunk[:chunk.rfind(b"\n") + 1]  # a line still being written waits for next time
            self._offsets[path] = self._offsets.get(path, 0) + len(complete)
            new.extend(self._parse(line) for line in complete.decode("utf-8").splitlines() if line.strip())
        self.records.extend(new)
        return new


def _latest_per_replica(records: List[Metrics]) -> Dict[int, Metrics]:
    latest: Dict[int, Metrics] = {}
    for m in records:
        if m.replica not in latest or (m.local_step, m.time) >= (latest[m.replica].local_step, latest[m.replica].time):
            latest[m.replica] = m
    return latest


def progress_line(records: List[Metrics], total: Optional[int], elapsed: float, window: int = 50) -> str:
    """One line: batches done, prequential loss and accuracy over the last ``window`` batches,
    batches per second of all replicas, the largest current staleness, messages sent."""
    latest = _latest_per_replica(records)
    if not latest:
        return f"[{elapsed:7.1f}s] waiting for the first trained batch ..."
    done = sum(m.local_step for m in latest.values())
    batch_records = [m for m in records if m.phase == "batch"]
    parts = [f"[{elapsed:7.1f}s] batches {done}/{total if total else '?'}"]
    loss = sliding_mean(batch_records, "loss", window=window)
    if loss:
        parts.append(f"loss {loss[-1][1]:.4f}")
    accuracy = sliding_mean(batch_records, "accuracy", window=window)
    if accuracy:
        parts.append(f"acc {accuracy[-1][1]:.3f}")
    parts.append(f"{sum(m.batches_per_s for m in latest.values()):.1f} batches/s")
    parts.append(f"staleness {max(m.staleness for m in latest.values())}")
    delays = [m.delay_s for m in latest.values() if m.delay_s is not None]
    if delays:
        parts.append(f"delay {max(delays):.2f}s")
    parts.append(f"msgs {sum(m.messages_sent for m in latest.values())}")
    return " | ".join(parts)


def _tail_mean(values: List[float]) -> Optional[float]:
    values = [v for v in values if v is not None]
    if not values:
        return None
    window = max(1, math.ceil(len(values) / 10))
    return sum(values[-window:]) / window


def summarize(records: List[Metrics], models, config: TrainConfig, wall_s: float, window: int = 50) -> dict:
    """The run's summary. ``final_loss``/``final_accuracy``: the mean prequential loss/accuracy of
    the last 10% of trained batches; ``window_accuracy``: over the last ``window`` batches in
    stream order, and ``accuracy_curve`` that sliding mean after every batch (``[batches, value]``);
    ``batches_per_s``: trained batches over the time from the first to the last trained batch (job
    start-up excluded; ``wall_s`` includes it)."""
    batch_records = sorted((m for m in records if m.phase == "batch"), key=lambda m: m.time)
    finals = {m.replica: m for m in records if m.phase == "final"}
    latest = finals or _latest_per_replica(records)
    trained = len(batch_records)
    span = batch_records[-1].time - batch_records[0].time if trained > 1 else 0.0
    # every finished replica sent one done marker besides its gradient messages
    messages = sum(m.messages_sent for m in latest.values()) - len(finals)
    message_bytes = sum(m.bytes_sent for m in latest.values())
    models = sorted(models, key=lambda m: m.replica)
    return {
        "replicas": config.replicas,
        "staleness_bound": config.staleness_bound,
        "broadcast_every": config.broadcast_every,
        "batches": trained,
        "final_loss": _tail_mean([m.loss for m in batch_records]),
        "final_accuracy": _tail_mean([m.accuracy for m in batch_records]),
        "score_window": window,
        "window_loss": _last_value(sliding_mean(batch_records, "loss", window=window)),
        "window_accuracy": _last_value(sliding_mean(batch_records, "accuracy", window=window)),
        "accuracy_curve": [[n, round(v, 5)] for n, v in sliding_mean(batch_records, "accuracy", window=window)],
        "loss_curve": [[n, round(v, 5)] for n, v in sliding_mean(batch_records, "loss", window=window)],
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
        "max_delay_s": max((m.delay_s for m in batch_records if m.delay_s is not None), default=None),
        "bound_overflows": sum(m.bound_overflows for m in latest.values()),
        "duplicates_dropped": sum(m.duplicates_dropped for m in latest.values()),
        "finished_replicas": sorted(finals),
    }


def _last_value(curve) -> Optional[float]:
    return curve[-1][1] if curve else None


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


def save_final_model(models, model_spec, path: str) -> None:
    """Saves replica 0's final weights in ``model_spec``'s architecture as a ``.keras`` file.

    The optimizer's state is not carried over: a run continued from the file (``--model PATH``)
    starts its optimizer afresh.
    """
    from ..models.keras_adapter import KerasModelAdapter, load_model

    if not models:
        raise RuntimeError("no final model came back from the job: nothing to save")
    model = load_model(model_spec)
    KerasModelAdapter(model).set_weights(min(models, key=lambda m: m.replica).weights)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    model.save(path)


def _show_probe(record: dict) -> str:
    body = record.get("error") or json.dumps(record.get("result"), default=float)
    return f"probe ({record['phase']}, replica {record['replica']} at step {record['local_step']}): {body}"


def run_job(env, output, args, *, job_name: str, config: TrainConfig, total_batches: Optional[int],
            model_spec=None, extra_summary: Optional[dict] = None, holdout=None, predictions=None,
            show_probe: Callable[[dict], str] = _show_probe,
            finish: Optional[Callable[[dict, list, list, list], dict]] = None) -> dict:
    """Attaches the result writers, runs the job with progress lines, returns (and writes) the summary.

    Args:
        output: what :func:`~pyflink_tensair.flink.training.train` returned.
        args: the parsed flags of :func:`add_job_arguments`.
        model_spec: the model ``train`` got; needed for ``--save`` and ``holdout``.
        holdout: optional list of batches each final model is scored on.
        predictions: optional stream of JSON strings written to ``<outdir>/predictions-*.jsonl``.
        show_probe: formats a probe record for the progress output.
        finish: ``finish(summary, metrics, models, probes) -> dict`` adds job-specific figures.
    """
    outdir = os.path.abspath(args.outdir or default_outdir(job_name))
    os.makedirs(outdir, exist_ok=True)
    for prefix in ("metrics-*.jsonl", "probes-*.jsonl", "predictions-*.jsonl", "model-*.bin"):
        for stale in glob.glob(os.path.join(outdir, prefix)):
            os.remove(stale)  # the writers append: results of an earlier run must not mix in
    write_json_lines(output.metrics, outdir, "metrics", name=config.name).set_parallelism(config.replicas)
    write_json_lines(output.probes, outdir, "probes", name=config.name).set_parallelism(config.replicas)
    write_records(output.models, outdir, "model", name=config.name).set_parallelism(config.replicas)
    if predictions is not None:
        write_json_lines(predictions, outdir, "predictions", name=config.name).set_parallelism(config.replicas)
    print(f"{job_name}: {config.replicas} replica(s), staleness bound {config.staleness_bound}, "
          f"{total_batches or 'all'} batches; results in {outdir}", flush=True)
    metrics = _LinesFollower(outdir, "metrics", Metrics.from_json)
    probes = _LinesFollower(outdir, "probes")
    tensorboard = None
    if args.logdir:
        from ..tensorboard import TensorBoardLog

        tensorboard = TensorBoardLog(args.logdir)
    start = time.time()
    client = env.execute_async(job_name)
    if not _attached(env):  # flink run -d: the job runs on; nothing to follow from here
        print(f"submitted detached as job {client.get_job_id()}; metrics and models will be in {outdir}", flush=True)
        return {"job": job_name, "job_id": str(client.get_job_id()), "outdir": outdir, "detached": True}

    def follow() -> None:
        new = metrics.poll()
        for record in probes.poll():
            print(show_probe(record), flush=True)
        if tensorboard is not None and new:
            tensorboard.add(new)
            batch_records = [m for m in metrics.records if m.phase == "batch"]
            tensorboard.add_job_scalars(
                len(batch_records),
                window_accuracy=_last_value(sliding_mean(batch_records, "accuracy", window=args.score_window)),
                window_loss=_last_value(sliding_mean(batch_records, "loss", window=args.score_window)))

    # A local mini-cluster shuts down with its job, so wait on the result, not on the status.
    result = client.get_job_execution_result()
    next_line = start + args.progress_every
    while not result.done():
        time.sleep(0.2)
        follow()
        if time.time() >= next_line:
            print(progress_line(metrics.records, total_batches, time.time() - start, args.score_window), flush=True)
            next_line = time.time() + args.progress_every
    wall = time.time() - start
    try:
        result.result()  # raises the job's failure, if it failed
    finally:
        follow()
        if tensorboard is not None:
            tensorboard.close()
    models = [decode_final_model(open(p, "rb").read()) for p in sorted(glob.glob(os.path.join(outdir, "model-*.bin")))]
    summary = summarize(metrics.records, models, config, wall, args.score_window)
    summary.update({"job": job_name, "batch_size": args.batch_size, "seed": args.seed, "rate": args.rate,
                    "outdir": outdir, "logdir": os.path.abspath(args.logdir) if args.logdir else None,
                    "latency": None if config.latency is None else vars(config.latency),
                    **(extra_summary or {})})
    if holdout is not None:
        summary.update(evaluate_models(models, model_spec, holdout))
    if finish is not None:
        summary.update(finish(summary, metrics.records, models, probes.records))
    if args.save:
        save_final_model(models, model_spec, args.save)
        summary["saved_model"] = os.path.abspath(args.save)
        print(f"replica 0's final model saved to {args.save}", flush=True)
    print(progress_line(metrics.records, total_batches, wall, args.score_window), flush=True)
    print(json.dumps({k: summary.get(k) for k in ("batches", "final_loss", "window_accuracy", "holdout_accuracy",
                                                  "batches_per_s", "mean_gradient_message_bytes",
                                                  "replica_max_weight_diff", "model_versions")}),
          flush=True)
    if args.summary:
        os.makedirs(os.path.dirname(os.path.abspath(args.summary)), exist_ok=True)
        with open(args.summary, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        print(f"summary written to {args.summary}", flush=True)
    return summary


def exit_on_bad_arguments(parser: argparse.ArgumentParser, args) -> None:
    for name in ("replicas", "batches", "batch_size", "broadcast_every", "tf_threads", "score_window"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if args.rate < 0:
        parser.error(f"--rate must be >= 0 mini-batches per second (0: unpaced), got {args.rate}")
    if args.save and not args.save.endswith(".keras"):
        parser.error(f"--save must name a .keras file, got {args.save!r}")


def main_guard(fn) -> None:
    """Runs a job's main and turns configuration errors into a one-line message and exit code 2."""
    from ..errors import TensairError

    try:
        fn(sys.argv[1:])
    except TensairError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
