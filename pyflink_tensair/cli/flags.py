"""The flags every job shares, checked by the rules of the settings they fill in.

A flag that becomes a :class:`~pyflink_tensair.TrainConfig` or
:class:`~pyflink_tensair.LatencySettings` field is checked by that class itself
(:func:`config_value`), so a rule is written once and a bad value is refused while the command
line is parsed, with the class's own message::

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="job")
    >>> add_job_arguments(parser, batches=100, batch_size=32)
    >>> args = parser.parse_args(["--replicas", "3", "--staleness-bound", "none", "--average-every", "none"])
    >>> config_from_args(args).replicas, config_from_args(args).staleness_bound is None
    (3, True)
    >>> config_from_args(args).peer_updates.plain
    True
    >>> config_value("replicas")("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: replicas must be an int >= 1. Received: replicas=0
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Callable, Optional, Sequence

from ..config import (BAD_INPUT_POLICIES, NORM_ACTIONS, Guards, DEFAULT_STALENESS_BOUND, PEER_DAMPING, PEER_RULES, SPARSE_VALUES, AutoSettings, LatencySettings, PeerUpdates, ReplicaExecution,
                      TrainConfig, TrainerMode, WorkerMode)
from ..errors import ConfigError


def parse_job_arguments(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """A job's command line, parsed strictly: a flag the job does not know (a typo such as
    ``--replicaz 4``) is argparse's usual error, the usage and ``unrecognized arguments: --replicaz
    4`` on stderr and exit status 2, before anything is built or started.

    Nothing needs to be let through for Flink: ``flink run -py SCRIPT ARGS`` runs ``python -u
    SCRIPT ARGS``, so the script's ``sys.argv[1:]`` is exactly ``ARGS``. Flink's CLI keeps its own
    options up to the first token that is not one of them, and hands its PythonDriver only
    ``--python SCRIPT`` and the rest (``PythonProgramOptions.extractProgramArgs``); the driver takes
    ``--python SCRIPT`` off and starts the interpreter (``PythonDriver.constructPythonCommands``;
    Flink 2.3, seen by printing ``sys.argv`` in a script submitted to a standalone cluster).
    ``argv`` ``None``: ``sys.argv[1:]``.

        >>> parser = argparse.ArgumentParser(prog="job")
        >>> add_job_arguments(parser, batches=100, batch_size=32)
        >>> parse_job_arguments(parser, ["--replicas", "3"]).replicas
        3
    """
    return parser.parse_args(argv)


def int_or_none(name: str, rule: str) -> Callable[[str], Optional[int]]:
    """Parses ``"none"`` as ``None`` and anything else as an int (the settings class checks its
    range); ``rule`` is what the error says the value must be.

    Example::

        >>> int_or_none("staleness_bound", "an int >= 0")("none") is None
        True
    """

    def parse(text: str) -> Optional[int]:
        if text.strip().lower() == "none":
            return None
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be {rule} or 'none'. Received: {text!r}") from None

    parse.__name__ = name
    return parse


parse_staleness_bound = int_or_none("staleness_bound", "an int >= 0")  # None: unbounded DASGD
parse_average_every = int_or_none("average_every", "an int >= 1")  # None: never average


def checked_by(check: Callable[[str], object], *, keep_text: bool = False):
    """An argparse ``type`` that runs ``check(text)`` and turns its ConfigError into argparse's
    error; the flag's value is what ``check`` returned (``keep_text``: the text itself)."""

    def parse(text: str):
        try:
            result = check(text)
        except ConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return text if keep_text else result

    parse.__name__ = getattr(check, "__name__", "value")  # argparse names it in "invalid ... value"
    return parse


def config_value(field: str, parse: Callable[[str], object] = int, settings=TrainConfig):
    """An argparse ``type`` that parses a flag with ``parse`` and checks the value by the rule of
    ``settings.<field>`` (``settings(**{field: value})``): the rule is the class's own."""

    def value_of(text: str):
        value = parse(text)
        settings(**{field: value})
        return value

    value_of.__name__ = getattr(parse, "__name__", field)
    return checked_by(value_of)


def at_least(minimum, parse: Callable[[str], object] = int, name: str = "value"):
    """An argparse ``type`` for a job's own numeric flag: ``parse(text) >= minimum``."""

    def check(text: str):
        value = parse(text)
        if value < minimum:
            kind = "an int" if parse is int else "a number"
            raise argparse.ArgumentTypeError(f"{name} must be {kind} >= {minimum}. Received: {name}={value!r}")
        return value

    check.__name__ = parse.__name__
    return check


def greater_than(bound: float, name: str):
    """An argparse ``type`` for a float flag that must exceed ``bound``."""

    def check(text: str) -> float:
        value = float(text)
        if not value > bound:
            raise argparse.ArgumentTypeError(f"{name} must be a number > {bound}. Received: {name}={value!r}")
        return value

    check.__name__ = "float"
    return check


def keras_path(text: str) -> str:
    """An argparse ``type``: the path of a ``.keras`` file to write."""
    if not text.endswith(".keras"):
        raise argparse.ArgumentTypeError(f"save must name a .keras file. Received: save={text!r}")
    return text


def add_job_arguments(parser: argparse.ArgumentParser, *, batches: Optional[int], batch_size: Optional[int],
                      window: int = 50, staleness_bound: Optional[int] = DEFAULT_STALENESS_BOUND) -> None:
    """The flags every job shares. ``batches``/``batch_size`` ``None``: the job picks them (say so in its help)."""
    parser.add_argument("--replicas", type=config_value("replicas"), default=2, help="model replicas (default: 2)")
    parser.add_argument("--staleness-bound", type=config_value("staleness_bound", parse_staleness_bound),
                        default=staleness_bound,
                        help="an int >= 0 (0 = synchronous SGD) or 'none' (unbounded DASGD); "
                             f"default: {'none' if staleness_bound is None else staleness_bound}")
    parser.add_argument("--broadcast-every", type=config_value("broadcast_every"), default=1,
                        help="local steps per gradient message")
    parser.add_argument("--batches", type=at_least(1, name="batches"), default=batches,
                        help=f"stop after this many mini-batches (default: {batches or 'the whole stream'})")
    parser.add_argument("--batch-size", type=at_least(1, name="batch_size"), default=batch_size,
                        help=f"records per mini-batch (default: {batch_size or 'the job decides'})")
    parser.add_argument("--rate", type=at_least(0, float, "rate"), default=0.0,
                        help="pace the source at this many mini-batches per second (default 0: as fast as the job takes them)")
    parser.add_argument("--seed", type=config_value("seed"), default=0, help="seed of the data and of the model's initial weights")
    parser.add_argument("--summary", metavar="PATH", help="write a JSON summary of the run to PATH")
    parser.add_argument("--outdir", metavar="DIR", help="where metrics and final models are written (default: runs/<job>-<time>)")
    parser.add_argument("--logdir", metavar="DIR", help="write TensorBoard logs (loss, accuracy, batches/s, staleness) to DIR")
    parser.add_argument("--save", metavar="PATH", type=keras_path, help="save replica 0's final model to PATH (a .keras file)")
    parser.add_argument("--score-window", type=at_least(1, name="score_window"), default=window,
                        help=f"batches in the sliding window of the prequential scores (default: {window})")
    parser.add_argument("--workers", choices=[m.value for m in WorkerMode], default=WorkerMode.PROCESS.value,
                        help="Python workers of a local mini-cluster: separate processes (default) or loopback")
    parser.add_argument("--trainer", choices=[m.value for m in TrainerMode], default=TrainerMode.THREAD.value,
                        help="which thread trains a replica: its own trainer thread (default) or Flink's callback itself")
    parser.add_argument("--replica-execution", choices=[m.value for m in ReplicaExecution],
                        default=ReplicaExecution.THREAD.value,
                        help="where the replicas' Python runs: inside the TaskManagers' JVMs (thread, the default: "
                             "no crossing through gRPC; one interpreter per TaskManager) or in Python worker processes")
    parser.add_argument("--tf-threads", type=config_value("tf_intra_op_threads"), default=1,
                        help="TensorFlow intra-op threads per replica (default: 1)")
    parser.add_argument("--buffer-capacity", type=config_value("buffer_capacity"), default=None,
                        help="batches a replica may hold while the staleness bound stops it (default: the job's)")
    parser.add_argument("--backpressure", action=argparse.BooleanOptionalAction, default=True,
                        help="hold the batches back while a replica is saturated, so that the staleness bound holds "
                             "when the source outruns the replicas (default: on; --no-backpressure: a full buffer "
                             "trains beyond the bound, counted in bound_overflows)")
    parser.add_argument("--progress-every", type=greater_than(0, "progress_every"), default=3.0,
                        help="seconds between progress lines")
    parser.add_argument("--checkpoint-interval", type=at_least(0, float, "checkpoint_interval"),
                        default=DEFAULT_CHECKPOINT_INTERVAL_S,
                        help="seconds between Flink checkpoints of every replica's state; a failed job restarts from "
                             f"the last one (0: no checkpoints; default: {DEFAULT_CHECKPOINT_INTERVAL_S:g})")
    parser.add_argument("--state-backend", choices=["hashmap", "rocksdb"], default="hashmap",
                        help="where Flink keeps the state between checkpoints: JVM heap (default) or RocksDB on disk")
    parser.add_argument("--checkpoint-dir", metavar="DIR", help="where checkpoints go (default: <outdir>/checkpoints)")
    parser.add_argument("--mode", choices=["always", "never", "auto", "train", "serve"], default="always",
                        help="always train (default), never (serve only, e.g. a pre-trained --model), or auto: train "
                             "until the loss stops falling, then serve and train again on a drift (--drift-detector)")
    parser.add_argument("--drift-detector", choices=["optwin", "page_hinkley"], default="optwin",
                        help="the detector watching the loss while --mode auto serves (default: optwin)")
    parser.add_argument("--converged-window", type=at_least(1, name="converged_window"), default=50,
                        help="--mode auto: converged once the last N batches' mean loss is within --converged-tolerance "
                             "of the N before (default: 50)")
    parser.add_argument("--converged-tolerance", type=at_least(0, float, "converged_tolerance"), default=0.01,
                        help="--mode auto: the relative improvement below which the loss no longer falls (default: 0.01)")
    parser.add_argument("--sparse-values", choices=SPARSE_VALUES, default="float32",
                        help="how embedding rows travel in gradient messages; float16 halves them (default: float32)")
    parser.add_argument("--export-every", metavar="SECONDS", type=greater_than(0, "export_every"),
                        help="write replica 0's current model every SECONDS as <export-dir>/model-v<version>.keras "
                             "(and the final one at the end; default: no exports)")
    parser.add_argument("--export-dir", metavar="DIR", help="where --export-every writes (default: <outdir>/exports)")
    peer = PeerUpdates()
    parser.add_argument("--peer-scale", type=config_value("scale", float, PeerUpdates), default=peer.scale,
                        help=f"DASGD: a factor on every peer gradient, in (0, 1] (PeerUpdates.scale; default: {peer.scale:g})")
    parser.add_argument("--peer-damping", choices=PEER_DAMPING, default=peer.damping,
                        help="DASGD: 'inverse' weighs a peer gradient by 1 / (1 + its staleness in local steps) "
                             f"(default: {peer.damping})")
    parser.add_argument("--peer-rule", choices=PEER_RULES, default=peer.rule,
                        help="DASGD: apply peer gradients through the model's optimizer, or by a plain SGD step of "
                             f"--peer-sgd-lr (default: {peer.rule})")
    parser.add_argument("--peer-sgd-lr", type=greater_than(0, "peer_sgd_lr"), default=peer.sgd_learning_rate,
                        help="the plain step's learning rate, with --peer-rule sgd")
    parser.add_argument("--average-every", type=config_value("average_every", parse_average_every, PeerUpdates),
                        default=peer.average_every,
                        help="DASGD: every N local steps a replica sends its weights and its peers move 1/replicas of "
                             f"the way towards them (periodic model averaging; 'none': never; default: {peer.average_every})")
    guards = Guards()
    parser.add_argument("--bad-input", choices=BAD_INPUT_POLICIES, default=guards.bad_input,
                        help="a record, batch or corpus line that cannot be trained on: set aside into "
                             "<outdir>/dead-letters-*.jsonl and counted (dead_letter, the default), or fail the job")
    parser.add_argument("--max-gradient-norm", type=config_value("max_gradient_norm", float, Guards), default=None,
                        help="peer gradients with a larger global L2 norm are outliers (default: no bound)")
    parser.add_argument("--norm-action", choices=NORM_ACTIONS, default=guards.norm_action,
                        help=f"what happens to an outlier: rejected or clipped to the bound (default: {guards.norm_action})")
    defaults = LatencySettings()
    for flag, field in (("--bundle-size", "bundle_size"), ("--bundle-time-ms", "bundle_time_ms"),
                        ("--buffer-timeout-ms", "buffer_timeout_ms")):
        parser.add_argument(flag, type=config_value(field, settings=LatencySettings), default=getattr(defaults, field),
                            help=f"LatencySettings.{field} (default: {getattr(defaults, field)})")


HELD_BYTES_PER_REPLICA = 1 << 30
DEFAULT_CHECKPOINT_INTERVAL_S = 10.0


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
    """The :class:`TrainConfig` the flags describe; ``overrides`` set other fields (``name``, ...)."""
    latency = LatencySettings(bundle_size=args.bundle_size, bundle_time_ms=args.bundle_time_ms,
                              buffer_timeout_ms=args.buffer_timeout_ms)
    fields = dict(replicas=args.replicas, staleness_bound=args.staleness_bound, broadcast_every=args.broadcast_every,
                  backpressure=args.backpressure,
                  seed=args.seed, sparse_values=args.sparse_values, workers=args.workers, trainer=args.trainer,
                  replica_execution=args.replica_execution, tf_intra_op_threads=args.tf_threads, latency=latency,
                  mode=args.mode, auto=AutoSettings(window=args.converged_window, tolerance=args.converged_tolerance,
                                                    detector=args.drift_detector),
                  guards=Guards(bad_input=args.bad_input, max_gradient_norm=args.max_gradient_norm,
                                norm_action=args.norm_action))
    if args.peer_rule == "sgd" and args.peer_sgd_lr is None:
        raise ConfigError("--peer-rule sgd needs --peer-sgd-lr LR, the plain step's learning rate")
    if args.staleness_bound != 0:  # synchronous replicas average every step: peer updates do not apply
        fields["peer_updates"] = PeerUpdates(scale=args.peer_scale, damping=args.peer_damping, rule=args.peer_rule,
                                             sgd_learning_rate=args.peer_sgd_lr, average_every=args.average_every)
    if args.buffer_capacity is not None:
        fields["buffer_capacity"] = args.buffer_capacity
    if args.checkpoint_interval > 0:
        if not args.checkpoint_dir:  # the job's outdir, fixed here so the job writes its results beside
            args.outdir = os.path.abspath(args.outdir or default_outdir(overrides.get("name", "tensair")))
        fields.update(checkpoint_interval_s=args.checkpoint_interval, state_backend=args.state_backend,
                      checkpoint_dir=args.checkpoint_dir or os.path.join(args.outdir, "checkpoints"))
    if args.export_dir and args.export_every is None:
        raise ConfigError("--export-dir needs --export-every SECONDS (how often to export). Received: "
                          f"--export-dir {args.export_dir}")
    if args.export_every is not None:
        if not args.export_dir:
            args.outdir = os.path.abspath(args.outdir or default_outdir(overrides.get("name", "tensair")))
        fields.update(export_every_s=args.export_every,
                      export_dir=os.path.abspath(args.export_dir or os.path.join(args.outdir, "exports")))
    fields.update(overrides)
    return TrainConfig(**fields)


def default_outdir(job: str) -> str:
    return os.path.abspath(os.path.join("runs", f"{job}-{time.strftime('%Y%m%d-%H%M%S')}"))


def add_kafka_arguments(parser: argparse.ArgumentParser, records: str = "JSON records") -> None:
    """``--source kafka`` and how to reach the topic (:mod:`pyflink_tensair.kafka.source`);
    ``records`` says what the topic holds, for the help."""
    from ..kafka.source import STARTS, UNTIL

    parser.add_argument("--source", choices=["generated", "kafka"], default="generated",
                        help=f"where the examples come from: made inside the job (default) or a Kafka topic of {records} "
                             "(python -m pyflink_tensair.cli.produce writes one)")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="the Kafka brokers, with --source kafka")
    parser.add_argument("--topic", help="the topic to train from, with --source kafka")
    parser.add_argument("--group-id", default="pyflink-tensair", help="the Kafka consumer group (default: pyflink-tensair)")
    parser.add_argument("--kafka-start", choices=STARTS, default="earliest",
                        help="where a new job starts reading (default: earliest; a restored job resumes at its checkpoint)")
    parser.add_argument("--kafka-until", choices=UNTIL, default="latest",
                        help="latest (default): train on what the topic holds when the job starts, then end; "
                             "never: follow the topic until the job is stopped")
    parser.add_argument("--kafka-connector", metavar="JAR",
                        help="Flink's Kafka connector jar (default: fetched once from Maven Central into the cache)")


def check_kafka_arguments(args) -> None:
    if args.source != "kafka":
        for flag in ("bootstrap_servers", "topic"):
            if getattr(args, flag):
                raise ConfigError(f"--{flag.replace('_', '-')} needs --source kafka")
        return
    if not args.bootstrap_servers or not args.topic:
        raise ConfigError("--source kafka needs --bootstrap-servers HOST:PORT and --topic NAME")
