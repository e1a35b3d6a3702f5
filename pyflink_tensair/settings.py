"""The groups of settings a :class:`~pyflink_tensair.TrainConfig` holds, each a frozen dataclass
validated on construction: :class:`AutoSettings` (``Mode.AUTO``), :class:`PeerUpdates` (how DASGD
replicas weigh their peers), :class:`Guards` (bad input), :class:`LatencySettings`,
:class:`Checkpoints`, :class:`Exports` and :class:`ModelUpdates`. ``pyflink_tensair.config``
re-exports them.

    >>> Guards(norm_action="clip", max_gradient_norm=10.0).norm_action
    'clip'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .errors import ConfigError
from .validation import is_number, require_field_choices, require_int, require_number


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
    (:mod:`pyflink_tensair.core.peer_gradients` applies them; ``docs/use_cases.md`` compares them).
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
        require_field_choices(self, "PeerUpdates")
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
        require_field_choices(self, "Guards")
        require_int("max_batch_bytes", self.max_batch_bytes, 1)
        if self.max_gradient_norm is not None and (not is_number(self.max_gradient_norm)
                                                   or not 0 < self.max_gradient_norm < float("inf")):
            raise ConfigError("Guards.max_gradient_norm must be a finite number > 0 or None. "
                              f"Received: max_gradient_norm={self.max_gradient_norm!r}")


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

        >>> Checkpoints(interval_s=5, dir="/tmp/ckpt").state_backend
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
        require_field_choices(self, "Checkpoints")
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

        >>> ModelUpdates(every_ms=100).snapshot_every
        20
    """

    every_ms: float = 200.0
    every_steps: Optional[int] = None
    snapshot_every: int = 20

    def __post_init__(self):
        require_number("ModelUpdates.every_ms", self.every_ms, above=0, unit="milliseconds")
        require_int("ModelUpdates.every_steps", self.every_steps, 1, optional=True)
        require_int("ModelUpdates.snapshot_every", self.snapshot_every, 1)
