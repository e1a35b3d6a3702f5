"""Pacing, image streams and prequential scores: the pieces the use-case jobs are made of (no Flink run)."""

from types import SimpleNamespace

import numpy as np
import pytest

from pyflink_tensair.datasets import images as image_sets
from pyflink_tensair.core import wire
from pyflink_tensair.core.messages import Batch
from pyflink_tensair.core.prequential import segment_means, sliding_mean
from pyflink_tensair.errors import ConfigError

pytest.importorskip("pyflink")
from pyflink_tensair.flink.sources import PacedBatches  # noqa: E402


class FakeClock:
    def __init__(self, now=100.0):
        self.now = now
        self.sleeps = []

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def _batch(i):
    return Batch(np.full((2, 3), i, np.float32), np.zeros(2, np.int64))


def test_paced_batches_are_due_at_start_plus_index_over_rate():
    clock = FakeClock()
    paced = PacedBatches(_batch, rate=4.0, clock=clock.time, sleep=clock.sleep)
    first = wire.decode_batch(paced(0))
    clock.now += 0.1  # the job took 0.1 s to ask for the next batch: it waits the other 0.15 s
    second = wire.decode_batch(paced(1))
    assert first.meta["scheduled_at"] == pytest.approx(100.0) and second.meta["scheduled_at"] == pytest.approx(100.25)
    assert clock.sleeps == [pytest.approx(0.15)]
    clock.now += 2.0  # far behind schedule: no waiting, and the due time does not move
    third = wire.decode_batch(paced(2))
    assert third.meta["scheduled_at"] == pytest.approx(100.5) and len(clock.sleeps) == 1
    assert [b.meta["id"] for b in (first, second, third)] == [0, 1, 2]
    np.testing.assert_array_equal(third.x, np.full((2, 3), 2, np.float32))


def test_unpaced_batches_never_wait_and_carry_no_schedule():
    clock = FakeClock()
    paced = PacedBatches(_batch, rate=0, clock=clock.time, sleep=clock.sleep)
    batches = [wire.decode_batch(paced(i)) for i in range(5)]
    assert clock.sleeps == [] and all("scheduled_at" not in b.meta for b in batches)


def test_negative_rate_is_refused():
    with pytest.raises(ConfigError, match="rate must be >= 0"):
        PacedBatches(_batch, rate=-1)


def test_batch_source_refuses_an_unknown_execution_mode_before_the_job_is_built():
    from pyflink_tensair.flink.sources import batch_source

    with pytest.raises(ConfigError, match="python_in must be one of 'jvm', 'processes', 'client'. Received: python_in='thread'"):
        batch_source(object(), 3, _batch, python_in="thread")


def test_digits_stream_visits_every_training_image_once_per_pass_in_a_new_order():
    stream = image_sets.ImageStream("digits", batch_size=100, seed=1)
    x, y = image_sets.load_digits()
    assert stream.batches_per_pass == 15 and stream.train_size == 1500
    per_pass = []
    for epoch in range(2):
        batches = [stream(epoch * 15 + k) for k in range(15)]
        assert all(b.meta["pass"] == epoch for b in batches)
        images = np.concatenate([b.x for b in batches]).reshape(1500, -1)
        per_pass.append(images)
        # every training image once, none of the held-out ones
        keys = {row.tobytes() for row in images}
        assert keys == {row.tobytes() for row in x[:1500].reshape(1500, -1)}
    assert not np.array_equal(per_pass[0], per_pass[1])
    again = image_sets.ImageStream("digits", batch_size=100, seed=1)(17)
    np.testing.assert_array_equal(again.x, stream(17).x)
    np.testing.assert_array_equal(again.y, stream(17).y)
    holdout = stream.holdout()
    assert sum(b.size for b in holdout) == image_sets.DIGITS_HOLDOUT


def test_cifar10_stream_reads_the_users_folder(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(50, 32, 32, 3)).astype(np.float32) / 255
    y = rng.integers(0, 10, size=50)
    image_sets.write_cifar10(str(tmp_path / "data_batch_1.bin"), x, y)
    stream = image_sets.ImageStream(f"cifar10:{tmp_path}", batch_size=16)
    assert stream.batches_per_pass == 3 and stream.input_shape == (32, 32, 3)
    batch = stream(4)
    assert batch.x.shape == (16, 32, 32, 3) and batch.meta["pass"] == 1
    assert stream.holdout() == []  # no test_batch.bin in the folder
    image_sets.write_cifar10(str(tmp_path / "test_batch.bin"), x[:10], y[:10])
    assert sum(b.size for b in stream.holdout()) == 10


@pytest.mark.parametrize("spec, error", [
    ("mnist", "data must be 'digits', 'cifar10:FOLDER' or 'synthetic'"),
    ("cifar10:", "data must be"),
    ("cifar10:/no/such/folder", "does not exist"),
])
def test_bad_image_specs_say_what_is_accepted(spec, error):
    with pytest.raises((ValueError, FileNotFoundError), match=error):
        image_sets.ImageStream(spec, batch_size=8)


def test_batch_larger_than_the_data_set_is_an_error():
    with pytest.raises(ValueError, match="fewer than one batch"):
        image_sets.ImageStream("digits", batch_size=2000)


def _records(accuracies, ids=None):
    ids = range(len(accuracies)) if ids is None else ids
    return [SimpleNamespace(batch_id=i, accuracy=a) for i, a in zip(ids, accuracies)]


def test_sliding_mean_follows_stream_order_not_arrival_order():
    records = _records([1.0, 0.0, 1.0, 1.0], ids=[3, 0, 2, 1])  # stream order: 0.0, 1.0, 1.0, 1.0
    assert sliding_mean(records, "accuracy", window=2) == [(1, 0.0), (2, 0.5), (3, 1.0), (4, 1.0)]
    assert sliding_mean(records, "accuracy", window=10)[-1] == (4, 0.75)


def test_sliding_mean_skips_missing_scores_and_rejects_bad_windows():
    records = _records([0.5, None, 1.0])
    assert sliding_mean(records, "accuracy", window=5) == [(1, 0.5), (2, 0.75)]
    with pytest.raises(ValueError, match="window must be >= 1"):
        sliding_mean(records, "accuracy", window=0)


def test_segment_means_are_per_pass():
    records = _records([0.0, 0.5, 1.0, 1.0, 0.5], ids=[0, 1, 2, 3, 5])
    assert segment_means(records, "accuracy", segment=2) == [0.25, 1.0, 0.5]
    with pytest.raises(ValueError):
        segment_means(records, "accuracy", segment=0)
