"""Structure-aware fuzzing of the wire decoders: every decoder, given any bytes, decodes or raises
:class:`~pyflink_tensair.errors.WireFormatError`, and nothing else.

Inputs start from valid records of every kind and are mutated where the format has structure: a
field of the JSON header (the meta's fields, a tensor entry's ``name``, ``dtype``, ``shape``,
``offset`` and ``nbytes``, and the JSON inside JSON of a gradient's ``sparse`` and ``order``),
replaced by any JSON value, deleted or added; the prefix's fields (magic, version, kind, the
reserved bytes, the header length); the bytes themselves (flipped, truncated, extended); and plain
random bytes. Needs ``hypothesis`` (in requirements.txt).

``tests/test_wire_fuzz.py`` runs every decoder with a fixed budget in CI;
``python -m pyflink_tensair.testing.wire_fuzz --runs 5000`` prints the table of runs and outcomes.

Example::

    >>> report = fuzz("decode_message", runs=20)
    >>> report.runs, report.escaped
    (20, [])
"""

from __future__ import annotations

import argparse
import functools
import json
import struct
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Tuple

import numpy as np

from ..core import wire
from ..core.events import decode_final_model
from ..core.messages import (Batch, DeadLetter, DoneMessage, GradientMessage, ModeMessage, SparseGradient,
                             WeightsMessage)
from ..errors import WireFormatError


DECODERS: Dict[str, Callable] = {
    "decode_record": wire.decode_record,
    "decode_batch": wire.decode_batch,
    "decode_message": wire.decode_message,
    "decode_tensors": wire.decode_tensors,
    "decode_dead_letter": wire.decode_dead_letter,
    "decode_final_model": decode_final_model,
    "peek_kind": wire.peek_kind,
    "message_origin": wire.message_origin,
}


@functools.lru_cache(maxsize=1)
def seed_records() -> Tuple[bytes, ...]:
    """One valid record of every kind the decoders read."""
    rng = np.random.default_rng(0)
    sparse = SparseGradient(np.array([1, 4], np.int64), rng.normal(size=(2, 3)).astype(np.float32), (6, 3))
    dense = rng.normal(size=(2, 3)).astype(np.float32)
    return (
        wire.encode_batch(Batch(rng.normal(size=(4, 3)).astype(np.float32), np.array([0, 1, 1, 0]), {"id": 3})),
        wire.encode_batch(Batch({"target": np.arange(4), "context": np.arange(4)}, np.ones(4, np.float32))),
        wire.encode_message(GradientMessage(1, 5, 4, {"000": dense, "001": sparse}, acks=(2, 0))),
        wire.encode_message(GradientMessage(0, 2, 2, {"001": sparse}), "float16"),
        wire.encode_message(DoneMessage(1, 40, (7, 0))),
        wire.encode_message(ModeMessage(0, 9, 1, False, "converged", 0, 0, (0, 3))),
        wire.encode_message(WeightsMessage(1, 8, {"000": dense}, (1, 0))),
        wire.encode_tensors({"000": dense, "001": np.zeros(3, np.float64)},
                            {"replica": 1, "model_version": 12, "initial_digest": "ab"}),
        wire.encode_dead_letter(DeadLetter("non_finite", "feature 1 is nan", "record", "to_batches", 17, "['x', nan]")),
        wire.encode_start(1),
    )


def _split(record: bytes) -> Tuple[tuple, dict, bytes]:
    prefix = struct.unpack_from("<4sBBHI", record, 0)
    header_end = 12 + prefix[4]
    data_start = header_end + (-header_end) % 8
    return prefix, json.loads(record[12:header_end].decode("utf-8")), record[data_start:]


def _join(prefix: tuple, header, data: bytes, header_len=None) -> bytes:
    text = json.dumps(header, allow_nan=True).encode("utf-8")
    magic, version, kind, reserved, _ = prefix
    head = struct.pack("<4sBBHI", magic, version, kind, reserved, len(text) if header_len is None else header_len) + text
    return head + b"\0" * ((-len(head)) % 8) + data


def strategies():
    """The hypothesis strategy of fuzz inputs (imported lazily: hypothesis is a test dependency)."""
    from hypothesis import strategies as st

    scalars = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.sampled_from([0, 1, -1, 2 ** 31, 2 ** 63])
               | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
               | st.sampled_from(["<f4", "<i8", "|b1", "<U3", "|O", "<f2", "float32", "[]", "{}", "[1,\"a\"]"]))
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=5)
    keys = st.sampled_from(["meta", "tensors", "sender", "step", "first_step", "final_step", "acks", "sparse", "order",
                            "training", "reason", "sequence", "origin", "epoch", "replica", "model_version", "id",
                            "name", "dtype", "shape", "offset", "nbytes", "position", "stage", "what", "preview"])

    def mutate(draw, value):
        """One change at a place drawn uniformly from every place in a JSON value (the values of
        objects and lists, and the JSON inside its strings): replaced by any value, deleted, or
        a key added beside it."""
        path = draw(st.sampled_from(_paths(value)))
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        return _update(value, path, lambda parent, key: _change(draw, parent, key, action, values, keys))

    @st.composite
    def header_mutation(draw):
        prefix, header, data = _split(draw(st.sampled_from(seed_records())))
        for _ in range(draw(st.integers(1, 3))):
            header = mutate(draw, header)
        return _join(prefix, header, data)

    @st.composite
    def prefix_mutation(draw):
        prefix, header, data = _split(draw(st.sampled_from(seed_records())))
        magic, version, kind, reserved, _ = prefix
        which = draw(st.sampled_from(["magic", "version", "kind", "reserved", "header_len"]))
        byte = st.integers(0, 255)
        if which == "magic":
            magic = draw(st.binary(min_size=4, max_size=4))
        elif which == "version":
            version = draw(byte)
        elif which == "kind":
            kind = draw(byte)
        elif which == "reserved":
            reserved = draw(st.integers(0, 2 ** 16 - 1))
        header_len = draw(st.integers(0, 2 ** 32 - 1)) if which == "header_len" else None
        return _join((magic, version, kind, reserved, 0), header, data, header_len)

    @st.composite
    def byte_mutation(draw):
        record = bytearray(draw(st.sampled_from(seed_records())))
        for _ in range(draw(st.integers(1, 4))):
            action = draw(st.sampled_from(["flip", "truncate", "extend", "insert"]))
            if action == "flip" and record:
                record[draw(st.integers(0, len(record) - 1))] = draw(st.integers(0, 255))
            elif action == "truncate":
                del record[draw(st.integers(0, len(record))):]
            elif action == "extend":
                record += draw(st.binary(max_size=16))
            elif action == "insert" and record:
                at = draw(st.integers(0, len(record) - 1))
                record[at:at] = draw(st.binary(min_size=1, max_size=8))
        return bytes(record)

    other_inputs = (st.binary(max_size=64) | st.lists(st.integers(-200, 300), max_size=16)
                    | st.sampled_from([None, "TSNR", 3, [], memoryview(b"TSNR")]))
    return header_mutation() | header_mutation() | prefix_mutation() | byte_mutation() | other_inputs


_IN_JSON = object()  # a path step: into the JSON a string holds


def _loads(text):
    if isinstance(text, str) and text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return None
    return None


def _paths(value, path=()) -> List[tuple]:
    """Every place in ``value`` a mutation can hit (``()``: the value itself)."""
    out = [path]
    if isinstance(value, dict):
        for key in value:
            out += _paths(value[key], path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, path + (index,))
    elif _loads(value) is not None:
        out += _paths(_loads(value), path + (_IN_JSON,))[1:]
    return out


def _update(value, path, change):
    """``value`` with ``change(parent, key)`` applied at ``path`` (``parent`` a copy to change)."""
    if not path:
        box = [value]
        change(box, 0)
        return box[0] if box else None
    head, rest = path[0], path[1:]
    if head is _IN_JSON:
        return json.dumps(_update(_loads(value), rest, change))
    parent = dict(value) if isinstance(value, dict) else list(value)
    if rest:
        parent[head] = _update(parent[head], rest, change)
    else:
        change(parent, head)
    return parent


def _change(draw, parent, key, action, values, keys) -> None:
    if action == "delete":
        del parent[key]
    elif action == "add" and isinstance(parent, dict):
        parent[draw(keys)] = draw(values)
    elif action == "add":
        parent.insert(key, draw(values))
    else:
        parent[key] = draw(values)


@dataclass
class FuzzReport:
    """What one decoder did with ``runs`` inputs: decoded, raised WireFormatError, or raised
    something else (``escaped``: the inputs and exceptions, the defects)."""

    decoder: str
    runs: int = 0
    decoded: int = 0
    rejected: int = 0
    escaped: List[Tuple[object, str]] = field(default_factory=list)


def fuzz(decoder: str, runs: int = 200, *, seed: int = 0) -> FuzzReport:
    """Runs ``DECODERS[decoder]`` on ``runs`` generated inputs (deterministic for a ``seed``)."""
    from hypothesis import HealthCheck, given, seed as hypothesis_seed, settings

    decode = DECODERS[decoder]
    report = FuzzReport(decoder)

    @hypothesis_seed(seed)
    @settings(max_examples=runs, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=("generate",))
    @given(strategies())
    def run(data):
        report.runs += 1
        try:
            decode(data)
            report.decoded += 1
        except WireFormatError:
            report.rejected += 1
        except Exception as err:  # the defect this looks for
            report.escaped.append((data, f"{type(err).__name__}: {err}"))

    run()
    return report


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="inputs per decoder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print("| decoder | runs | decoded | WireFormatError | any other exception |")
    print("|---|---|---|---|---|")
    failed = False
    for name in DECODERS:
        report = fuzz(name, args.runs, seed=args.seed)
        print(f"| `{name}` | {report.runs} | {report.decoded} | {report.rejected} | {len(report.escaped)} |")
        for data, error in report.escaped[:3]:
            print(f"    escaped: {error} on {data!r:.200}")
        failed |= bool(report.escaped)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
