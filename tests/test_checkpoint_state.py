"""ChunkedState (the replica's state in keyed state, in chunks) and the jobs' checkpoint flags; no Flink."""

import argparse

import numpy as np
import pytest

from pyflink_tensair import Checkpoints
from pyflink_tensair.cli import flags
from pyflink_tensair.errors import WireFormatError
from pyflink_tensair.flink.checkpointing import ChunkedState


class FakeStore(dict):
    """What ChunkedState needs of its store (ValueStates in a job), with a log of the writes."""

    def __init__(self):
        super().__init__()
        self.puts = []

    def put(self, key, value):
        self.puts.append(key)
        self[key] = value

    def remove(self, key):
        del self[key]

    def contains(self, key):
        return key in self


def test_only_changed_chunks_are_written_again_and_extra_ones_removed():
    store = FakeStore()
    state = ChunkedState(store, chunk_bytes=1024)
    arrays = {"a": np.zeros(1024, np.float32), "b": np.arange(4, dtype=np.int64)}
    written = state.write(arrays)
    chunks = sorted(k for k in store if k.startswith("chunk/"))
    assert len(chunks) >= 4 and written == sum(len(store[k]) for k in chunks)
    store.puts.clear()
    assert state.write(arrays) == 0 and store.puts == []  # nothing changed, nothing written
    arrays["a"][-1] = 1.0  # one value: one chunk changes, the last of "a"'s four
    state.write(arrays)
    assert store.puts == ["chunk/000003", "manifest"]  # the manifest holds the digests
    store.puts.clear()
    np.testing.assert_array_equal(state.read()["a"], arrays["a"])
    state.write({**arrays, "held/000001": np.ones(300, np.uint8)})  # a new entry after the weights
    assert store.puts == ["chunk/000004", "manifest"]  # the weights' chunks stay
    read = state.read()
    assert read["held/000001"].dtype == np.uint8 and read["b"].tolist() == [0, 1, 2, 3]
    state.write({"b": arrays["b"]})  # smaller: the chunks beyond it go
    assert sorted(k for k in store if k.startswith("chunk/")) == ["chunk/000000"]
    assert set(state.read()) == {"b"}


def test_every_shape_and_dtype_comes_back_as_written():
    state = ChunkedState(FakeStore(), chunk_bytes=64)
    arrays = {"step": np.array(7, np.int64), "w": np.arange(6, dtype=np.float16).reshape(2, 3),
              "empty": np.zeros((0, 4), np.float32), "flags": np.array([True, False])}
    state.write(arrays)
    read = state.read()
    assert list(read) == list(arrays)
    for name, value in arrays.items():
        assert read[name].shape == value.shape and read[name].dtype == value.dtype
        np.testing.assert_array_equal(read[name], value)


def test_a_state_with_a_wrong_digest_or_layout_or_an_old_manifest_is_refused():
    import json

    store = FakeStore()
    state = ChunkedState(store, chunk_bytes=64)
    state.write({"w": np.arange(100, dtype=np.float32)})
    good = dict(store)
    store["chunk/000001"] = bytes(64)  # same length, other bytes
    with pytest.raises(WireFormatError, match="does not match its digest"):
        state.read()
    store.update(good)
    manifest = json.loads(store["manifest"])
    store["manifest"] = json.dumps({**manifest, "layout": [["w", "<f4", [99]]]}).encode()
    with pytest.raises(WireFormatError, match="layout describes 396 bytes"):
        state.read()
    store["manifest"] = json.dumps({"chunks": manifest["chunks"], "bytes": manifest["bytes"]}).encode()
    with pytest.raises(WireFormatError, match="older pyflink_tensair"):
        state.read()


def test_a_damaged_state_is_refused():
    store = FakeStore()
    state = ChunkedState(store, chunk_bytes=64)
    state.write({"w": np.arange(100, dtype=np.float32)})
    store["chunk/000001"] = store["chunk/000001"][:10]
    with pytest.raises(WireFormatError, match="damaged"):
        state.read()
    assert ChunkedState(FakeStore()).read() is None


def _args(argv):
    parser = argparse.ArgumentParser()
    flags.add_job_arguments(parser, batches=10, batch_size=8)
    return parser.parse_args(argv)


def test_jobs_checkpoint_by_default_into_their_outdir(tmp_path):
    args = _args(["--outdir", str(tmp_path)])
    config = flags.config_from_args(args, name="quickstart")
    assert config.checkpoints == Checkpoints(interval_s=flags.JOB_CONFIG.checkpoints.interval_s,
                                             dir=str(tmp_path / "checkpoints"), state_backend="hashmap")
    off = flags.config_from_args(_args(["--checkpoints-interval-s", "none"]), name="quickstart")
    assert off.checkpoints is None
    mine = flags.config_from_args(_args(["--checkpoints-dir", "s3://bucket/ckpt", "--checkpoints-state-backend", "rocksdb"]))
    assert mine.checkpoints.dir == "s3://bucket/ckpt" and mine.checkpoints.state_backend == "rocksdb"
