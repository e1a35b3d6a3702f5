"""The flags every job shares: one per :class:`~pyflink_tensair.TrainConfig` field, made from
the config itself (:mod:`.settings`), plus the few that say how a job runs.

A config flag is the field's path joined with ``-`` (``--staleness-bound``, ``--peer-updates-scale``,
``--checkpoints-interval-s``), ``none`` is ``None``, and each value is checked by the rule of the
class the field belongs to, while the command line is parsed, with the class's own message. A job
gives its defaults as a ``TrainConfig`` (:data:`JOB_CONFIG`: two replicas, checkpoints every
10 s)::

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="job")
    >>> add_job_arguments(parser, batches=100, batch_size=32)
    >>> args = parser.parse_args(["--replicas", "3", "--staleness-bound", "none", "--peer-updates-average-every", "none"])
    >>> config = config_from_args(args, outdir="/tmp/run")
    >>> config.replicas, config.staleness_bound is None, config.peer_updates.plain, config.checkpoints.dir
    (3, True, True, '/tmp/run/checkpoints')
    >>> parser.parse_args(["--replicas", "0"])
    Traceback (most recent call last):
    ...
    SystemExit: 2
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import re
import time
import typing
from typing import Callable, Dict, Optional, Sequence, Tuple

from ..config import Checkpoints, Exports, TrainConfig
from ..errors import ConfigError
from ..validation import require_int, require_number
from .settings import Setting, default_of, settings, value_at

JOB_CONFIG = TrainConfig(replicas=2, checkpoints=Checkpoints(interval_s=10.0))
"""The jobs' defaults where they differ from ``TrainConfig``'s: two replicas, checkpoints every
10 s (into ``<outdir>/checkpoints``)."""

_GIVEN = "given_config_flags"  # the namespace attribute listing the config flags on the command line
_BASE = "job_config"


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

    The training config the flags describe is built once here too, so that a rule of two flags
    (``--staleness-bound 0 --broadcast-every 2``) is answered the same way, before the job imports
    TensorFlow or starts anything.
    """
    args = parser.parse_args(argv)
    if hasattr(args, _BASE):
        try:
            config_from_args(copy.copy(args))
        except ConfigError as err:
            parser.error(str(err))
    return args


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


def at_least(minimum, parse: Callable[[str], object] = int, name: str = "value"):
    """An argparse ``type`` for a job's own numeric flag: ``parse(text) >= minimum`` (and finite)."""

    def check(text: str):
        value = parse(text)
        return require_int(name, value, minimum) if parse is int else require_number(name, value, minimum)

    check.__name__ = parse.__name__
    return checked_by(check)


def greater_than(bound: float, name: str):
    """An argparse ``type`` for a float flag that must exceed ``bound`` (and be finite)."""

    def check(text: str) -> float:
        return require_number(name, float(text), above=bound)

    check.__name__ = "float"
    return checked_by(check)


def keras_path(text: str) -> str:
    """An argparse ``type``: the path of a ``.keras`` file to write."""
    if not text.endswith(".keras"):
        raise argparse.ArgumentTypeError(f"save must name a .keras file. Received: save={text!r}")
    return text


def _text_parser(row: Setting) -> Callable[[str], object]:
    """An argparse ``type`` for ``row``: ``none`` for ``None`` where the field (or its sub-config)
    may be ``None``, the base type, and the rule of the row's class."""
    base = {int: int, float: float}.get(row.kind, str)
    may_be_none = row.optional or row.switch

    def parse(text: str):
        if may_be_none and text.strip().lower() == "none":
            return None
        try:
            value = base(text)
        except ValueError:
            kind = "an int" if base is int else "a number"
            raise argparse.ArgumentTypeError(f"{row.name} must be {kind}{' or none' if may_be_none else ''}. "
                                             f"Received: {text!r}") from None
        try:
            row.owner(**{**_required_placeholders(row.owner), row.name: value})  # the class's own rule, alone
        except ConfigError as err:
            if re.search(rf"Received: (\w+\.)?{row.name}=", str(err)):  # else a rule of two fields
                raise argparse.ArgumentTypeError(str(err)) from None
        return value

    parse.__name__ = base.__name__
    return parse


def _required_placeholders(owner: type) -> Dict[str, object]:
    """A value each field of ``owner`` without a default may take (``Exports``' ``every_s`` and
    ``dir``), so that another field's rule can be tried alone."""
    placeholders = {int: 1, float: 1.0, str: "placeholder"}
    hints = typing.get_type_hints(owner)
    return {f.name: placeholders.get(hints[f.name], None) for f in dataclasses.fields(owner)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}  # type: ignore[misc]


class _Given(argparse.Action):
    """Stores the value and notes that the flag was on the command line."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        setattr(namespace, _GIVEN, getattr(namespace, _GIVEN, frozenset()) | {self.dest})


class _GivenBool(argparse.BooleanOptionalAction):
    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        setattr(namespace, _GIVEN, getattr(namespace, _GIVEN, frozenset()) | {self.dest})


def _dest(row: Setting) -> str:
    return "_".join(row.path)


def add_config_arguments(parser: argparse.ArgumentParser, config: TrainConfig = JOB_CONFIG) -> None:
    """One flag per :class:`~pyflink_tensair.TrainConfig` field (:func:`~.settings.settings`),
    defaulting to ``config``'s values; :func:`config_from_args` builds the config back."""
    parser.set_defaults(**{_BASE: config, _GIVEN: frozenset()})
    group = parser.add_argument_group("training (TrainConfig: a flag per field, 'none' for None)")
    for row in settings():
        default = value_at(config, row.path)
        shown = "none" if default is None else default
        help_text = f"{row.help} (default: {shown})".replace("%", "%%")
        if row.kind is bool:
            group.add_argument(row.flag, dest=_dest(row), action=_GivenBool, default=default, help=help_text)
            continue
        group.add_argument(row.flag, dest=_dest(row), action=_Given, type=_text_parser(row), default=default,
                           choices=(row.choices + (None,)) if row.choices and row.optional else row.choices,
                           metavar=("{" + ",".join(row.choices) + "}") if row.choices else row.kind.__name__.upper(),
                           help=help_text)


def add_job_arguments(parser: argparse.ArgumentParser, *, batches: Optional[int], batch_size: Optional[int],
                      window: int = 50, config: TrainConfig = JOB_CONFIG) -> None:
    """The flags every job shares: how it runs (``--batches``, ``--outdir``, ...) and the
    training config's (:func:`add_config_arguments`, defaulting to ``config``).
    ``batches``/``batch_size`` ``None``: the job picks them (say so in its help). Flags are not
    abbreviated (``--python`` is not ``--python-in``): what Flink passes stays an unknown flag."""
    parser.allow_abbrev = False
    parser.add_argument("--batches", type=at_least(1, name="batches"), default=batches,
                        help=f"stop after this many mini-batches (default: {batches or 'the whole stream'})")
    parser.add_argument("--batch-size", type=at_least(1, name="batch_size"), default=batch_size,
                        help=f"records per mini-batch (default: {batch_size or 'the job decides'})")
    parser.add_argument("--rate", type=at_least(0, float, "rate"), default=0.0,
                        help="pace the source at this many mini-batches per second (default 0: as fast as the job takes them)")
    parser.add_argument("--summary", metavar="PATH", help="write a JSON summary of the run to PATH")
    parser.add_argument("--outdir", metavar="DIR", help="where metrics and final models are written (default: runs/<job>-<time>)")
    parser.add_argument("--logdir", metavar="DIR", help="write TensorBoard logs (loss, accuracy, batches/s, staleness) to DIR")
    parser.add_argument("--save", metavar="PATH", type=keras_path, help="save replica 0's final model to PATH (a .keras file)")
    parser.add_argument("--score-window", type=at_least(1, name="score_window"), default=window,
                        help=f"batches in the sliding window of the prequential scores (default: {window})")
    parser.add_argument("--progress-every", type=greater_than(0, "progress_every"), default=3.0,
                        help="seconds between progress lines")
    add_config_arguments(parser, config)


def given(args, field: str) -> bool:
    """Whether the flag of ``field`` (a path joined with ``_``: ``"buffer_capacity"``) was on the command line."""
    return field in getattr(args, _GIVEN, frozenset())


def config_from_args(args, *, outdir: Optional[str] = None, **defaults) -> TrainConfig:
    """The :class:`~pyflink_tensair.TrainConfig` the flags describe. ``defaults`` set fields
    the command line did not (``name``, a ``buffer_capacity`` the job computed, ...).
    Checkpoints without ``--checkpoints-dir`` go to ``<outdir>/checkpoints``, exports without
    ``--exports-dir`` to ``<outdir>/exports`` (``outdir``: ``args.outdir``, or a new
    ``runs/<name>-<time>``, then written back into ``args.outdir`` so the job's results go beside)."""
    values: Dict[Tuple[str, ...], object] = {}
    for row in settings():
        value = getattr(args, _dest(row))
        if value is not None or row.optional or row.switch:  # else: a field of a sub-config the base has not
            values[row.path] = value
    for name, value in defaults.items():
        if not given(args, name):
            values[(name,)] = value
    for sub, first in (("checkpoints", "interval_s"), ("exports", "every_s"), ("updates", "every_ms")):
        others = [row for row in settings() if row.path[0] == sub and row.path[1] != first and given(args, _dest(row))]
        if values[(sub, first)] is None and others:
            raise ConfigError(f"{others[0].flag} needs --{sub}-{first.replace('_', '-')} (none: {sub} are off). "
                              f"Received: {others[0].flag} {values[others[0].path]}")

    def folder(sub: str) -> str:
        job = defaults.get("name", getattr(args, _BASE).name)
        args.outdir = os.path.abspath(outdir or getattr(args, "outdir", None) or default_outdir(job))
        return os.path.join(args.outdir, sub)

    if values[("checkpoints", "interval_s")] is not None and values.get(("checkpoints", "dir")) is None:
        values[("checkpoints", "dir")] = folder("checkpoints")
    if values[("exports", "every_s")] is not None:
        values[("exports", "dir")] = os.path.abspath(str(values.get(("exports", "dir")) or folder("exports")))
    return _build(TrainConfig, getattr(args, _BASE), values, ())


def _build(cls, base, values: Dict[Tuple[str, ...], object], prefix: Tuple[str, ...]):
    """``cls`` with the values of ``values`` under ``prefix``, the rest from ``base`` (or the
    class's defaults); an optional sub-config whose first field is ``None`` is ``None``."""
    import typing

    hints = typing.get_type_hints(cls)
    fields: Dict[str, object] = {}
    for field in dataclasses.fields(cls):
        path = prefix + (field.name,)
        kind = hints[field.name]
        args_of = [a for a in typing.get_args(kind) if a is not type(None)]
        kind = args_of[0] if typing.get_origin(kind) is typing.Union else kind
        if dataclasses.is_dataclass(kind) and any(p[:len(path)] == path for p in values):
            first = path + (dataclasses.fields(kind)[0].name,)
            if first in values and values[first] is None:
                fields[field.name] = None
                continue
            fields[field.name] = _build(kind, None if base is None else getattr(base, field.name), values, path)
        elif path in values:
            fields[field.name] = values[path]
        elif base is not None:
            fields[field.name] = getattr(base, field.name)
    return cls(**fields)


HELD_BYTES_PER_REPLICA = 1 << 30


def held_batches_capacity(args, total_batches: int, batch_bytes: int) -> int:
    """The jobs' ``buffer_capacity`` (when ``--buffer-capacity`` is not given: pass it to
    :func:`config_from_args`): one that lets the staleness bound hold on an unpaced stream.

    Unpaced, the source outruns replicas that wait for the gradient loop; when their buffer is
    full they train beyond the bound, and every such step puts one more message in the loop,
    which then grows without end (messages are far larger than batches). So a bounded stream is
    held whole, up to about 1 GiB of batches per replica; a paced one keeps the config's 256.
    """
    if args.rate > 0:
        return default_of(TrainConfig, "buffer_capacity")
    per_replica = -(-total_batches // args.replicas)
    return max(default_of(TrainConfig, "buffer_capacity"), min(per_replica, HELD_BYTES_PER_REPLICA // max(1, batch_bytes)))


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
