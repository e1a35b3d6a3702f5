"""What each record kind holds: mini-batches, peer messages, dead letters. The layout every
record shares, the markers and plain tensors are :mod:`~pyflink_tensair.core.records`' (its names
are this module's too, so callers read one module).

Decoding checks every field and raises :class:`~pyflink_tensair.errors.WireFormatError` on bad
bytes, and nothing else whatever the bytes (``tests/test_wire_fuzz.py`` fuzzes every decoder).
Arrays are decoded without copying (read-only views on the record).

Example::

    >>> b = Batch(x=np.ones((2, 3), np.float32), y=np.array([0, 1]), meta={"id": 5})
    >>> decode_batch(encode_batch(b)).meta["id"]
    5
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..config import SPARSE_VALUES
from ..errors import ConfigError, WireFormatError
from ..validation import is_int
from . import row_resets
from .messages import (DEAD_LETTER_REASONS, MODE_REASONS, Batch, DeadLetter, DoneMessage, GradientMessage, Gradients,
                       ModeMessage, PeerMessage, RefusedMessage, RescaleMessage, SparseGradient, WeightsMessage)
from .records import (  # noqa: F401 (the record's names, read as wire's)
    MAGIC,
    VERSION,
    KIND_BATCH,
    KIND_GRADIENT,
    KIND_DONE,
    KIND_TENSORS,
    KIND_START,
    KIND_SNAPSHOT,
    KIND_OPEN,
    KIND_MODE,
    KIND_WEIGHTS,
    KIND_DEAD_LETTER,
    KIND_ADOPT,
    KIND_RESCALE,
    KIND_OFFSET,
    KIND_NAMES,
    PREFIX,
    MAX_HEADER,
    as_bytes,
    as_uint8,
    decode_record,
    decode_tensors,
    encode_marker,
    encode_record,
    encode_start,
    encode_tensors,
    expect_kind,
    peek_kind,
    require_meta_int,
    is_shape,
    rescale_of,
)

_SPARSE_INDICES = "@indices"
_SPARSE_VALUES = "@values"
_X_PREFIX = "x."


# --- mini-batches -------------------------------------------------------------------------------

def encode_batch(batch: Batch) -> bytes:
    """Encodes a :class:`Batch`; a dict ``x`` travels as tensors ``x.<input name>``."""
    if not isinstance(batch, Batch) or not isinstance(batch.meta, Mapping):
        raise ConfigError(f"batch must be a Batch (its meta a dict). Received: batch={batch!r:.100}")
    tensors = ({_X_PREFIX + k: v for k, v in batch.x.items()} if isinstance(batch.x, Mapping)
               else {"x": batch.x})
    if batch.y is not None:
        tensors["y"] = batch.y
    return encode_record(KIND_BATCH, batch.meta, tensors)


def decode_batch(data) -> Batch:
    kind, meta, tensors = decode_record(data)
    expect_kind(kind, KIND_BATCH)
    y = tensors.pop("y", None)
    x: Union[np.ndarray, Dict[str, np.ndarray]]
    if "x" in tensors:
        x = tensors.pop("x")
    else:
        x = {k[len(_X_PREFIX):]: tensors.pop(k) for k in list(tensors) if k.startswith(_X_PREFIX)}
        if not x:
            raise WireFormatError("batch record has no 'x' tensor")
    if tensors:
        raise WireFormatError(f"batch record has unexpected tensors {sorted(tensors)}")
    sizes = {a.shape[0] if a.ndim else None for a in ([*x.values()] if isinstance(x, dict) else [x])}
    if y is not None:
        sizes.add(y.shape[0] if y.ndim else None)
    if len(sizes) != 1 or None in sizes:
        raise WireFormatError(f"batch tensors disagree on the batch size: {sorted(map(str, sizes))}")
    return Batch(x=x, y=y, meta=meta)


# --- peer messages ------------------------------------------------------------------------------

def sparse_values_on_wire(values: np.ndarray, sparse_values: str) -> np.ndarray:
    """The rows of a sparse gradient as :func:`encode_message` sends them: float32 rows as
    float16 when ``sparse_values="float16"``, every other dtype as it is."""
    return values.astype(np.float16) if sparse_values == "float16" and values.dtype == np.float32 else values


def payload_nbytes(gradients: Gradients, sparse_values: str) -> int:
    """A message's tensor bytes on the wire (:func:`encode_message` with ``sparse_values``)."""
    return sum(g.indices.nbytes + sparse_values_on_wire(g.values, sparse_values).nbytes
               if isinstance(g, SparseGradient) else g.nbytes for g in gradients.values())


def encode_message(message: PeerMessage, sparse_values: str = "float32") -> bytes:
    """Encodes a peer message (gradients, done, mode or weights). ``sparse_values="float16"``: sparse rows
    travel as half floats (half the bytes; they decode as float16, which the Keras adapter
    widens inside TensorFlow and sums widen to float32)."""
    if sparse_values not in SPARSE_VALUES:
        raise WireFormatError(f"sparse_values must be 'float32' or 'float16'. Received: {sparse_values!r}")
    if isinstance(message, DoneMessage):
        return encode_record(KIND_DONE, {"sender": message.sender, "final_step": message.final_step,
                                         "acks": [int(a) for a in message.acks]}, {})
    if isinstance(message, ModeMessage):
        return encode_record(KIND_MODE, {"sender": message.sender, "step": message.step, "sequence": message.sequence,
                                         "training": bool(message.training), "reason": message.reason,
                                         "origin": message.origin, "epoch": message.epoch,
                                         "drift_at": int(message.drift_at), "acks": [int(a) for a in message.acks]}, {})
    if isinstance(message, WeightsMessage):
        return encode_record(KIND_WEIGHTS, {"sender": message.sender, "step": message.step,
                                            "order": json.dumps(list(message.weights)),
                                            "acks": [int(a) for a in message.acks]}, message.weights)
    if isinstance(message, RescaleMessage):
        return encode_record(KIND_RESCALE, {"sender": message.sender, "old_replicas": message.old_replicas,
                                            "covers": [int(r) for r in message.covers],
                                            "model_version": int(message.model_version),
                                            "order": json.dumps(list(message.state))}, message.state)
    if isinstance(message, RefusedMessage):
        raise WireFormatError(f"a refused message is not sent: {message!r}")
    tensors: Dict[str, np.ndarray] = {}
    sparse: Dict[str, list] = {}
    for name, grad in message.gradients.items():
        if isinstance(grad, SparseGradient):
            tensors[name + _SPARSE_INDICES] = grad.indices
            tensors[name + _SPARSE_VALUES] = sparse_values_on_wire(grad.values, sparse_values)
            sparse[name] = list(grad.dense_shape)
        else:
            tensors[name] = grad
    meta = {"sender": message.sender, "step": message.step, "first_step": message.first_step,
            "sparse": json.dumps(sparse, separators=(",", ":")), "order": json.dumps(list(message.gradients)),
            "acks": [int(a) for a in message.acks]}
    if message.notices:
        meta[row_resets.NOTICES] = row_resets.encode_notices(message.notices)
    return encode_record(KIND_GRADIENT, meta, tensors)


def decode_message(data) -> PeerMessage:
    """Decodes a gradient message, a done marker, a mode message or a weights message."""
    kind, meta, tensors = decode_record(data)
    if kind == KIND_DONE:
        return DoneMessage(require_meta_int(meta, "sender", 0), require_meta_int(meta, "final_step", 0), _acks(meta))
    if kind == KIND_MODE:
        return _decode_mode(meta, tensors)
    if kind == KIND_WEIGHTS:
        return _decode_weights(meta, tensors)
    if kind == KIND_RESCALE:
        return _decode_rescale(meta, tensors)
    expect_kind(kind, KIND_GRADIENT)
    sender = require_meta_int(meta, "sender", 0)
    step = require_meta_int(meta, "step", 1)
    first_step = require_meta_int(meta, "first_step", 1)
    if first_step > step:
        raise WireFormatError(f"first_step {first_step} is after step {step}")
    try:
        sparse = json.loads(meta["sparse"])
        order = json.loads(meta["order"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise WireFormatError("gradient record needs JSON meta fields 'sparse' and 'order'") from None
    if not isinstance(sparse, dict) or not isinstance(order, list):
        raise WireFormatError("gradient record: 'sparse' must be an object and 'order' a list")
    _check_names(order, "gradient")
    gradients: Gradients = {}
    for name in order:
        if name in sparse:
            shape = sparse[name]
            if not is_shape(shape) or not shape:
                raise WireFormatError(f"sparse gradient {name!r}: dense shape must be a non-empty list of ints >= 0. "
                                      f"Received: {shape!r}")
            try:
                indices = tensors.pop(name + _SPARSE_INDICES)
                values = tensors.pop(name + _SPARSE_VALUES)
                gradients[name] = SparseGradient(indices, values, tuple(shape))
            except (KeyError, ValueError, TypeError) as err:
                raise WireFormatError(f"sparse gradient {name!r} is malformed: {err}") from None
            if indices.dtype.kind not in "iu" or (indices.size and (indices.min() < 0 or indices.max() >= shape[0])):
                raise WireFormatError(f"sparse gradient {name!r} has indices outside its table")
        elif name in tensors:
            gradients[name] = tensors.pop(name)
        else:
            raise WireFormatError(f"gradient record lists {name!r} but carries no such tensor")
    if tensors:
        raise WireFormatError(f"gradient record has unexpected tensors {sorted(tensors)}")
    return GradientMessage(sender=sender, step=step, first_step=first_step, gradients=gradients, acks=_acks(meta),
                           notices=row_resets.decode_notices(meta.get(row_resets.NOTICES)))


def _decode_mode(meta: Mapping, tensors: Mapping) -> ModeMessage:
    training, reason = meta.get("training"), meta.get("reason")
    if not isinstance(training, bool) or reason not in MODE_REASONS or tensors:
        raise WireFormatError(f"mode record needs a bool 'training', a 'reason' in {MODE_REASONS} and no tensors. "
                              f"Received: training={training!r}, reason={reason!r}, {len(tensors)} tensors")
    return ModeMessage(require_meta_int(meta, "sender", 0), require_meta_int(meta, "step", 0),
                       require_meta_int(meta, "sequence", 1), training, reason, require_meta_int(meta, "origin", 0),
                       require_meta_int(meta, "epoch", 0), _acks(meta),
                       require_meta_int(meta, "drift_at", -1) if "drift_at" in meta else -1)  # absent: an older sender


def _decode_weights(meta: Mapping, tensors: Mapping) -> WeightsMessage:
    try:
        order = json.loads(meta["order"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise WireFormatError("weights record needs a JSON meta field 'order'") from None
    if not isinstance(order, list) or not all(isinstance(n, str) for n in order) or sorted(order) != sorted(tensors):
        raise WireFormatError(f"weights record: 'order' must list its tensors. Received: order={order!r}, "
                              f"tensors {sorted(tensors)}")
    return WeightsMessage(require_meta_int(meta, "sender", 0), require_meta_int(meta, "step", 1),
                          {name: tensors[name] for name in order}, _acks(meta))


def _decode_rescale(meta: Mapping, tensors: Mapping) -> RescaleMessage:
    try:
        order = json.loads(meta["order"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise WireFormatError("rescale record needs a JSON meta field 'order'") from None
    if not isinstance(order, list) or sorted(order) != sorted(tensors):
        raise WireFormatError(f"rescale record: 'order' must list its tensors. Received: order={order!r:.200}")
    _check_names(order, "rescale")
    old_replicas = require_meta_int(meta, "old_replicas", 1)
    covers = meta.get("covers")
    if not isinstance(covers, list) or any(not is_int(r) or not 0 <= r < old_replicas for r in covers):
        raise WireFormatError(f"rescale record: 'covers' must list old replicas in [0, {old_replicas}). "
                              f"Received: {covers!r:.200}")
    return RescaleMessage(require_meta_int(meta, "sender", 0), old_replicas, tuple(covers),
                          require_meta_int(meta, "model_version", 0), {name: tensors[name] for name in order})


def _check_names(order, what: str) -> None:
    if not all(isinstance(n, str) and n for n in order) or len(set(order)) != len(order):
        raise WireFormatError(f"{what} record: 'order' must list distinct non-empty names. Received: {order!r:.200}")


def message_origin(data) -> Optional[Tuple[int, int, int, int]]:
    """``(kind, sender, first_step, step)`` of a peer message that may not decode, read from as
    much of it as is readable (any format version), or ``None``: what a receiver needs to count
    a rejected message against its sender. Never raises.

    Example::

        >>> message_origin(encode_message(DoneMessage(1, 40)))
        (3, 1, 40, 40)
        >>> message_origin(b"junk") is None
        True
    """
    if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) < PREFIX.size:
        return None
    magic, _, kind, _, header_len = PREFIX.unpack_from(data, 0)
    if magic != MAGIC or PREFIX.size + header_len > len(data) or header_len > MAX_HEADER:
        return None
    try:
        header = json.loads(bytes(data[PREFIX.size:PREFIX.size + header_len]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    meta = header.get("meta") if isinstance(header, dict) else None
    if not isinstance(meta, dict):
        return None
    numbers: List[Any] = [meta.get(key) for key in ("sender", "first_step", "step")]
    if kind == KIND_DONE:
        numbers = [meta.get("sender"), meta.get("final_step"), meta.get("final_step")]
    if kind not in (KIND_GRADIENT, KIND_DONE, KIND_MODE, KIND_WEIGHTS):
        return None
    if kind in (KIND_MODE, KIND_WEIGHTS):
        numbers[1] = numbers[2]
    if not all(is_int(n) and n >= 0 for n in numbers):
        return None
    return (kind, *numbers)


def _acks(meta: Mapping) -> Tuple[int, ...]:
    acks = meta.get("acks", [])
    if not isinstance(acks, list) or any(not is_int(a) or a < 0 for a in acks):
        raise WireFormatError(f"meta 'acks' must be a list of ints >= 0. Received: {acks!r}")
    return tuple(acks)


# --- dead letters -------------------------------------------------------------------------------

def encode_dead_letter(letter: DeadLetter) -> bytes:
    """A :class:`DeadLetter` as a record (the batcher sends them down the batch stream; the router
    deals them without a turn, and a replica forwards them to the dead-letter stream)."""
    return encode_record(KIND_DEAD_LETTER, dataclasses.asdict(letter), {})


def decode_dead_letter(data) -> DeadLetter:
    kind, meta, tensors = decode_record(data)
    expect_kind(kind, KIND_DEAD_LETTER)
    fields = {f.name: f.type for f in dataclasses.fields(DeadLetter)}
    if set(meta) != set(fields) or tensors:
        raise WireFormatError(f"dead-letter record needs exactly the fields {sorted(fields)}. Received: {sorted(meta)}")
    texts = ("reason", "detail", "what", "stage", "preview")
    if (not all(isinstance(meta[k], str) for k in texts) or meta["reason"] not in DEAD_LETTER_REASONS
            or not all(isinstance(meta[k], int) and not isinstance(meta[k], bool) for k in ("position", "replica"))
            or isinstance(meta["time"], bool) or not isinstance(meta["time"], (int, float))):
        raise WireFormatError(f"dead-letter record has a field of the wrong type. Received: {meta!r:.300}")
    return DeadLetter(**meta)


