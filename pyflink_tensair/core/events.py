"""What a replica asks its runtime to emit. The replica never touches Flink; it returns these."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, make_dataclass
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

import numpy as np

from ..validation import is_int
from .counters import METRIC
from .messages import PeerMessage, Scalar

# Anything a replica returns for its host to emit: the dataclasses below, dead letters
# (core.messages) and model updates (core.model_updates); hosts route them by type (flink.types).
Event = object


@dataclass(frozen=True)
class Prediction:
    """The model's output on one batch, computed before the batch was trained on."""

    replica: int
    batch_id: int
    model_version: int
    predictions: np.ndarray
    loss: Optional[float] = None
    accuracy: Optional[float] = None
    meta: Mapping[str, Scalar] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MetricsFields:
    """The fields of a :class:`Metrics` record that are not counters (keywords only)."""

    replica: int
    phase: str
    time: float
    local_step: int
    model_version: int
    loss: Optional[float]
    accuracy: Optional[float]
    staleness: int
    batches_per_s: float
    held_batches: int
    batch_id: int = -1
    delay_s: Optional[float] = None
    model_busy_s: float = 0.0
    callback_s: Optional[float] = None
    codec_s: Optional[float] = None
    idle_s: Optional[float] = None
    trained: Optional[bool] = None  # whether this batch was trained on (False: served only); None off "batch" records

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


_METRICS_DOC = """One replica's progress after a batch (``phase="batch"``), at its end (``"final"``), or where it
    resumed after a restore from a checkpoint (``"restored"``). Built with keywords only.

    ``staleness`` is how many local steps the replica was ahead of the slowest peer whose
    gradients it had applied, when it started the step (it never exceeds the staleness bound
    unless ``bound_overflows`` grew). ``delay_s`` is how long after its ``scheduled_at`` time the
    batch finished training (``None`` when the batch carried no schedule). ``model_busy_s`` is the
    replica's total time inside its model so far (gradients, updates, predictions): its growth
    against wall time is how busy the model kept the replica's process.

    The host's profile, totals so far (``None`` where the host does not measure it):
    ``callback_s`` seconds inside the Flink callbacks of the replica's function (with an inline
    trainer this includes the model), ``codec_s`` of them decoding inputs and encoding outputs,
    ``idle_s`` the trainer thread's time waiting for work.

    The counters the table of :mod:`~pyflink_tensair.core.counters` marks ``metric`` are fields
    too (ints, 0 by default): messages and bytes sent, messages applied, Guards' counts, ...

    Example::

        >>> m = Metrics(replica=0, phase="batch", time=1.0, local_step=2, model_version=2, loss=0.5, accuracy=None,
        ...             staleness=0, batches_per_s=4.0, held_batches=0, messages_sent=2)
        >>> Metrics.from_json(m.to_json()) == m, m.dead_letters
        (True, 0)
    """


def _metrics_class():
    """:class:`MetricsFields` with a field for each counter the counters table marks ``metric``."""
    cls = make_dataclass("Metrics", [(name, int, field(default=0)) for name in METRIC], bases=(MetricsFields,),
                         frozen=True, kw_only=True)
    cls.__module__, cls.__doc__ = __name__, _METRICS_DOC
    cls.from_json = staticmethod(lambda text: cls(**json.loads(text)))
    return cls


if TYPE_CHECKING:
    class Metrics(MetricsFields):  # what type checkers see: the counters are ints
        def __init__(self, **fields: Any) -> None: ...

        def __getattr__(self, name: str) -> int: ...

        @staticmethod
        def from_json(text: str) -> "Metrics": ...
else:
    Metrics = _metrics_class()


@dataclass(frozen=True)
class ModeChange:
    """A replica in ``auto`` mode stopped training (``training=False``, ``reason="converged"``) or
    started again (``reason="drift"``: its own detector fired, ``statistics`` are the detector's;
    ``"peer_drift"``: it followed replica ``origin``). ``batch_id``: the batch that decided it
    (``-1`` for a peer's notice); ``local_step``: the replica's trained steps at that moment.

    Example::

        >>> ModeChange.from_json(ModeChange(0, 1.5, 7, 3, False, "converged", 0).to_json()).reason
        'converged'
    """

    replica: int
    time: float
    batch_id: int
    local_step: int
    training: bool
    reason: str
    origin: int
    statistics: Dict[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> "ModeChange":
        return ModeChange(**json.loads(text))


@dataclass(frozen=True)
class Broadcast:
    """A message for every other replica."""

    message: PeerMessage


@dataclass(frozen=True)
class FinalModel:
    """A replica's weights once its input ended and every peer's last message was applied.

    ``initial_digest`` fingerprints the weights the replica started from: replicas that started
    equal share it.
    """

    replica: int
    model_version: int
    weights: Dict[str, np.ndarray]
    initial_digest: str = ""
    # id tables' maps ({table: {"layers", "rows", "ids": [[id, row], ...]}}, pyflink_tensair.core.row_resets)
    id_maps: Dict[str, Any] = field(default_factory=dict)


def encode_final_model(event: FinalModel) -> bytes:
    """A :class:`FinalModel` as the ``models`` stream carries it (a tensors record)."""
    from . import wire

    meta = {"replica": event.replica, "model_version": event.model_version, "initial_digest": event.initial_digest}
    if event.id_maps:
        meta["id_maps"] = json.dumps(event.id_maps, separators=(",", ":"))
    return wire.encode_tensors(event.weights, meta)


def decode_final_model(data) -> FinalModel:
    """Decodes a record of the ``models`` stream (as a sink or ``execute_and_collect()`` gets it)."""
    from . import wire

    meta, tensors = wire.decode_tensors(data)
    replica: Any = meta.get("replica")
    version: Any = meta.get("model_version")
    digest: Any = meta.get("initial_digest", "")
    if not is_int(replica) or not is_int(version) or not isinstance(digest, str) or replica < 0 or version < 0:
        raise wire.WireFormatError("a final-model record needs ints 'replica' and 'model_version' >= 0 and a str "
                                   f"'initial_digest'. Received: {meta!r:.200}")
    try:
        id_maps = json.loads(meta["id_maps"]) if "id_maps" in meta else {}
    except (TypeError, json.JSONDecodeError):
        raise wire.WireFormatError("a final-model record's 'id_maps' is not JSON text") from None
    return FinalModel(replica, version, dict(tensors), digest, id_maps)


def weights_digest(weights: Dict[str, np.ndarray]) -> str:
    """A short fingerprint of a set of weights.

    Example::

        >>> weights_digest({"w": np.zeros(3)}) == weights_digest({"w": np.zeros(3)})
        True
    """
    digest = hashlib.sha1()
    for name in sorted(weights):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(weights[name]).tobytes())
    return digest.hexdigest()[:16]
