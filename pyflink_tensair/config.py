"""Configuration of a training job and of serving: frozen dataclasses validated on construction
(:class:`TrainConfig`, :class:`ServeConfig`; the groups of settings a TrainConfig holds are
:mod:`~pyflink_tensair.settings`', re-exported here).

Every rule violation raises :class:`~pyflink_tensair.errors.ConfigError` naming the field, the rule and
the value received, the way Keras reports bad arguments::

    >>> TrainConfig(staleness_bound=-1)
    Traceback (most recent call last):
    ...
    pyflink_tensair.errors.ConfigError: staleness_bound must be an int >= 0 or None. Received: staleness_bound=-1
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .errors import ConfigError
from .settings import (  # noqa: F401 (re-exported: the settings groups are the config's)
    BAD_INPUT_POLICIES, DEFAULT_AVERAGE_EVERY, DEFAULT_MAX_BATCH_BYTES, DEFAULT_STALENESS_BOUND, DETECTORS,
    NORM_ACTIONS, PEER_DAMPING, PEER_RULES, STATE_BACKENDS, AutoSettings, Checkpoints, Exports, Guards,
    LatencySettings, ModelUpdates, PeerUpdates)
from .validation import (is_number, require_callable, require_field_choices, require_int, require_number,
                         require_text)



SPARSE_VALUES = ("float32", "float16")  # how embedding rows may travel in gradient messages

class Mode(str, enum.Enum):
    """What a replica does with a mini-batch; every batch is predicted in every mode.

    ``TRAIN``: predict on it, then train on it (prequential, test-then-train).
    ``SERVE``: predict on it only (e.g. a pre-trained model); gradients from peers are still
    applied.
    ``AUTO``: train until converged, then serve and watch the loss with a drift detector; on a
    drift every replica trains again (:class:`AutoSettings`, :class:`~pyflink_tensair.drift.AutoPolicy`).

        >>> Mode("train") is Mode.TRAIN
        True
    """

    TRAIN = "train"
    SERVE = "serve"
    AUTO = "auto"


class PythonIn(str, enum.Enum):
    """Where the job's Python runs: the replicas and the batch sources that feed them.

    ``JVM``: inside the TaskManagers' JVMs, through PEMJA (PyFlink's thread mode, for this
    library's operators only: the rest of the job keeps its own). Flink's task thread calls the
    function directly and nothing is copied through gRPC (the default: at two replicas on two
    cores it trains 1.4 (dense) to 1.9 (sparse) times as many batches per second,
    docs/measurements.md). All the Python of one TaskManager shares its one interpreter (and its
    GIL: TensorFlow releases it inside its ops) and its memory: TensorFlow's allocations count
    against the TaskManager's process, not Flink's managed memory. The interpreter must find the
    job's packages: the job's ``python.pythonpath`` gets the client's import paths, which a remote
    TaskManager must have too (see :func:`~pyflink_tensair.flink.execution.operator_configuration`),
    and a session cluster running several such jobs needs flink-python in its ``lib/``. Records
    that are pickled Python objects (e.g. ``env.from_collection`` without a type) cannot enter
    the JVM's Python: :func:`~pyflink_tensair.to_batches` batches them in worker processes.
    ``PROCESSES``: in Python worker processes, PyFlink's default; every batch and peer message
    crosses into them as a Beam bundle through gRPC.
    ``CLIENT``: on a local mini-cluster, inside the client process (PyFlink's "loopback"; handy
    for a debugger); a job submitted to a cluster uses worker processes instead.
    """

    JVM = "jvm"
    PROCESSES = "processes"
    CLIENT = "client"


def _as_enum(owner: str, name: str, value, enum_type):
    try:
        return enum_type(value)
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in enum_type)
        raise ConfigError(f"{name} must be one of {allowed}. Received: {name}={value!r}") from None


@dataclass(frozen=True)
class TrainConfig:
    """How the replicas train and exchange gradients: the one place of every default.

    Attributes:
        replicas: number of model replicas; replica ``r`` runs on subtask ``r``.
        staleness_bound: how many steps a replica may run ahead of the peer gradients it has
            applied (``None``: unbounded). With bound ``s`` a replica starts its local step
            ``k + 1`` only after it has applied, from every peer still training, that peer's
            gradients up to its step ``k - s``. ``0`` is synchronous SGD (every replica applies the same averaged gradient
            at every step); ``None`` is TensAIR's unbounded DASGD. The default, 1, keeps DASGD's
            held-out accuracy at synchronous SGD's (with ``PeerUpdates``' averaging) and bounds
            the loop's memory: at most about ``2 s + 1`` messages per pair of replicas are in
            flight (unbounded, a replica that trains faster than the loop carries its messages
            fills the JVM's heap; word2vec ran out of it at staleness 381).
        broadcast_every: local steps summed into one gradient message (TensAIR's
            ``broadcast_frequency``). Must be 1 when ``staleness_bound=0``.
        buffer_capacity: mini-batches a replica holds while the staleness bound stops it. When
            the buffer is full the oldest held batch is trained at once, beyond the bound, and
            counted in the ``bound_overflows`` metric: no batch is ever dropped.
        backpressure: hold the batch stream back while a replica is saturated (a quarter of its
            buffer held while the bound stops it), so that the bound holds when the source
            outruns the replicas: a gate before the router holds each batch (at most 1 s, and only while a
            saturated replica reported in the last 250 ms that it is catching up) and
            Flink's backpressure carries on to the source. Replicas report their saturation
            through Flink, so this works across TaskManagers and for any source.
        mode: :class:`Mode` of the replicas: ``"train"``, ``"serve"`` or ``"auto"`` (not with
            ``staleness_bound=0``).
        auto: :class:`AutoSettings` of ``Mode.AUTO``.
        peer_updates: :class:`PeerUpdates`, how DASGD replicas weigh their peers' gradients
            and how often they average their weights. With ``staleness_bound=0`` every replica
            applies the same average and the replicas stay equal: weighing is refused there, and
            averaging equal weights changes nothing (no weights are sent).
        guards: :class:`Guards`, what happens to bad input and poisoned peer messages
            (by default: set aside into ``TrainOutput.dead_letters``, counted, the job goes on).
        seed: seeds model initialisation; every replica starts from the same weights.
        sparse_values: ``"float32"`` (default) or ``"float16"``: how embedding rows travel in
            gradient messages. ``"float16"`` halves a sparse message's bytes; every replica
            rounds its own rows the same way before using them, so synchronous replicas stay
            identical (with ``broadcast_every > 1`` a summed message is rounded once more).
            Dense gradients always travel as float32.
        python_in: :class:`PythonIn`, where the replicas' and the batch sources' Python runs:
            ``"jvm"`` (inside the TaskManagers, the default), ``"processes"`` (Python worker
            processes) or ``"client"`` (a local mini-cluster's client process).
        trainer_thread: a trainer thread owns each replica; Flink's callbacks only queue batches
            and peer messages (messages ahead of batches) and emit what is ready, so moving the
            next record into Python overlaps the current step. ``False``: each callback trains
            before it returns, while Flink's task thread waits.
        tf_intra_op_threads: TensorFlow intra-op threads per replica (``None``: TensorFlow's
            default, all cores).
        latency: :class:`LatencySettings` applied to the job, or ``None`` to keep the job's own.
        checkpoints: :class:`Checkpoints`, or ``None`` (the default) to leave the job's own
            checkpointing settings alone.
        exports: :class:`Exports` of replica 0's model while it trains, or ``None``: none.
        updates: :class:`ModelUpdates` that replica 0 publishes while it trains
            (``TrainOutput.updates``, for :func:`~pyflink_tensair.serve`), or ``None``: none.
        name: prefix of every operator's name and uid (two ``train`` calls in one job need two
            names).

    Example::

        >>> TrainConfig(replicas=2, staleness_bound=None).staleness_bound is None
        True
        >>> TrainConfig(python_in="thread")
        Traceback (most recent call last):
        ...
        pyflink_tensair.errors.ConfigError: python_in must be one of 'jvm', 'processes', 'client'. Received: python_in='thread'
    """

    replicas: int = 1
    staleness_bound: Optional[int] = DEFAULT_STALENESS_BOUND
    broadcast_every: int = 1
    buffer_capacity: int = 256
    backpressure: bool = True
    mode: Mode = Mode.TRAIN
    auto: AutoSettings = field(default_factory=AutoSettings)
    peer_updates: PeerUpdates = field(default_factory=PeerUpdates)
    guards: Guards = field(default_factory=Guards)
    seed: int = 0
    sparse_values: str = field(default="float32", metadata={"choices": SPARSE_VALUES})
    python_in: PythonIn = PythonIn.JVM
    trainer_thread: bool = True
    tf_intra_op_threads: Optional[int] = 1
    latency: Optional[LatencySettings] = field(default_factory=LatencySettings)
    checkpoints: Optional[Checkpoints] = None
    exports: Optional[Exports] = None
    updates: Optional[ModelUpdates] = None
    name: str = field(default="tensair", metadata={"flag": False})

    def __post_init__(self):
        require_int("replicas", self.replicas, 1)
        require_int("staleness_bound", self.staleness_bound, 0, optional=True)
        require_int("broadcast_every", self.broadcast_every, 1)
        if self.staleness_bound == 0 and self.broadcast_every != 1:
            raise ConfigError(
                "broadcast_every must be 1 when staleness_bound=0 (synchronous SGD exchanges "
                f"every step). Received: broadcast_every={self.broadcast_every!r}"
            )
        require_int("buffer_capacity", self.buffer_capacity, 1)
        for name in ("backpressure", "trainer_thread"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be True or False. Received: {name}={getattr(self, name)!r}")
        require_int("seed", self.seed, 0)
        require_int("tf_intra_op_threads", self.tf_intra_op_threads, 1, optional=True)
        object.__setattr__(self, "mode", _as_enum("TrainConfig", "mode", self.mode, Mode))
        object.__setattr__(self, "python_in", _as_enum("TrainConfig", "python_in", self.python_in, PythonIn))
        if self.mode is Mode.AUTO and self.staleness_bound == 0:
            raise ConfigError("mode 'auto' needs staleness_bound None or > 0: synchronous replicas would have to agree "
                              "on the step at which they stop and resume training, which they do not yet. "
                              "Received: mode='auto', staleness_bound=0")
        for name, kind in (("auto", AutoSettings), ("peer_updates", PeerUpdates), ("guards", Guards)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"{name} must be a {kind.__name__}. Received: {name}={getattr(self, name)!r}")
        for name, kind in (("latency", LatencySettings), ("checkpoints", Checkpoints), ("exports", Exports),
                           ("updates", ModelUpdates)):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), kind):
                raise ConfigError(f"{name} must be a {kind.__name__} or None. Received: {name}={getattr(self, name)!r}")
        if self.staleness_bound == 0 and self.peer_updates.weighs_gradients:
            raise ConfigError("peer_updates weigh DASGD's peer gradients; synchronous replicas (staleness_bound=0) "
                              f"apply every step's average. Received: staleness_bound=0, peer_updates={self.peer_updates!r}")
        require_field_choices(self)
        if not isinstance(self.name, str) or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(
                "name must be a non-empty string of letters, digits, '-' and '_'. "
                f"Received: name={self.name!r}"
            )


@dataclass(frozen=True)
class ServeConfig:
    """How :func:`~pyflink_tensair.serve` answers live events: the serving side's every default.

    Attributes:
        parallelism: inference subtasks; each holds a model and applies every update.
        batch_size: events in one micro-batch at most (grouped on the JVM, one ``predict`` each).
        max_wait_ms: the longest an event waits for its micro-batch to fill, so that a slow
            stream is still answered (> 0).
        python_in: :class:`PythonIn`, where the servers' Python runs (``"jvm"``: inside the
            TaskManagers, or ``"processes"``).
        seed: seeds the model's initialisation when ``model`` is a builder (the training's
            ``TrainConfig.seed`` gives the same starting weights).
        name: prefix of every operator's name and uid.

    Example::

        >>> ServeConfig(parallelism=2).max_wait_ms
        20.0
    """

    parallelism: int = 1
    batch_size: int = 64
    max_wait_ms: float = 20.0
    python_in: PythonIn = PythonIn.JVM
    seed: int = 0
    name: str = "serve"

    def __post_init__(self):
        require_int("ServeConfig.parallelism", self.parallelism, 1)
        require_int("ServeConfig.batch_size", self.batch_size, 1)
        require_number("ServeConfig.max_wait_ms", self.max_wait_ms, above=0, unit="milliseconds")
        require_int("ServeConfig.seed", self.seed, 0)
        object.__setattr__(self, "python_in", _as_enum("ServeConfig", "python_in", self.python_in, PythonIn))
        if self.python_in is PythonIn.CLIENT:
            raise ConfigError("ServeConfig.python_in must be 'jvm' or 'processes'. Received: python_in='client'")
        if not isinstance(self.name, str) or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"ServeConfig.name must be letters, digits, '-' and '_'. Received: name={self.name!r}")


def python_in_of(value, *, client: bool = True) -> PythonIn:
    """The :class:`PythonIn` that ``value`` (one, or its name) names; ``client=False``: ``"jvm"``
    or ``"processes"`` only (the online operators and the servers).

    Example::

        >>> python_in_of("processes") is PythonIn.PROCESSES
        True
        >>> python_in_of("client", client=False)
        Traceback (most recent call last):
        ...
        pyflink_tensair.errors.ConfigError: python_in must be one of 'jvm', 'processes'. Received: python_in='client'
    """
    allowed = [m for m in PythonIn if client or m is not PythonIn.CLIENT]
    try:
        found = PythonIn(value)
    except ValueError:
        found = None
    if found not in allowed:
        raise ConfigError(f"python_in must be one of {', '.join(repr(m.value) for m in allowed)}. "
                          f"Received: python_in={value!r}")
    return found


TIMES = ("event", "processing")


@dataclass(frozen=True)
class JoinConfig:
    """How :func:`~pyflink_tensair.join_labels` joins events with their labels (its keywords are
    these fields: ``join_labels(events, labels, timeout_ms=60_000)`` is
    ``join_labels(events, labels, JoinConfig(timeout_ms=60_000))``).

    Attributes:
        timeout_ms: how long an event waits for its label (> 0).
        time: ``"event"`` (the streams' timestamps and watermarks: assign them at the sources,
            e.g. Kafka's record time; a job's outcome then never depends on its speed) or
            ``"processing"`` (the wall clock).
        default_label: the label of an event whose label did not come in time (e.g. ``0``, "no
            click"), or ``None`` to drop it; counted in ``timeouts`` either way.
        retention_ms: how long a closed id is remembered, to tell a second or late label from a
            label without event (``None``: ``timeout_ms``); then its state is cleared.
        event_key, label_key, label: how to read an id and a label from the texts (``None``: the
            JSON ``"id"``, and ``"y"``).
        python_in: where the join's Python runs: ``"jvm"`` (inside the TaskManagers) or ``"processes"``.
        name: prefix of its operators' names and uids.

    Example::

        >>> JoinConfig(timeout_ms=60_000, default_label=0).retention_ms is None
        True
    """

    timeout_ms: float
    time: str = "event"
    default_label: Any = None
    retention_ms: Optional[float] = None
    event_key: Optional[Callable[[str], str]] = None
    label_key: Optional[Callable[[str], str]] = None
    label: Optional[Callable] = None
    python_in: PythonIn = PythonIn.JVM
    name: str = "join"

    def __post_init__(self):
        require_number("timeout_ms", self.timeout_ms, above=0, unit="milliseconds")
        require_number("retention_ms", self.retention_ms, 0, optional=True, unit="milliseconds")
        if self.time not in TIMES:
            raise ConfigError(f"time must be 'event' or 'processing'. Received: time={self.time!r}")
        if self.default_label is not None and not isinstance(self.default_label, (str, bool)) \
                and not is_number(self.default_label):
            raise ConfigError("default_label must be a number, a string or None. "
                              f"Received: default_label={self.default_label!r}")
        for what in ("event_key", "label_key", "label"):
            require_callable(what, getattr(self, what), "a function of one text", optional=True)
        object.__setattr__(self, "python_in", python_in_of(self.python_in, client=False))


@dataclass(frozen=True)
class ScoreConfig:
    """How :func:`~pyflink_tensair.score` scores served predictions against their labels (its
    keywords are these fields).

    Attributes:
        window: scored events in the sliding window.
        report_every: a window report every this many scored events.
        retention_ms: how long a prediction waits for its label, or a label for its prediction
            (processing time), before it is forgotten and counted as unmatched.
        label_field: the label's field in the records' JSON.
        key: the id of a record's text (``None``: its JSON ``"id"``, as a string).
        python_in: where the Python operators run: ``"jvm"`` (inside the TaskManagers) or ``"processes"``.
        name: the metric group and the reports' ``"name"`` (e.g. ``"served"``, ``"frozen"``).

    Example::

        >>> ScoreConfig(name="served").window
        200
    """

    window: int = 200
    report_every: int = 50
    retention_ms: float = 600_000
    label_field: str = "y"
    key: Optional[Callable[[str], str]] = None
    python_in: PythonIn = PythonIn.JVM
    name: str = "score"

    def __post_init__(self):
        require_int("window", self.window, minimum=1)
        require_int("report_every", self.report_every, minimum=1)
        require_number("retention_ms", self.retention_ms, above=0, unit="milliseconds")
        require_text("label_field", self.label_field)
        require_callable("key", self.key, "a function of one record's text (its id)", optional=True)
        object.__setattr__(self, "python_in", python_in_of(self.python_in, client=False))


def with_fields(config_type, config, fields: dict):
    """``config`` (a ``config_type``, or ``None``) with ``fields`` set: a verb's keywords are its
    config's fields (``score(p, r, window=50)`` is ``score(p, r, ScoreConfig(window=50))``)."""
    if config is None:
        return config_type(**fields)
    if not isinstance(config, config_type):
        raise ConfigError(f"config must be a {config_type.__name__}. Received: config={config!r:.100}")
    return dataclasses.replace(config, **fields) if fields else config


def as_train_config(config) -> TrainConfig:
    """``config`` itself, once checked to be a :class:`TrainConfig` (the first line of ``train()``
    and of every in-process runner).

    Example::

        >>> as_train_config(TrainConfig(replicas=2)).replicas
        2
    """
    if not isinstance(config, TrainConfig):
        raise ConfigError(f"config must be a TrainConfig. Received: config={config!r}")
    return config
