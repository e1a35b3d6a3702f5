"""The byte format of everything that travels between operators. No pickle on any data path.

Layout of one record (all integers little-endian)::

    0  4 bytes  magic b"TSNR"
    4  u8       format version (1)
    5  u8       kind: 1 batch, 2 gradient message, 3 done marker, 4 tensors, 5 start marker,
                (6, 7: the replica operator's own markers), 8 mode message, 9 weights message,
                10 dead letter (input set aside on its way to the replicas)
    6  u16      reserved, 0
    8  u32      header length H
    12 H bytes  header: UTF-8 JSON {"meta": {...}, "tensors": [{name, dtype, shape, offset, nbytes}]}
    ... zero padding to a multiple of 8, then the raw array data; each array starts at a multiple
        of 8 from the start of the data section, at the offset its header entry gives.

The Java feedback channel reads byte 5 to find the done marker that ends its stream, and the
batch router to deal dead letters without a turn of their own; keep it there.

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
import struct
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..config import SPARSE_VALUES
from ..errors import ConfigError, WireFormatError
from ..validation import is_int
from . import row_resets
from .messages import (DEAD_LETTER_REASONS, MODE_REASONS, Batch, DeadLetter, DoneMessage, GradientMessage, Gradients,
                       ModeMessage, PeerMessage, RefusedMessage, RescaleMessage, SparseGradient, WeightsMessage)

MAGIC = b"TSNR"
VERSION = 1
KIND_BATCH = 1
KIND_GRADIENT = 2
KIND_DONE = 3
KIND_TENSORS = 4
KIND_START = 5
KIND_SNAPSHOT = 6  # from the replica operator (Java) before a checkpoint barrier
KIND_OPEN = 7  # from the replica operator once its Python worker is up
KIND_MODE = 8
KIND_WEIGHTS = 9
KIND_DEAD_LETTER = 10
KIND_ADOPT = 11  # from the replica operator after a rescale: under an old replica's key
KIND_RESCALE = 12
KIND_OFFSET = 5  # where the Java channel looks for KIND_DONE
_KIND_NAMES = {KIND_BATCH: "batch", KIND_GRADIENT: "gradient", KIND_DONE: "done", KIND_TENSORS: "tensors",
               KIND_START: "start", KIND_SNAPSHOT: "snapshot", KIND_OPEN: "open", KIND_MODE: "mode",
               KIND_WEIGHTS: "weights", KIND_DEAD_LETTER: "dead letter", KIND_ADOPT: "adopt",
               KIND_RESCALE: "rescale"}

_PREFIX = struct.Struct("<4sBBHI")
_ALIGN = 8
_DTYPES = {np.dtype(t).str for t in (
    np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)}
_MAX_HEADER = 16 * 1024 * 1024
_SPARSE_INDICES = "@indices"
_SPARSE_VALUES = "@values"
_X_PREFIX = "x."


def _pad(n: int) -> int:
    return (-n) % _ALIGN


def _check_meta(meta: Mapping) -> Dict:
    for key, value in meta.items():
        if not isinstance(key, str):
            raise WireFormatError(f"meta keys must be strings. Received: {key!r}")
        if isinstance(value, (list, tuple)):
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                raise WireFormatError(f"meta[{key!r}] lists may hold ints only. Received: {value!r}")
        elif isinstance(value, (np.integer, np.floating)):
            raise WireFormatError(f"meta[{key!r}] must be a Python scalar, not {type(value).__name__}")
        elif value is not None and not isinstance(value, (int, float, str, bool)):
            raise WireFormatError(
                f"meta[{key!r}] must be an int, float, str, bool, None or list of ints. "
                f"Received: {type(value).__name__}"
            )
    return dict(meta)


def encode_record(kind: int, meta: Mapping, tensors: Mapping[str, np.ndarray]) -> bytes:
    """Encodes a record of any kind: scalar ``meta`` plus named arrays."""
    if kind not in _KIND_NAMES:
        raise WireFormatError(f"kind must be one of {sorted(_KIND_NAMES)}. Received: kind={kind!r}")
    entries, chunks, offset = [], [], 0
    for name, array in tensors.items():
        array = np.asarray(array)
        if array.dtype.str not in _DTYPES:
            swapped = array.dtype.newbyteorder("<")
            if swapped.str not in _DTYPES:
                raise WireFormatError(f"tensor {name!r} has unsupported dtype {array.dtype}")
            array = array.astype(swapped)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)  # (not for every array: it makes a 0-d array 1-d)
        entries.append({"name": name, "dtype": array.dtype.str, "shape": list(array.shape),
                        "offset": offset, "nbytes": array.nbytes})
        chunks.append(array.data.cast("B") if array.nbytes else b"")
        offset += array.nbytes
        chunks.append(b"\0" * _pad(offset))
        offset += _pad(offset)
    header = json.dumps({"meta": _check_meta(meta), "tensors": entries},
                        separators=(",", ":"), allow_nan=True).encode("utf-8")
    head = _PREFIX.pack(MAGIC, VERSION, kind, 0, len(header)) + header
    head += b"\0" * _pad(len(head))
    return b"".join([head, *chunks])


def peek_kind(data: bytes) -> int:
    """The kind byte of a record, after checking its prefix."""
    data = as_bytes(data)
    _parse_prefix(data)
    return data[KIND_OFFSET]


def as_bytes(data):
    """``data`` itself, or, for a list of ints, those bytes: ``execute_and_collect()`` hands a Flink
    byte array back as a list of Java's signed bytes (-128 .. 127).

    Example::

        >>> as_bytes([84, -1]), as_bytes(b"T")
        (b'T\\xff', b'T')
    """
    if not isinstance(data, list):
        return data
    if not all(isinstance(b, int) and -128 <= b <= 255 for b in data):
        raise WireFormatError("a list that stands for bytes must hold ints in -128 .. 255")
    return bytes(b & 0xFF for b in data)


def _parse_prefix(data) -> Tuple[int, int]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireFormatError(f"expected bytes, received {type(data).__name__}: data={data!r:.100}")
    if len(data) < _PREFIX.size:
        raise WireFormatError(f"record too short: {len(data)} bytes, the prefix alone is {_PREFIX.size}")
    magic, version, kind, reserved, header_len = _PREFIX.unpack_from(data, 0)
    if magic != MAGIC:
        raise WireFormatError(f"not a pyflink_tensair record: magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise WireFormatError(f"unsupported format version {version}; this build reads version {VERSION}")
    if kind not in _KIND_NAMES:
        raise WireFormatError(f"unknown record kind {kind}")
    if reserved != 0:
        raise WireFormatError(f"reserved field must be 0, found {reserved}")
    if header_len > _MAX_HEADER or _PREFIX.size + header_len > len(data):
        raise WireFormatError(f"header length {header_len} runs past the record of {len(data)} bytes")
    return kind, header_len


def _check_entry(entry, data_len: int, previous_end: int) -> Tuple[str, np.dtype, tuple, int, int]:
    if not isinstance(entry, dict) or set(entry) != {"name", "dtype", "shape", "offset", "nbytes"}:
        raise WireFormatError(f"bad tensor entry {entry!r}")
    name, dtype, shape, offset, nbytes = (entry[k] for k in ("name", "dtype", "shape", "offset", "nbytes"))
    if not isinstance(name, str) or not name:
        raise WireFormatError(f"tensor name must be a non-empty string, found {name!r}")
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise WireFormatError(f"tensor {name!r}: unsupported dtype {dtype!r}")
    if not _is_shape(shape):
        raise WireFormatError(f"tensor {name!r}: shape must be a list of ints >= 0, found {shape!r}")
    for field_name, value in (("offset", offset), ("nbytes", nbytes)):
        if not is_int(value) or value < 0:
            raise WireFormatError(f"tensor {name!r}: {field_name} must be an int >= 0, found {value!r}")
    dt = np.dtype(dtype)
    if nbytes != _elements(shape) * dt.itemsize:
        raise WireFormatError(f"tensor {name!r}: {nbytes} bytes do not hold shape {shape} of {dtype}")
    if offset % _ALIGN or offset < previous_end:
        raise WireFormatError(f"tensor {name!r}: offset {offset} is misaligned or overlaps the previous tensor")
    if offset + nbytes > data_len:
        raise WireFormatError(f"tensor {name!r}: data runs past the end of the record")
    return name, dt, tuple(shape), offset, nbytes


_MAX_DIM = 2 ** 40


def _is_shape(shape) -> bool:
    return isinstance(shape, list) and all(is_int(d) and 0 <= d <= _MAX_DIM for d in shape)


def _elements(shape) -> int:
    count = 1
    for d in shape:  # Python ints: no overflow
        count *= d
    return count


def decode_record(data) -> Tuple[int, Dict, Dict[str, np.ndarray]]:
    """Decodes any record into ``(kind, meta, tensors)``, checking every field. ``data``: bytes
    (or a memoryview, a bytearray, or a list of ints as :func:`as_bytes` takes)."""
    data = as_bytes(data)
    kind, header_len = _parse_prefix(data)
    try:
        header = json.loads(bytes(data[_PREFIX.size:_PREFIX.size + header_len]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise WireFormatError(f"record header is not valid UTF-8 JSON: {err}") from None
    if not isinstance(header, dict) or set(header) != {"meta", "tensors"}:
        raise WireFormatError("record header must be an object with exactly 'meta' and 'tensors'")
    meta, entries = header["meta"], header["tensors"]
    if not isinstance(meta, dict) or not isinstance(entries, list):
        raise WireFormatError("record header: 'meta' must be an object and 'tensors' a list")
    _check_meta(meta)
    start = _PREFIX.size + header_len
    start += _pad(start)
    buffer = memoryview(data)[start:] if start <= len(data) else memoryview(b"")
    tensors, end = {}, 0
    for entry in entries:
        name, dt, shape, offset, nbytes = _check_entry(entry, len(buffer), end)
        if name in tensors:
            raise WireFormatError(f"tensor {name!r} appears twice")
        tensors[name] = np.frombuffer(buffer, dtype=dt, count=nbytes // dt.itemsize, offset=offset).reshape(shape)
        end = offset + nbytes + _pad(offset + nbytes)
    if len(buffer) != end and not (not entries and len(buffer) == 0):
        raise WireFormatError(f"record has {len(buffer) - end} unexpected trailing bytes")
    return kind, meta, tensors


def _expect_kind(kind: int, expected: int) -> None:
    if kind != expected:
        raise WireFormatError(f"expected a {_KIND_NAMES[expected]} record, got a {_KIND_NAMES[kind]} record")


def _require_meta_int(meta: Mapping, key: str, minimum: int) -> int:
    value: Any = meta.get(key)
    if not is_int(value) or value < minimum:
        raise WireFormatError(f"meta field {key!r} must be an int >= {minimum}, found {value!r}")
    return value


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
    _expect_kind(kind, KIND_BATCH)
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
        return DoneMessage(_require_meta_int(meta, "sender", 0), _require_meta_int(meta, "final_step", 0), _acks(meta))
    if kind == KIND_MODE:
        return _decode_mode(meta, tensors)
    if kind == KIND_WEIGHTS:
        return _decode_weights(meta, tensors)
    if kind == KIND_RESCALE:
        return _decode_rescale(meta, tensors)
    _expect_kind(kind, KIND_GRADIENT)
    sender = _require_meta_int(meta, "sender", 0)
    step = _require_meta_int(meta, "step", 1)
    first_step = _require_meta_int(meta, "first_step", 1)
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
            if not _is_shape(shape) or not shape:
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
    return ModeMessage(_require_meta_int(meta, "sender", 0), _require_meta_int(meta, "step", 0),
                       _require_meta_int(meta, "sequence", 1), training, reason, _require_meta_int(meta, "origin", 0),
                       _require_meta_int(meta, "epoch", 0), _acks(meta),
                       _require_meta_int(meta, "drift_at", -1) if "drift_at" in meta else -1)  # absent: an older sender


def _decode_weights(meta: Mapping, tensors: Mapping) -> WeightsMessage:
    try:
        order = json.loads(meta["order"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise WireFormatError("weights record needs a JSON meta field 'order'") from None
    if not isinstance(order, list) or not all(isinstance(n, str) for n in order) or sorted(order) != sorted(tensors):
        raise WireFormatError(f"weights record: 'order' must list its tensors. Received: order={order!r}, "
                              f"tensors {sorted(tensors)}")
    return WeightsMessage(_require_meta_int(meta, "sender", 0), _require_meta_int(meta, "step", 1),
                          {name: tensors[name] for name in order}, _acks(meta))


def _decode_rescale(meta: Mapping, tensors: Mapping) -> RescaleMessage:
    try:
        order = json.loads(meta["order"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise WireFormatError("rescale record needs a JSON meta field 'order'") from None
    if not isinstance(order, list) or sorted(order) != sorted(tensors):
        raise WireFormatError(f"rescale record: 'order' must list its tensors. Received: order={order!r:.200}")
    _check_names(order, "rescale")
    old_replicas = _require_meta_int(meta, "old_replicas", 1)
    covers = meta.get("covers")
    if not isinstance(covers, list) or any(not is_int(r) or not 0 <= r < old_replicas for r in covers):
        raise WireFormatError(f"rescale record: 'covers' must list old replicas in [0, {old_replicas}). "
                              f"Received: {covers!r:.200}")
    return RescaleMessage(_require_meta_int(meta, "sender", 0), old_replicas, tuple(covers),
                          _require_meta_int(meta, "model_version", 0), {name: tensors[name] for name in order})


def rescale_of(marker) -> Tuple[int, int]:
    """``(old_replica, old_replicas)`` of an open or adopt marker: which old replica an adopt
    marker hands over (-1 for an open marker) and how many replicas the checkpoint held (0: the
    job resumed with the count it was saved with, or started afresh).

    Example::

        >>> rescale_of(encode_marker(KIND_OPEN))
        (-1, 0)
    """
    kind, meta, _ = decode_record(marker)
    if kind not in (KIND_OPEN, KIND_ADOPT):
        raise WireFormatError(f"expected an open or adopt marker, got a {_KIND_NAMES[kind]} record")
    old_replicas = meta.get("old_replicas", 0)
    old_replica = meta.get("old_replica", -1)
    if not is_int(old_replicas) or old_replicas < 0 or not is_int(old_replica) or old_replica >= max(old_replicas, 1) \
            or (kind == KIND_ADOPT) != (old_replica >= 0 and old_replicas > 0):
        raise WireFormatError(f"malformed {_KIND_NAMES[kind]} marker: {meta!r:.200}")
    return old_replica, old_replicas


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
    if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) < _PREFIX.size:
        return None
    magic, _, kind, _, header_len = _PREFIX.unpack_from(data, 0)
    if magic != MAGIC or _PREFIX.size + header_len > len(data) or header_len > _MAX_HEADER:
        return None
    try:
        header = json.loads(bytes(data[_PREFIX.size:_PREFIX.size + header_len]).decode("utf-8"))
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


# --- start markers -----------------------------------------------------------------------------

def encode_start(replica: int) -> bytes:
    """The marker that reaches replica ``replica`` first, even when no batch ever does."""
    return encode_record(KIND_START, {"replica": replica}, {})


def encode_marker(kind: int) -> bytes:
    """The operator's own markers (``KIND_SNAPSHOT``, ``KIND_OPEN``, ``KIND_ADOPT``): no meta, no
    tensors. After a rescale the operator sends the open and adopt markers with meta of its own
    (``ReplicaHooks.withMeta``): :func:`rescale_of` reads it."""
    if kind not in (KIND_SNAPSHOT, KIND_OPEN, KIND_ADOPT):
        raise WireFormatError(f"kind must be KIND_SNAPSHOT, KIND_OPEN or KIND_ADOPT. Received: kind={kind!r}")
    return encode_record(kind, {}, {})


# --- dead letters -------------------------------------------------------------------------------

def encode_dead_letter(letter: DeadLetter) -> bytes:
    """A :class:`DeadLetter` as a record (the batcher sends them down the batch stream; the router
    deals them without a turn, and a replica forwards them to the dead-letter stream)."""
    return encode_record(KIND_DEAD_LETTER, dataclasses.asdict(letter), {})


def decode_dead_letter(data) -> DeadLetter:
    kind, meta, tensors = decode_record(data)
    _expect_kind(kind, KIND_DEAD_LETTER)
    fields = {f.name: f.type for f in dataclasses.fields(DeadLetter)}
    if set(meta) != set(fields) or tensors:
        raise WireFormatError(f"dead-letter record needs exactly the fields {sorted(fields)}. Received: {sorted(meta)}")
    texts = ("reason", "detail", "what", "stage", "preview")
    if (not all(isinstance(meta[k], str) for k in texts) or meta["reason"] not in DEAD_LETTER_REASONS
            or not all(isinstance(meta[k], int) and not isinstance(meta[k], bool) for k in ("position", "replica"))
            or isinstance(meta["time"], bool) or not isinstance(meta["time"], (int, float))):
        raise WireFormatError(f"dead-letter record has a field of the wrong type. Received: {meta!r:.300}")
    return DeadLetter(**meta)


# --- tensors (predictions, model snapshots) -----------------------------------------------------

def encode_tensors(tensors: Mapping[str, np.ndarray], meta: Optional[Mapping] = None) -> bytes:
    return encode_record(KIND_TENSORS, meta or {}, tensors)


def decode_tensors(data) -> Tuple[Dict, Dict[str, np.ndarray]]:
    """Decodes a tensors record (predictions, model snapshots) into ``(meta, tensors)``."""
    kind, meta, tensors = decode_record(data)
    _expect_kind(kind, KIND_TENSORS)
    return meta, tensors
