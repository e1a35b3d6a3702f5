"""Offline data sets and the reference model sizes."""

import numpy as np
import pytest

from pyflink_tensair.datasets import images as image_sets


def test_cifar10_reader_round_trips_the_binary_format(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(7, 32, 32, 3)).astype(np.float32) / 255.0
    y = rng.integers(0, 10, size=7)
    image_sets.write_cifar10(str(tmp_path / "data_batch_1.bin"), x[:4], y[:4])
    image_sets.write_cifar10(str(tmp_path / "data_batch_2.bin"), x[4:], y[4:])
    images, labels = image_sets.read_cifar10(str(tmp_path))
    np.testing.assert_array_equal(labels, y)
    np.testing.assert_allclose(images, x, atol=1e-6)
    assert images.shape == (7, 32, 32, 3) and images.dtype == np.float32


def test_cifar10_layout_is_channel_major_per_record(tmp_path):
    record = np.zeros(image_sets.CIFAR10_RECORD, np.uint8)
    record[0] = 3
    record[1] = 255            # red, pixel (0, 0)
    record[1 + 1024 + 33] = 255  # green, pixel (1, 1)
    record.tofile(tmp_path / "test_batch.bin")
    images, labels = image_sets.read_cifar10(str(tmp_path), train=False)
    assert labels.tolist() == [3]
    assert images[0, 0, 0, 0] == 1.0 and images[0, 1, 1, 1] == 1.0 and images.sum() == 2.0


def test_cifar10_reader_rejects_what_is_not_cifar(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        image_sets.read_cifar10(str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="no CIFAR-10 binary batches"):
        image_sets.read_cifar10(str(tmp_path))
    (tmp_path / "data_batch_1.bin").write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match="not a whole number"):
        image_sets.read_cifar10(str(tmp_path))


def test_digits_are_the_real_data_set():
    pytest.importorskip("sklearn")
    x, y = image_sets.load_digits()
    assert x.shape == (1797, 8, 8, 1) and 0.0 <= x.min() and x.max() <= 1.0
    assert sorted(set(y.tolist())) == list(range(10))


def test_synthetic_images_are_deterministic_and_labelled():
    a = image_sets.synthetic_images(5, batch_size=4)
    b = image_sets.synthetic_images(5, batch_size=4)
    np.testing.assert_array_equal(a[0], b[0])
    assert a[0].shape == (4, 32, 32, 3) and a[1].max() < 10



@pytest.mark.parametrize("index,batch_size,seed", [(0, 1, 0), (5, 7, 0), (123, 128, 3), (10 ** 9, 16, 1)])
def test_synthetic_images_are_half_pattern_plus_half_uniform_noise_bit_for_bit(index, batch_size, seed):
    """The definition the benchmark's recorded streams were made with, computed the plain way."""
    patterns = np.random.default_rng([seed, 0]).uniform(0, 1, size=(10, 32, 32, 3)).astype(np.float32)
    rng = np.random.default_rng([seed, 1, index])
    y = rng.integers(0, 10, size=batch_size)
    expected = 0.5 * patterns[y] + 0.5 * rng.uniform(0, 1, size=(batch_size, 32, 32, 3)).astype(np.float32)
    x, labels = image_sets.synthetic_images(index, batch_size=batch_size, seed=seed)
    assert x.dtype == np.float32 and labels.dtype == np.int64
    assert x.tobytes() == expected.astype(np.float32).tobytes()
    np.testing.assert_array_equal(labels, y)
    x[:] = 0  # the caller owns its array: the cached patterns stay intact
    again, _ = image_sets.synthetic_images(index, batch_size=batch_size, seed=seed)
    assert again.tobytes() == expected.astype(np.float32).tobytes()

def test_reference_cnn_sizes():
    pytest.importorskip("keras")
    from pyflink_tensair.models import zoo

    assert zoo.cifar10_cnn().count_params() == 122_570
    assert zoo.digits_cnn().output_shape == (None, 10)
