"""Configuration of a training job: frozen dataclasses validated on construction.

Every rule violation raises :class:`~pyflink_tensair.errors.ConfigError` naming the field, the rule and
the value received, the way Keras reports bad arguments::

    >>> TrainConfig(staleness_bound=-1)
    Traceback (most recent call last):
    ...
    pyflink_tensair.errors.ConfigError: staleness_bound must be an int >= 0 or None. Received: staleness_bound=-1
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from typing import Optional

from .errors import ConfigError
from .validation import is_number, require_int, require_number



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
        renamed = _RENAMED_VALUES.get((name, value))
        hint = f" ({value!r} is now {renamed!r}: see CHANGELOG.md)" if renamed else ""
        raise ConfigError(f"{name} must be one of {allowed}. Received: {name}={value!r}{hint}") from None


_RENAMED_VALUES = {("mode", "always"): "train", ("mode", "never"): "serve"}


DETECTORS = ("optwin", "page_hinkley")


@dataclass(frozen=True)
class AutoSettings:
    """How replicas in ``Mode.AUTO`` decide to stop and to resume training.

    Attributes:
        window: batches per window of the convergence test: converged once the mean prequential
            loss of the last ``window`` batches is not below ``(1 - tolerance)`` times that of the
            ``window`` before (at least ``2 * window`` batches after training started).
        tolerance: the relative improvement below which the loss counts as no longer falling.
        detector: the drift detector watching the loss while serving: ``"optwin"`` or
            ``"page_hinkley"``; ``detector_parameters`` go to its constructor.

    Example::

        >>> AutoSettings(detector="page_hinkley", detector_parameters={"threshold": 5.0}).window
        50
    """

    window: int = 50
    tolerance: float = 0.01
    detector: str = field(default="optwin", metadata={"choices": DETECTORS})
    detector_parameters: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.detector_parameters, dict):
            raise ConfigError(f"detector_parameters must be a dict. Received: detector_parameters={self.detector_parameters!r}")
        self.policy()  # checks every field

    def policy(self):
        """A fresh :class:`~pyflink_tensair.drift.AutoPolicy` with these settings."""
        from .drift.policy import AutoPolicy

        return AutoPolicy(window=self.window, tolerance=self.tolerance, detector=self.detector,
                          detector_parameters=self.detector_parameters)


PEER_DAMPING = ("none", "inverse")
PEER_RULES = ("optimizer", "sgd")
DEFAULT_STALENESS_BOUND = 1  # docs/use_cases.md, "DASGD against synchronous SGD"
DEFAULT_AVERAGE_EVERY = 8


@dataclass(frozen=True)
class PeerUpdates:
    """How a DASGD replica applies its peers' gradients: the remedies for stale gradients.

    A peer's gradient was computed on the peer's weights some steps ago; applied at full size
    through the replica's own optimizer, every replica takes one full step per batch of every
    replica, on ever staler gradients. These settings weigh peer gradients down
    (:mod:`pyflink_tensair.core.peer_updates` applies them; ``docs/use_cases.md`` compares them).
    Own gradients are always applied as they are, through the model's optimizer.

    Attributes:
        scale: a factor on every peer gradient, in ``(0, 1]``.
        damping: ``"none"``, or ``"inverse"``: a further factor ``1 / (1 + tau)``, ``tau`` the
            local steps the receiver has taken past the sender's step (``local_step - step``,
            at least 0): the older a gradient, the less it counts.
        rule: ``"optimizer"``: peer gradients go through the model's optimizer (its slots,
            e.g. Adam's moments, see them); ``"sgd"``: a plain step ``w -= sgd_learning_rate *
            factor * g`` that leaves the optimizer's slots to the replica's own gradients (the
            model needs ``apply_sgd``; the Keras adapter has it).
        sgd_learning_rate: the plain step's learning rate; required with ``rule="sgd"``.
        average_every: every this many local steps (default 8) a replica sends its weights
            through the loop, and each peer moves its own ``1 / replicas`` of the way towards
            them (periodic model averaging); ``None``: never (TensAIR's rule). Only variables with dense gradients are averaged:
            embedding tables (sparse gradients) stay out, their rows travel in the gradient
            messages and a whole table every few steps would outweigh them many times.

    Example::

        >>> PeerUpdates(scale=0.5, damping="inverse").factor(local_step=10, sender_step=7)
        0.125
        >>> PeerUpdates.tensair().plain  # TensAIR's rule: as they are, never averaged
        True
    """

    scale: float = 1.0
    damping: str = field(default="none", metadata={"choices": PEER_DAMPING})
    rule: str = field(default="optimizer", metadata={"choices": PEER_RULES})
    sgd_learning_rate: Optional[float] = None
    average_every: Optional[int] = DEFAULT_AVERAGE_EVERY

    def __post_init__(self):
        if not is_number(self.scale) or not 0 < self.scale <= 1:
            raise ConfigError(f"PeerUpdates.scale must be a number in (0, 1]. Received: scale={self.scale!r}")
        if self.damping not in PEER_DAMPING:
            raise ConfigError(f"PeerUpdates.damping must be 'none' or 'inverse'. Received: damping={self.damping!r}")
        if self.rule not in PEER_RULES:
            raise ConfigError(f"PeerUpdates.rule must be 'optimizer' or 'sgd'. Received: rule={self.rule!r}")
        if self.rule == "sgd" and (not is_number(self.sgd_learning_rate) or not self.sgd_learning_rate > 0):
            raise ConfigError("PeerUpdates(rule='sgd') needs sgd_learning_rate, a number > 0 (the plain step's "
                              f"learning rate). Received: sgd_learning_rate={self.sgd_learning_rate!r}")
        require_int("PeerUpdates.average_every", self.average_every, 1, optional=True)
        if self.rule == "optimizer" and self.sgd_learning_rate is not None:
            raise ConfigError("sgd_learning_rate is for PeerUpdates(rule='sgd'). "
                              f"Received: rule='optimizer', sgd_learning_rate={self.sgd_learning_rate!r}")

    @classmethod
    def tensair(cls) -> "PeerUpdates":
        """TensAIR's rule: peer gradients applied as they are, weights never averaged."""
        return cls(average_every=None)

    @property
    def weighs_gradients(self) -> bool:
        """Whether peer gradients are applied other than as they are, through the optimizer."""
        return not (self.scale == 1 and self.damping == "none" and self.rule == "optimizer")

    @property
    def plain(self) -> bool:
        """TensAIR's rule: peer gradients applied as they are, weights never averaged."""
        return not self.weighs_gradients and self.average_every is None

    def factor(self, local_step: int, sender_step: int) -> float:
        """The factor on a gradient the sender computed at ``sender_step``, applied by a replica
        that has taken ``local_step`` steps."""
        if self.damping == "none":
            return float(self.scale)
        return float(self.scale) / (1 + max(0, local_step - sender_step))


BAD_INPUT_POLICIES = ("dead_letter", "fail")
NORM_ACTIONS = ("reject", "clip")
DEFAULT_MAX_BATCH_BYTES = 64 * 2 ** 20


@dataclass(frozen=True)
class Guards:
    """What the replicas let in: bad input, poisoned peer messages, outliers
    (:mod:`pyflink_tensair.core.guards` checks them; ``docs/reliability.md`` has the table).

    Attributes:
        bad_input: ``"dead_letter"`` (default): a record, batch or corpus line that cannot be
            trained on (not a record, a missing field, the wrong shape or dtype for the model,
            NaN or infinite values, empty, oversized, a label outside the model's classes) goes
            to ``TrainOutput.dead_letters`` with the reason and its position, is counted, and
            the job goes on. ``"fail"``: the first one fails the job with a ``BadInputError``.
        max_batch_bytes: a batch larger than this is set aside as ``"oversized"``.
        max_gradient_norm: a peer message whose gradient's global L2 norm is larger is an
            outlier (``None``: no bound). Non-finite peer gradients are always refused.
        norm_action: what happens to an outlier: ``"reject"`` (not applied, counted) or
            ``"clip"`` (scaled down to the bound, applied, counted).

    Peer messages that do not fit the model (unknown or missing tensors, wrong shapes,
    indices outside a table, non-finite values, another protocol version) are refused whatever
    the policy: they are counted (``messages_rejected``) and reported in the dead-letter
    stream, and the protocol goes on as if the sender's step had been applied.

    Example::

        >>> Guards(max_gradient_norm=10.0, norm_action="clip").norm_action
        'clip'
    """

    bad_input: str = field(default="dead_letter", metadata={"choices": BAD_INPUT_POLICIES})
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    max_gradient_norm: Optional[float] = None
    norm_action: str = field(default="reject", metadata={"choices": NORM_ACTIONS})

    def __post_init__(self):
        if self.bad_input not in BAD_INPUT_POLICIES:
            raise ConfigError(f"Guards.bad_input must be 'dead_letter' or 'fail'. Received: bad_input={self.bad_input!r}")
        require_int("max_batch_bytes", self.max_batch_bytes, 1)
        if self.max_gradient_norm is not None and (not is_number(self.max_gradient_norm)
                                                   or not 0 < self.max_gradient_norm < float("inf")):
            raise ConfigError("Guards.max_gradient_norm must be a finite number > 0 or None. "
                              f"Received: max_gradient_norm={self.max_gradient_norm!r}")
        if self.norm_action not in NORM_ACTIONS:
            raise ConfigError(f"Guards.norm_action must be 'reject' or 'clip'. Received: norm_action={self.norm_action!r}")


@dataclass(frozen=True)
class LatencySettings:
    """Flink settings that decide how fast a gradient goes round the feedback loop.

    PyFlink's defaults batch records for up to a second before a Python worker sees them; a
    gradient loop would then apply peer updates long after they were due. The library sets these
    on the job by default; pass ``TrainConfig(latency=None)`` to keep the environment's own values.

    Attributes:
        bundle_size: ``python.fn-execution.bundle.size``, records per Python bundle.
        bundle_time_ms: ``python.fn-execution.bundle.time``, longest wait before a bundle is flushed.
        buffer_timeout_ms: ``execution.buffer-timeout.interval``, longest wait of a network buffer.
        network_buffer_kb: ``taskmanager.memory.segment-size``, the size of one network buffer.
            Flink's 32 KB splits a 6.6 MB gradient into ~200 buffers, of which a receiver holds
            about 10 until its task thread, busy training, reads them: the gradient then crawls
            and the replicas train on ever staler models. 1 MB lets a whole message in at once.
            A TaskManager setting: applied to a local mini-cluster (with 256 MB of network memory
            unless set); on a standalone cluster it belongs in its ``config.yaml``
            (``python -m pyflink_tensair.cluster`` writes it there).

    Example::

        >>> LatencySettings(bundle_time_ms=5).as_flink_options()["python.fn-execution.bundle.time"]
        '5'
    """

    bundle_size: int = 1
    bundle_time_ms: int = 10
    buffer_timeout_ms: int = 1
    network_buffer_kb: int = 1024

    def __post_init__(self):
        require_int("bundle_size", self.bundle_size, 1)
        require_int("bundle_time_ms", self.bundle_time_ms, 1)
        require_int("buffer_timeout_ms", self.buffer_timeout_ms, 0)
        require_int("network_buffer_kb", self.network_buffer_kb, 4)

    def as_flink_options(self) -> dict:
        return {
            "python.fn-execution.bundle.size": str(self.bundle_size),
            "python.fn-execution.bundle.time": str(self.bundle_time_ms),
            "execution.buffer-timeout.interval": f"{self.buffer_timeout_ms} ms",
            "taskmanager.memory.segment-size": f"{self.network_buffer_kb}kb",
        }


STATE_BACKENDS = ("hashmap", "rocksdb")


@dataclass(frozen=True)
class Checkpoints:
    """Flink checkpoints of every replica's state (weights, optimizer slots, counters, held
    batches, unacknowledged messages), and the restarts from them.

    Attributes:
        interval_s: seconds between checkpoints (at least 0.01).
        dir: where checkpoints go (a path or a URI); ``None``: the job's own setting (the
            JobManager's memory, if none; the jobs: ``<outdir>/checkpoints``).
        state_backend: ``"hashmap"`` (state on the JVM heap) or ``"rocksdb"`` (on local disk).
        restart_attempts: restarts from the last checkpoint before the job fails (waiting 1 s,
            then twice as long each time, up to 20 s), unless the job sets its own restart
            strategy.

    Example::

        >>> TrainConfig(checkpoints=Checkpoints(interval_s=5, dir="/tmp/ckpt")).checkpoints.state_backend
        'hashmap'
    """

    interval_s: float = 10.0
    dir: Optional[str] = None
    state_backend: str = field(default="hashmap", metadata={"choices": STATE_BACKENDS})
    restart_attempts: int = 8

    def __post_init__(self):
        require_number("Checkpoints.interval_s", self.interval_s, 0.01, unit="seconds")
        if self.dir is not None and (not isinstance(self.dir, str) or not self.dir):
            raise ConfigError(f"Checkpoints.dir must be a non-empty path or URI, or None. Received: dir={self.dir!r}")
        if self.state_backend not in STATE_BACKENDS:
            raise ConfigError("Checkpoints.state_backend must be 'hashmap' or 'rocksdb'. "
                              f"Received: state_backend={self.state_backend!r}")
        require_int("Checkpoints.restart_attempts", self.restart_attempts, 0)


@dataclass(frozen=True)
class Exports:
    """Exports of replica 0's current model while it trains, as
    ``<dir>/model-v<version>.keras`` (written whole or not at all; the last one when the replica
    finishes). :func:`pyflink_tensair.models.export.latest_export` finds the newest.

    Attributes:
        every_s: seconds between exports (> 0).
        dir: a local folder the TaskManagers can write (on a cluster, a shared one); the jobs:
            ``<outdir>/exports``.

    Example::

        >>> Exports(every_s=30, dir="/tmp/models").every_s
        30
    """

    every_s: float
    dir: str

    def __post_init__(self):
        require_number("Exports.every_s", self.every_s, above=0, unit="seconds")
        if not isinstance(self.dir, str) or not self.dir:
            raise ConfigError(f"Exports.dir must be a non-empty path. Received: dir={self.dir!r}")


@dataclass(frozen=True)
class ModelUpdates:
    """Versioned model updates that replica 0 publishes while it trains
    (``TrainOutput.updates``), for :func:`~pyflink_tensair.serve` to apply as they arrive.

    An update is a snapshot (every weight) or a delta (the dense weights, and of each embedding
    table only the rows that changed since the previous update); a server that missed a delta
    waits for the next snapshot. Replica 0 publishes: with ``staleness_bound=0`` every replica
    holds the same weights; with DASGD its weights already include every peer's gradients up to
    the bound, while an average would have to gather every replica's weights first (N times the
    bytes, and the slowest replica's delay).

    Attributes:
        every_ms: milliseconds between two updates (the first model change after that long
            publishes; > 0).
        every_steps: publish after this many new model versions even sooner, or ``None``: by
            time only.
        snapshot_every: every n-th update is a snapshot, so that a new or restarted server
            catches up (>= 1; 1: every update whole).

    Example::

        >>> TrainConfig(updates=ModelUpdates(every_ms=100)).updates.snapshot_every
        20
    """

    every_ms: float = 200.0
    every_steps: Optional[int] = None
    snapshot_every: int = 20

    def __post_init__(self):
        require_number("ModelUpdates.every_ms", self.every_ms, above=0, unit="milliseconds")
        require_int("ModelUpdates.every_steps", self.every_steps, 1, optional=True)
        require_int("ModelUpdates.snapshot_every", self.snapshot_every, 1)


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
        >>> TrainConfig(replica_execution="thread")
        Traceback (most recent call last):
        ...
        pyflink_tensair.errors.ConfigError: TrainConfig(replica_execution=...) was renamed: use python_in='jvm' ('thread') or 'processes' ('process'); see CHANGELOG.md
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
        if self.sparse_values not in SPARSE_VALUES:
            raise ConfigError(f"sparse_values must be 'float32' or 'float16'. Received: sparse_values={self.sparse_values!r}")
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


# The names of the release before CHANGELOG.md's 0.2.0: refused with the new name, not guessed.
_RENAMED_FIELDS = {
    "workers": "python_in='client' ('loopback') or 'processes' ('process')",
    "replica_execution": "python_in='jvm' ('thread') or 'processes' ('process')",
    "trainer": "trainer_thread=True ('thread') or False ('inline')",
    "checkpoint_interval_s": "checkpoints=Checkpoints(interval_s=...)",
    "checkpoint_dir": "checkpoints=Checkpoints(dir=...)",
    "state_backend": "checkpoints=Checkpoints(state_backend=...)",
    "restart_attempts": "checkpoints=Checkpoints(restart_attempts=...)",
    "export_every_s": "exports=Exports(every_s=..., dir=...)",
    "export_dir": "exports=Exports(every_s=..., dir=...)",
}
_dataclass_init = TrainConfig.__init__


@functools.wraps(_dataclass_init)
def _init_refusing_old_names(self, *args, **kwargs):
    for old in sorted(kwargs.keys() & _RENAMED_FIELDS.keys()):
        raise ConfigError(f"TrainConfig({old}=...) was renamed: use {_RENAMED_FIELDS[old]}; see CHANGELOG.md")
    _dataclass_init(self, *args, **kwargs)


TrainConfig.__init__ = _init_refusing_old_names  # type: ignore[method-assign]


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
