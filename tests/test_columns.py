"""Records to a batch's columns: the chunk-at-a-time reading (core.columns, flink.chunk_batchers)
gives what the record-at-a-time check and collate give, bad records and all."""

import pickle
import struct

import numpy as np
import pytest

from pyflink_tensair.core import wire
from pyflink_tensair.core.columns import records_to_columns
from pyflink_tensair.core.guards import check_record
from pyflink_tensair.flink.chunk_batchers import TextChunkBatcher, split_chunk
from pyflink_tensair.kafka.source import json_example

GOOD = [([0.5, 1.0], 1), ((2.0, -3.0), 0), ([1e-3, 7], 2), ([4, 5], 1)]
BAD = [([0.5, float("nan")], 1), ([1.0], 0), ([1.0, 2.0], True), ([1.0, 2.0], None), ([1.0, 2.0],), "text",
       ([1.0, 2.0], 7), ([[1.0], [2.0, 3.0]], 0), (["a", "b"], 1), ([1.0, 2.0], float("inf")), ([1.0, 2.0], 1, 2),
       ([1.0, 2.0], np.int64(1)), ([1.0, 2.0], 0.5)]


def one_by_one(records, features_shape=None, labelled=None, classes=None):
    """The oracle: check_record per record, then np.asarray of the good ones."""
    good_x, good_y, refused = [], [], []
    for i, record in enumerate(records):
        refusal, features, label = check_record(record, features_shape=features_shape, labelled=labelled, classes=classes)
        if refusal is not None:
            refused.append((i, refusal))
            continue
        features_shape = features.shape if features_shape is None else features_shape
        labelled = (label is not None) if labelled is None else labelled
        good_x.append(features)
        good_y.append(label)
    x = np.asarray(good_x, dtype=np.float32) if good_x else None
    y = np.asarray(good_y) if good_x and labelled else None
    return x, y, refused


@pytest.mark.parametrize("seed", range(40))
def test_a_chunk_reads_as_its_records_would_one_by_one(seed):
    rng = np.random.default_rng(seed)
    pool = GOOD + (BAD if seed % 2 else [])  # half the chunks all good: the vectorised path
    records = [pool[i] for i in rng.integers(0, len(pool), size=int(rng.integers(1, 12)))]
    classes = 3 if seed % 3 else None
    columns = records_to_columns(records, features_shape=None, labelled=None, classes=classes)
    x, y, refused = one_by_one(records, classes=classes)
    assert [(i, r) for i, r in columns.refused] == refused
    if x is None:
        assert columns.x is None and columns.size == 0
        return
    assert columns.x.dtype == np.float32 and columns.x.tolist() == x.tolist()
    assert (columns.y is None) == (y is None)
    if y is not None:
        assert columns.y.dtype == y.dtype and columns.y.tolist() == y.tolist()  # int64, or float64 with a float label
    assert columns.features_shape == x.shape[1:] and columns.labelled == (y is not None)


def test_what_a_chunk_settles_holds_for_the_next():
    first = records_to_columns([([1.0, 2.0],)], features_shape=None, labelled=None)
    assert first.features_shape == (2,) and first.labelled is False and first.y is None
    second = records_to_columns([([1.0, 2.0], 1), ([1.0, 2.0, 3.0],)], features_shape=first.features_shape,
                                labelled=first.labelled)
    assert [(i, r.reason) for i, r in second.refused] == [(0, "missing_field"), (1, "wrong_shape")] and second.x is None


def chunk_of(number, before, records):
    return struct.pack("<qqi", number, before, len(records)) + b"".join(struct.pack("<i", len(r)) + r for r in records)


def test_a_pickled_chunk_splits_and_unpickles_with_its_unreadable_records_dead_letters():
    from pyflink_tensair.flink.chunk_batchers import read_pickled

    records = [pickle.dumps(r, 3) for r in ([[1.0, 2.0], 0], ([3.0], 1))] + [b"not a pickle", pickle.dumps({"x": [2.0]})]
    assert split_chunk(chunk_of(7, 40, records)) == (7, 40, records)
    read, letters = read_pickled(records, None, 40)
    assert read == [(0, [[1.0, 2.0], 0]), (1, ([3.0], 1)), (3, {"x": [2.0]})]
    assert [(i, d.reason, d.position) for i, d in letters] == [(2, "not_a_record", 42)]
    # parse applies to each unpickled record; what it raises on is a dead letter too
    read, letters = read_pickled(records, lambda r: (r["x"],), 40)
    assert read == [(3, ([2.0],))] and [(i, d.reason) for i, d in letters] == [(2, "not_a_record"), (0, "not_a_record"),
                                                                              (1, "not_a_record")]


def test_a_text_chunk_with_every_record_bad_makes_no_batch():
    out = list(TextChunkBatcher(2, json_example, None, None, 0.0)(["0", "0", "oops", "[1]"]))
    assert [wire.decode_dead_letter(o).position for o in out] == [0, 1]
