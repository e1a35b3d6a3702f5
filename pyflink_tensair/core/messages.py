"""The records the replicas consume and exchange: mini-batches, gradient messages, end markers.

All are plain frozen dataclasses of NumPy arrays and scalars, so they are cheap to build in tests
and map one to one onto the wire format (:mod:`pyflink_tensair.core.wire`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple, Union

import numpy as np

from ..errors import ConfigError

Scalar = Union[int, float, str, bool, None]


@dataclass(frozen=True)
class SparseGradient:
    """The gradient of an embedding lookup: only the rows a batch touched.

    ``indices`` are unique row numbers; ``values[i]`` is the summed gradient of row ``indices[i]``.

    Example::

        >>> g = SparseGradient(np.array([3, 7]), np.ones((2, 4), np.float32), (10, 4))
        >>> g.to_dense().sum(), g.nbytes
        (np.float32(8.0), 48)
    """

    indices: np.ndarray
    values: np.ndarray
    dense_shape: Tuple[int, ...]

    def __post_init__(self):
        if self.indices.ndim != 1 or self.values.shape[:1] != self.indices.shape:
            raise ConfigError(
                "SparseGradient needs 1-D indices and one row of values per index. Received: "
                f"indices.shape={self.indices.shape}, values.shape={self.values.shape}"
            )
        if tuple(self.values.shape[1:]) != tuple(self.dense_shape[1:]):
            raise ConfigError(
                "SparseGradient rows must match the dense shape. Received: "
                f"values.shape={self.values.shape}, dense_shape={self.dense_shape}"
            )

    @property
    def nbytes(self) -> int:
        return int(self.indices.nbytes + self.values.nbytes)

    @property
    def dense_nbytes(self) -> int:
        # the table as TensAIR sends it: float32 at least, also when the rows travel as float16
        return int(np.prod(self.dense_shape)) * np.promote_types(self.values.dtype, np.float32).itemsize

    def to_dense(self) -> np.ndarray:
        dense = np.zeros(self.dense_shape, dtype=np.promote_types(self.values.dtype, np.float32))
        np.add.at(dense, self.indices, self.values)
        return dense


Gradient = Union[np.ndarray, SparseGradient]
Gradients = Dict[str, Gradient]


@dataclass(frozen=True)
class Batch:
    """A mini-batch: model inputs ``x``, optional labels ``y`` and scalar metadata.

    ``meta`` may hold ``id`` (an int that predictions carry back) and ``scheduled_at`` (the wall
    time, in seconds, the batch was due; used to measure backlog). Models with several inputs take
    ``x`` as a dict of arrays.

    Example::

        >>> b = Batch(x=np.zeros((4, 3), np.float32), y=np.arange(4), meta={"id": 7})
        >>> b.size, b.id
        (4, 7)
    """

    x: Union[np.ndarray, Mapping[str, np.ndarray]]
    y: Optional[np.ndarray] = None
    meta: Mapping[str, Scalar] = field(default_factory=dict)

    @property
    def size(self) -> int:
        first = next(iter(self.x.values())) if isinstance(self.x, Mapping) else self.x
        return int(first.shape[0])

    @property
    def id(self) -> int:
        value = self.meta.get("id", -1)
        return -1 if value is None else int(value)


@dataclass(frozen=True)
class GradientMessage:
    """The sum of one replica's gradients over its local steps ``first_step .. step``.

    ``first_step == step`` when the replica broadcasts every step. Peers de-duplicate messages by
    ``(sender, step)``.
    """

    sender: int
    step: int
    first_step: int
    gradients: Gradients
    acks: Tuple[int, ...] = ()  # see DoneMessage
    # rows of id tables the sender reset before these gradients (pyflink_tensair.core.row_resets)
    notices: Mapping = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return sum(g.nbytes for g in self.gradients.values())


@dataclass(frozen=True)
class DoneMessage:
    """A replica's last message: its input has ended and it trained ``final_step`` local steps.

    Peers stop waiting for it (the staleness bound ignores it from then on). The feedback channel
    ends its stream after relaying this message.
    """

    sender: int
    final_step: int
    # acks[r]: the sender's state holds every message of replica r up to step acks[r] (applied or
    # waiting), so r need never re-send those after a restore; empty when the sender tells nothing.
    acks: Tuple[int, ...] = ()


@dataclass(frozen=True)
class ModeMessage:
    """A replica in ``auto`` mode tells its peers that it stopped or started training.

    ``training=False`` (``reason="converged"``): it trained through ``step`` and now only serves,
    so peers stop waiting for its later steps (the staleness bound holds among the replicas that
    train). ``training=True``: it trains again from ``step + 1``; ``reason`` ``"drift"`` (its own
    detector fired: every peer that serves starts training too) or ``"peer_drift"`` (it followed
    replica ``origin``'s drift). ``sequence`` numbers the sender's mode changes; receivers keep
    only the newest, so a re-sent one changes nothing. ``epoch``: how many drifts the sender knows
    of; a receiver that knows fewer trains again (and keeps training at least two convergence
    windows), so a drift notice lost across a restore is made good by any later mode message.
    ``drift_at``: where in the stream the newest of those drifts was found (the id of the batch
    its detector fired on; ``-1``: unknown). A receiver whose own input has not reached it yet
    follows the notice when it does, not before: the replicas read the stream at different
    positions, and one behind that trained at once would learn the new concept on batches
    still of the old one.
    """

    sender: int
    step: int
    sequence: int
    training: bool
    reason: str
    origin: int
    epoch: int = 0
    acks: Tuple[int, ...] = ()  # see DoneMessage
    drift_at: int = -1


MODE_REASONS = ("converged", "drift", "peer_drift")


@dataclass(frozen=True)
class WeightsMessage:
    """A DASGD replica's trainable weights after its local step ``step`` (those whose gradients
    are dense), sent every ``PeerUpdates.average_every`` steps: each peer moves its own ``1 / replicas`` of the
    way towards them (periodic model averaging, through the gradient loop). The sender's
    gradients up to ``step`` travel before it, so a receiver has applied them when it mixes.
    Receivers keep only the newest ``step`` per sender; a lost one is not sent again (the next
    one averages as well)."""

    sender: int
    step: int
    weights: Dict[str, np.ndarray]
    acks: Tuple[int, ...] = ()  # see DoneMessage


@dataclass(frozen=True)
class RefusedMessage:
    """A peer message that did not decode (another format version, corrupt bytes): what its
    header still told of it (``wire.message_origin``), so the receiver can count it against its
    sender and go on. ``kind`` is the wire kind; ``first_step .. step`` the steps it covered
    (a done marker's final step for both)."""

    sender: int
    first_step: int
    step: int
    kind: int
    detail: str
    acks: Tuple[int, ...] = ()


@dataclass(frozen=True)
class RescaleMessage:
    """What a replica of a job resumed with another replica count took over from the old
    replicas (:mod:`~pyflink_tensair.core.rescale`): the sum of their model states' float arrays
    (weights and optimizer slots; integer arrays, such as an optimizer's step count, as their
    maximum), which of the ``old_replicas`` that covers, and the newest model version among them.
    Every new replica sends one to each peer before anything else, and merges once it holds all."""

    sender: int
    old_replicas: int
    covers: Tuple[int, ...]
    model_version: int
    state: Dict[str, np.ndarray]


PeerMessage = Union[GradientMessage, DoneMessage, ModeMessage, WeightsMessage, RefusedMessage, RescaleMessage]

# Why input was not trained on: the ``reason`` of a DeadLetter.
DEAD_LETTER_REASONS = ("not_a_record", "missing_field", "wrong_shape", "wrong_dtype", "non_finite", "empty",
                       "oversized", "label_out_of_range", "bad_utf8", "rejected_by_model", "unknown_tensor",
                       "norm_bound", "label_without_event", "second_label", "label_after_timeout")


@dataclass(frozen=True)
class DeadLetter:
    """Input that was set aside instead of trained on (``TrainConfig.bad_input="dead_letter"``).

    ``reason`` is one of :data:`DEAD_LETTER_REASONS`, ``detail`` says what was wrong in words;
    ``what`` is ``"record"`` (one input of :func:`~pyflink_tensair.to_batches`), ``"batch"``,
    ``"line"`` (of a text corpus), ``"event"``, ``"label"`` or ``"update"`` (of the online loop);
    ``stage`` is where it was caught (``"to_batches"``, ``"replica"``, ``"corpus"``, ``"serve"``,
    ``"join_labels"``); ``position`` is where it was in its stream (the record's index
    in the batcher's input, the batch's id, or for bytes with no id the replica's input count,
    or the line's byte offset); ``preview`` the start of the input as text. ``replica`` and
    ``time`` are filled in by the replica that emits it.

    Example::

        >>> letter = DeadLetter("non_finite", "feature 2 is nan", "record", "to_batches", 17)
        >>> DeadLetter.from_json(letter.to_json()) == letter
        True
    """

    reason: str
    detail: str
    what: str
    stage: str
    position: int
    preview: str = ""
    replica: int = -1
    time: float = 0.0

    def __post_init__(self):
        if self.reason not in DEAD_LETTER_REASONS:
            raise ConfigError(f"reason must be one of {DEAD_LETTER_REASONS}. Received: reason={self.reason!r}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> "DeadLetter":
        return DeadLetter(**json.loads(text))


def preview(value, limit: int = 120) -> str:
    """The start of ``value`` as text, for a dead letter (bytes as their repr)."""
    text = repr(bytes(value[:limit])) if isinstance(value, (bytes, bytearray, memoryview)) else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def batch_letter(reason: str, detail: str, batch: Batch) -> DeadLetter:
    """A batch a replica sets aside, as a dead letter."""
    return DeadLetter(reason, detail, "batch", "replica", batch.id, preview(batch_summary(batch)))


def message_letter(reason: str, detail: str, message) -> DeadLetter:
    """A peer message a replica sets aside, as a dead letter."""
    first = getattr(message, "first_step", message.step)
    return DeadLetter(reason, detail, "message", "replica", message.step,
                      f"{type(message).__name__} from replica {message.sender}, steps {first} .. {message.step}")


def batch_summary(batch: Batch) -> str:
    """A batch in a few words, for a dead letter's preview."""
    arrays = list(batch.x.items()) if isinstance(batch.x, Mapping) else [("x", batch.x)]
    parts = [f"{name} {np.asarray(a).dtype}{list(np.shape(a))}" for name, a in arrays]
    if batch.y is not None:
        parts.append(f"y {batch.y.dtype}{list(batch.y.shape)}")
    return ", ".join(parts)
