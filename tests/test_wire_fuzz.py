"""Every decoder, given any bytes, decodes or raises WireFormatError (issue 13): structure-aware
fuzzing with a fixed budget (``pyflink_tensair.testing.wire_fuzz``; more runs with
``python -m pyflink_tensair.testing.wire_fuzz --runs N``)."""

import json

import numpy as np
import pytest

from pyflink_tensair import WireFormatError
from pyflink_tensair.core import wire
from pyflink_tensair.core.messages import GradientMessage, SparseGradient
from pyflink_tensair.testing import wire_fuzz

RUNS = 300


@pytest.mark.parametrize("decoder", sorted(wire_fuzz.DECODERS))
def test_a_decoder_raises_only_wire_format_errors(decoder):
    report = wire_fuzz.fuzz(decoder, RUNS, seed=13)
    assert report.runs == RUNS
    assert report.escaped == [], report.escaped[:3]
    if decoder != "message_origin":  # which never raises
        assert report.rejected > RUNS // 3  # the mutations reach the checks


def _rewrite_header(record: bytes, change) -> bytes:
    prefix, header, data = wire_fuzz._split(record)
    change(header)
    return wire_fuzz._join(prefix, header, data)


def _message():
    return wire.encode_message(GradientMessage(0, 3, 3, {
        "000": np.ones((2, 2), np.float32),
        "001": SparseGradient(np.array([1], np.int64), np.ones((1, 2), np.float32), (4, 2))}))


@pytest.mark.parametrize("change", [
    lambda h: h["tensors"][0].update(dtype=["<f4"]),                 # a list where a dtype belongs
    lambda h: h["tensors"][0].update(dtype={"kind": "f"}),           # an object
    lambda h: h["meta"].update(sparse=json.dumps({"001": ["4", 2]})),  # a string in a sparse dense shape
    lambda h: h["meta"].update(sparse=json.dumps({"001": []})),
    lambda h: h["meta"].update(order=json.dumps([{"a": 1}, "000"])),
    lambda h: h["tensors"][0].update(shape=[2 ** 70, 2]),
], ids=["dtype-list", "dtype-object", "dense-shape-string", "dense-shape-empty", "order-object", "huge-shape"])
def test_the_malformed_headers_that_escaped_before_raise_wire_format_errors(change):
    with pytest.raises(WireFormatError):
        wire.decode_message(_rewrite_header(_message(), change))


def test_the_fuzzer_mutates_structure_not_only_bytes():
    """Its header mutations hit fields inside the JSON that the meta holds as text."""
    paths = wire_fuzz._paths(wire_fuzz._split(_message())[1])
    assert ("meta", "sparse", wire_fuzz._IN_JSON, "001", 0) in paths
    assert ("tensors", 0, "dtype") in paths
