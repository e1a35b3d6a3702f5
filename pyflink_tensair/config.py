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
from dataclasses import dataclass, field
from typing import Optional

from .errors import ConfigError



SPARSE_VALUES = ("float32", "float16")  # how embedding rows may travel in gradient messages

class Mode(str, enum.Enum):
    """What a replica does with a mini-batch; every batch is predicted in every mode.

    ``TRAIN`` (also ``"always"``): predict on it, then train on it (prequential, test-then-train).
    ``SERVE`` (also ``"never"``): predict on it only (e.g. a pre-trained model); gradients from
    peers are still applied.
    ``AUTO``: train until converged, then serve and watch the loss with a drift detector; on a
    drift every replica trains again (:class:`AutoSettings`, :class:`~pyflink_tensair.drift.AutoPolicy`).

        >>> Mode("always") is Mode.TRAIN, Mode("never") is Mode.SERVE
        (True, True)
    """

    TRAIN = "train"
    SERVE = "serve"
    AUTO = "auto"

    @classmethod
    def _missing_(cls, value):
        return {"always": cls.TRAIN, "never": cls.SERVE}.get(value)


class WorkerMode(str, enum.Enum):
    """Where PyFlink runs the Python functions of a job started on a local mini-cluster.

    ``PROCESS``: separate Python worker processes, as on a real cluster (the default).
    ``LOOPBACK``: inside the client process (PyFlink's local default; handy for debugging).
    A job submitted to a cluster always uses separate processes.
    """

    PROCESS = "process"
    LOOPBACK = "loopback"


class TrainerMode(str, enum.Enum):
    """Which thread runs a replica's model inside its Flink function.

    ``THREAD``: a trainer thread owns the replica. Flink's callbacks only queue batches and peer
    messages (messages ahead of batches) and emit what is ready, so moving the next record into
    Python overlaps the current step (the default).
    ``INLINE``: each callback trains before it returns, while Flink's task thread waits.
    """

    THREAD = "thread"
    INLINE = "inline"


class ReplicaExecution(str, enum.Enum):
    """Where a replica's Python function runs (PyFlink's ``python.execution-mode``, for the
    replicas only: the rest of the job keeps its own).

    ``THREAD``: inside the TaskManager's JVM, through PEMJA: Flink's task thread calls the
    function directly, nothing is copied through gRPC (the default: at two replicas on two cores
    it trains 1.4 (dense) to 1.9 (sparse) times as many batches per second,
    docs/measurements.md). All the replicas of one TaskManager share its one interpreter (and its
    GIL: TensorFlow releases it inside its ops) and its memory: TensorFlow's allocations count
    against the TaskManager's process, not Flink's managed memory. The interpreter must find the
    job's packages: the job's ``python.pythonpath`` gets the client's import paths, which a remote
    TaskManager must have too (see :func:`~pyflink_tensair.flink.execution.operator_configuration`),
    and a session cluster running several such jobs needs flink-python in its ``lib/``.
    ``PROCESS``: in a Python worker process, PyFlink's default; every batch and peer message
    crosses into it as a Beam bundle through gRPC.
    """

    THREAD = "thread"
    PROCESS = "process"


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require_int(name: str, value, minimum: int) -> None:
    if not _is_int(value) or value < minimum:
        raise ConfigError(f"{name} must be an int >= {minimum}. Received: {name}={value!r}")


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
    detector: str = "optwin"
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
    damping: str = "none"
    rule: str = "optimizer"
    sgd_learning_rate: Optional[float] = None
    average_every: Optional[int] = DEFAULT_AVERAGE_EVERY

    def __post_init__(self):
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)) or not 0 < self.scale <= 1:
            raise ConfigError(f"PeerUpdates.scale must be a number in (0, 1]. Received: scale={self.scale!r}")
        if self.damping not in PEER_DAMPING:
            raise ConfigError(f"PeerUpdates.damping must be 'none' or 'inverse'. Received: damping={self.damping!r}")
        if self.rule not in PEER_RULES:
            raise ConfigError(f"PeerUpdates.rule must be 'optimizer' or 'sgd'. Received: rule={self.rule!r}")
        if self.rule == "sgd" and (isinstance(self.sgd_learning_rate, bool) or not isinstance(
                self.sgd_learning_rate, (int, float)) or not self.sgd_learning_rate > 0):
            raise ConfigError("PeerUpdates(rule='sgd') needs sgd_learning_rate, a number > 0 (the plain step's "
                              f"learning rate). Received: sgd_learning_rate={self.sgd_learning_rate!r}")
        if self.average_every is not None and (not _is_int(self.average_every) or self.average_every < 1):
            raise ConfigError(f"PeerUpdates.average_every must be an int >= 1 or None. "
                              f"Received: average_every={self.average_every!r}")
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

    bad_input: str = "dead_letter"
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    max_gradient_norm: Optional[float] = None
    norm_action: str = "reject"

    def __post_init__(self):
        if self.bad_input not in BAD_INPUT_POLICIES:
            raise ConfigError(f"Guards.bad_input must be 'dead_letter' or 'fail'. Received: bad_input={self.bad_input!r}")
        _require_int("max_batch_bytes", self.max_batch_bytes, 1)
        if self.max_gradient_norm is not None and (isinstance(self.max_gradient_norm, bool) or not isinstance(
                self.max_gradient_norm, (int, float)) or not 0 < self.max_gradient_norm < float("inf")):
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
        _require_int("bundle_size", self.bundle_size, 1)
        _require_int("bundle_time_ms", self.bundle_time_ms, 1)
        _require_int("buffer_timeout_ms", self.buffer_timeout_ms, 0)
        _require_int("network_buffer_kb", self.network_buffer_kb, 4)

    def as_flink_options(self) -> dict:
        return {
            "python.fn-execution.bundle.size": str(self.bundle_size),
            "python.fn-execution.bundle.time": str(self.bundle_time_ms),
            "execution.buffer-timeout.interval": f"{self.buffer_timeout_ms} ms",
            "taskmanager.memory.segment-size": f"{self.network_buffer_kb}kb",
        }


@dataclass(frozen=True)
class TrainConfig:
    """How the replicas train and exchange gradients.

    Attributes:
        replicas: number of model replicas; replica ``r`` runs on subtask ``r``.
        staleness_bound: ``s``. A replica starts its local step ``k + 1`` only after it has
            applied, from every peer still training, that peer's gradients up to its step
            ``k - s``. ``0`` is synchronous SGD (every replica applies the same averaged gradient
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
        mode: :class:`Mode` of the replicas: ``"train"`` (``"always"``), ``"serve"``
            (``"never"``) or ``"auto"`` (not with ``staleness_bound=0``).
        auto: :class:`AutoSettings` of ``Mode.AUTO``.
        peer_updates: :class:`PeerUpdates`, how DASGD replicas weigh their peers' gradients
            and how often they average their weights. With ``staleness_bound=0`` every replica
            applies the same average and the replicas stay equal: weighing is refused there, and
            averaging equal weights changes nothing (no weights are sent).
        guards: :class:`Guards`, what happens to bad input and poisoned peer messages
            (by default: set aside into ``TrainOutput.dead_letters``, counted, the job goes on).
        seed: seeds model initialisation; every replica starts from the same weights.
        tf_intra_op_threads: TensorFlow intra-op threads per replica (``None``: TensorFlow's
            default, all cores).
        latency: :class:`LatencySettings` applied to the job, or ``None`` to keep the job's own.
        workers: :class:`WorkerMode` for a local mini-cluster.
        trainer: :class:`TrainerMode`, which thread trains inside the replica's function.
        replica_execution: :class:`ReplicaExecution`, whether the replicas run inside the
            TaskManagers' JVMs (the default) or in Python worker processes.
        checkpoint_interval_s: seconds between Flink checkpoints, each holding every replica's
            state (weights, optimizer slots, counters, held batches, unacknowledged messages);
            ``None`` leaves the job's own checkpointing settings alone.
        state_backend: ``"hashmap"`` (state on the JVM heap) or ``"rocksdb"`` (on local disk),
            with checkpoints.
        checkpoint_dir: where checkpoints go (a path or a URI); ``None``: the job's own setting
            (the JobManager's memory, if none).
        restart_attempts: restarts from the last checkpoint before the job fails (waiting 1 s,
            then twice as long each time, up to 20 s), unless the job sets its own restart
            strategy.
        sparse_values: ``"float32"`` (default) or ``"float16"``: how embedding rows travel in
            gradient messages. ``"float16"`` halves a sparse message's bytes; every replica
            rounds its own rows the same way before using them, so synchronous replicas stay
            identical (with ``broadcast_every > 1`` a summed message is rounded once more).
            Dense gradients always travel as float32.
        export_every_s: seconds between exports of replica 0's current model, as
            ``<export_dir>/model-v<version>.keras`` (written whole or not at all; the last one when
            the replica finishes); ``None``: no exports.
        export_dir: where the exports go: a local folder the TaskManagers can write (on a
            cluster, a shared one). Required with ``export_every_s``.
        name: prefix of every operator's name and uid (two ``train`` calls in one job need two
            names).

    Example::

        >>> TrainConfig(replicas=2, staleness_bound=None).staleness_bound is None
        True
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
    tf_intra_op_threads: Optional[int] = 1
    latency: Optional[LatencySettings] = field(default_factory=LatencySettings)
    workers: WorkerMode = WorkerMode.PROCESS
    trainer: TrainerMode = TrainerMode.THREAD
    replica_execution: ReplicaExecution = ReplicaExecution.THREAD
    checkpoint_interval_s: Optional[float] = None
    state_backend: str = "hashmap"
    checkpoint_dir: Optional[str] = None
    restart_attempts: int = 8
    sparse_values: str = "float32"
    export_every_s: Optional[float] = None
    export_dir: Optional[str] = None
    name: str = "tensair"

    def __post_init__(self):
        _require_int("replicas", self.replicas, 1)
        if self.staleness_bound is not None and (
            not _is_int(self.staleness_bound) or self.staleness_bound < 0
        ):
            raise ConfigError(
                "staleness_bound must be an int >= 0 or None. "
                f"Received: staleness_bound={self.staleness_bound!r}"
            )
        _require_int("broadcast_every", self.broadcast_every, 1)
        if self.staleness_bound == 0 and self.broadcast_every != 1:
            raise ConfigError(
                "broadcast_every must be 1 when staleness_bound=0 (synchronous SGD exchanges "
                f"every step). Received: broadcast_every={self.broadcast_every!r}"
            )
        _require_int("buffer_capacity", self.buffer_capacity, 1)
        if not isinstance(self.backpressure, bool):
            raise ConfigError(f"backpressure must be True or False. Received: backpressure={self.backpressure!r}")
        _require_int("seed", self.seed, 0)
        if self.tf_intra_op_threads is not None:
            _require_int("tf_intra_op_threads", self.tf_intra_op_threads, 1)
        for name, enum_type in (("mode", Mode), ("workers", WorkerMode), ("trainer", TrainerMode),
                                ("replica_execution", ReplicaExecution)):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, enum_type(value))
            except ValueError:
                allowed = ", ".join(repr(m.value) for m in enum_type)
                raise ConfigError(
                    f"{name} must be one of {allowed}. Received: {name}={value!r}"
                ) from None
        if self.mode is Mode.AUTO and self.staleness_bound == 0:
            raise ConfigError("mode 'auto' needs staleness_bound None or > 0: synchronous replicas would have to agree "
                              "on the step at which they stop and resume training, which they do not yet. "
                              "Received: mode='auto', staleness_bound=0")
        if not isinstance(self.peer_updates, PeerUpdates):
            raise ConfigError(f"peer_updates must be a PeerUpdates. Received: peer_updates={self.peer_updates!r}")
        if self.staleness_bound == 0 and self.peer_updates.weighs_gradients:
            raise ConfigError("peer_updates weigh DASGD's peer gradients; synchronous replicas (staleness_bound=0) "
                              f"apply every step's average. Received: staleness_bound=0, peer_updates={self.peer_updates!r}")
        if not isinstance(self.guards, Guards):
            raise ConfigError(f"guards must be a Guards. Received: guards={self.guards!r}")
        if not isinstance(self.auto, AutoSettings):
            raise ConfigError(f"auto must be an AutoSettings. Received: auto={self.auto!r}")
        if self.checkpoint_interval_s is not None and (
            isinstance(self.checkpoint_interval_s, bool) or not isinstance(self.checkpoint_interval_s, (int, float))
            or not self.checkpoint_interval_s >= 0.01
        ):
            raise ConfigError("checkpoint_interval_s must be a number of seconds >= 0.01 or None. "
                              f"Received: checkpoint_interval_s={self.checkpoint_interval_s!r}")
        if self.state_backend not in ("hashmap", "rocksdb"):
            raise ConfigError(f"state_backend must be 'hashmap' or 'rocksdb'. Received: state_backend={self.state_backend!r}")
        if self.checkpoint_dir is not None and (not isinstance(self.checkpoint_dir, str) or not self.checkpoint_dir):
            raise ConfigError(f"checkpoint_dir must be a non-empty path or URI, or None. "
                              f"Received: checkpoint_dir={self.checkpoint_dir!r}")
        _require_int("restart_attempts", self.restart_attempts, 0)
        if self.sparse_values not in SPARSE_VALUES:
            raise ConfigError(f"sparse_values must be 'float32' or 'float16'. Received: sparse_values={self.sparse_values!r}")
        if self.export_every_s is not None and (
            isinstance(self.export_every_s, bool) or not isinstance(self.export_every_s, (int, float))
            or not self.export_every_s > 0
        ):
            raise ConfigError("export_every_s must be a number of seconds > 0 or None. "
                              f"Received: export_every_s={self.export_every_s!r}")
        if self.export_dir is not None and (not isinstance(self.export_dir, str) or not self.export_dir):
            raise ConfigError(f"export_dir must be a non-empty path or None. Received: export_dir={self.export_dir!r}")
        if (self.export_every_s is None) != (self.export_dir is None):
            raise ConfigError("export_every_s and export_dir go together: set both to export the model while "
                              f"training, or neither. Received: export_every_s={self.export_every_s!r}, "
                              f"export_dir={self.export_dir!r}")
        if self.latency is not None and not isinstance(self.latency, LatencySettings):
            raise ConfigError(
                "latency must be a LatencySettings or None. "
                f"Received: latency={self.latency!r}"
            )
        if not isinstance(self.name, str) or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(
                "name must be a non-empty string of letters, digits, '-' and '_'. "
                f"Received: name={self.name!r}"
            )


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
