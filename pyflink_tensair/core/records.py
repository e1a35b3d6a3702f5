"""The record: the byte layout of everything that travels between operators (what each kind
holds is :mod:`~pyflink_tensair.core.wire`'s). No pickle on any data path.

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

    >>> kind, meta, tensors = decode_record(encode_record(KIND_TENSORS, {"n": 1}, {"a": np.zeros(2)}))
    >>> kind == KIND_TENSORS, meta, tensors["a"].shape
    (True, {'n': 1}, (2,))
"""

from __future__ import annotations

import json
import struct
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from ..errors import WireFormatError
from ..validation import is_int

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
KIND_NAMES = {KIND_BATCH: "batch", KIND_GRADIENT: "gradient", KIND_DONE: "done", KIND_TENSORS: "tensors",
               KIND_START: "start", KIND_SNAPSHOT: "snapshot", KIND_OPEN: "open", KIND_MODE: "mode",
               KIND_WEIGHTS: "weights", KIND_DEAD_LETTER: "dead letter", KIND_ADOPT: "adopt",
               KIND_RESCALE: "rescale"}

PREFIX = struct.Struct("<4sBBHI")
_ALIGN = 8
_DTYPES = {np.dtype(t).str for t in (
    np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)}
MAX_HEADER = 16 * 1024 * 1024


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
    if kind not in KIND_NAMES:
        raise WireFormatError(f"kind must be one of {sorted(KIND_NAMES)}. Received: kind={kind!r}")
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
    head = PREFIX.pack(MAGIC, VERSION, kind, 0, len(header)) + header
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
    if len(data) < PREFIX.size:
        raise WireFormatError(f"record too short: {len(data)} bytes, the prefix alone is {PREFIX.size}")
    magic, version, kind, reserved, header_len = PREFIX.unpack_from(data, 0)
    if magic != MAGIC:
        raise WireFormatError(f"not a pyflink_tensair record: magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise WireFormatError(f"unsupported format version {version}; this build reads version {VERSION}")
    if kind not in KIND_NAMES:
        raise WireFormatError(f"unknown record kind {kind}")
    if reserved != 0:
        raise WireFormatError(f"reserved field must be 0, found {reserved}")
    if header_len > MAX_HEADER or PREFIX.size + header_len > len(data):
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
    if not is_shape(shape):
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


def is_shape(shape) -> bool:
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
        header = json.loads(bytes(data[PREFIX.size:PREFIX.size + header_len]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise WireFormatError(f"record header is not valid UTF-8 JSON: {err}") from None
    if not isinstance(header, dict) or set(header) != {"meta", "tensors"}:
        raise WireFormatError("record header must be an object with exactly 'meta' and 'tensors'")
    meta, entries = header["meta"], header["tensors"]
    if not isinstance(meta, dict) or not isinstance(entries, list):
        raise WireFormatError("record header: 'meta' must be an object and 'tensors' a list")
    _check_meta(meta)
    start = PREFIX.size + header_len
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


def expect_kind(kind: int, expected: int) -> None:
    if kind != expected:
        raise WireFormatError(f"expected a {KIND_NAMES[expected]} record, got a {KIND_NAMES[kind]} record")


def require_meta_int(meta: Mapping, key: str, minimum: int) -> int:
    value: Any = meta.get(key)
    if not is_int(value) or value < minimum:
        raise WireFormatError(f"meta field {key!r} must be an int >= {minimum}, found {value!r}")
    return value


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
        raise WireFormatError(f"expected an open or adopt marker, got a {KIND_NAMES[kind]} record")
    old_replicas = meta.get("old_replicas", 0)
    old_replica = meta.get("old_replica", -1)
    if not is_int(old_replicas) or old_replicas < 0 or not is_int(old_replica) or old_replica >= max(old_replicas, 1) \
            or (kind == KIND_ADOPT) != (old_replica >= 0 and old_replicas > 0):
        raise WireFormatError(f"malformed {KIND_NAMES[kind]} marker: {meta!r:.200}")
    return old_replica, old_replicas


# --- tensors (predictions, model snapshots) -----------------------------------------------------

def encode_tensors(tensors: Mapping[str, np.ndarray], meta: Optional[Mapping] = None) -> bytes:
    return encode_record(KIND_TENSORS, meta or {}, tensors)


def decode_tensors(data) -> Tuple[Dict, Dict[str, np.ndarray]]:
    """Decodes a tensors record (predictions, model snapshots) into ``(meta, tensors)``."""
    kind, meta, tensors = decode_record(data)
    expect_kind(kind, KIND_TENSORS)
    return meta, tensors


def as_uint8(data: bytes) -> np.ndarray:
    """A record as a snapshot entry (a ``uint8`` array of its own)."""
    return np.frombuffer(data, dtype=np.uint8).copy()
