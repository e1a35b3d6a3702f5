"""Image data sets that can be had offline, as NumPy arrays, and any of them as a stream. No pyflink import.

- :func:`load_digits`: scikit-learn's handwritten digits (1,797 real 8x8 images, 10 classes), shipped
  inside its wheel.
- :func:`read_cifar10`: the standard CIFAR-10 binary batches from a folder the user provides
  (:func:`cifar10_files` finds them; :func:`write_cifar10` writes the format, for tests).
- :func:`synthetic_images`: generated 32x32x3 images in 10 classes, for throughput runs only.
- :class:`ImageStream`: batch ``i`` of one of them replayed pass after pass, for a Flink source;
  :func:`parse_image_spec` reads the job's ``--data`` value.
"""

from __future__ import annotations

import functools
import glob
import os
from typing import List, Tuple

import numpy as np

from ..core.messages import Batch
from ..errors import ConfigError, DataError, DataNotFoundError

CIFAR10_RECORD = 1 + 32 * 32 * 3  # a label byte, then 1024 red, 1024 green, 1024 blue bytes
CIFAR10_TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
CIFAR10_TEST_FILE = "test_batch.bin"


def load_digits() -> Tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: images as float32 in [0, 1] of shape (1797, 8, 8, 1), labels int64 in 0..9."""
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    x = (digits.images.astype(np.float32) / 16.0)[..., np.newaxis]
    return x, digits.target.astype(np.int64)


def cifar10_files(folder: str, *, train: bool = True) -> List[str]:
    """The CIFAR-10 binary batches present in ``folder``: ``data_batch_1.bin`` .. ``data_batch_5.bin``
    (``train``) or ``test_batch.bin``. Raises DataNotFoundError when the folder does not exist or,
    for the training files, holds none of them."""
    if not os.path.isdir(folder):
        raise DataNotFoundError(f"CIFAR-10 folder {folder!r} does not exist")
    names = CIFAR10_TRAIN_FILES if train else [CIFAR10_TEST_FILE]
    paths = [os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))]
    if train and not paths:
        found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "*")))[:10]
        raise DataNotFoundError(f"no CIFAR-10 binary batches ({', '.join(names)}) in {folder!r}; it holds {found}")
    return paths


def read_cifar10(folder: str, *, train: bool = True) -> Tuple[np.ndarray, np.ndarray]:
    """Reads CIFAR-10's binary version (``data_batch_1.bin`` .. ``data_batch_5.bin``, or ``test_batch.bin``).

    Returns ``(x, y)``: float32 images in [0, 1] of shape (N, 32, 32, 3) and int64 labels. Files
    present are read in order; a file whose size is not a whole number of records is an error.
    """
    paths = cifar10_files(folder, train=train)
    if not paths:
        raise DataNotFoundError(f"no CIFAR-10 test batch ({CIFAR10_TEST_FILE}) in {folder!r}")
    images, labels = [], []
    for path in paths:
        raw = np.fromfile(path, dtype=np.uint8)
        if raw.size == 0 or raw.size % CIFAR10_RECORD:
            raise DataError(f"{path} holds {raw.size} bytes, not a whole number of {CIFAR10_RECORD}-byte CIFAR-10 records")
        records = raw.reshape(-1, CIFAR10_RECORD)
        if records[:, 0].max() > 9:
            raise DataError(f"{path} has labels above 9: not a CIFAR-10 binary batch")
        labels.append(records[:, 0].astype(np.int64))
        images.append(records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    return np.concatenate(images).astype(np.float32) / 255.0, np.concatenate(labels)


def write_cifar10(path: str, x: np.ndarray, y: np.ndarray) -> None:
    """Writes images (N, 32, 32, 3) in [0, 1] and labels in CIFAR-10's binary format (for tests)."""
    pixels = np.clip(np.rint(x * 255.0), 0, 255).astype(np.uint8).transpose(0, 3, 1, 2).reshape(len(x), -1)
    np.concatenate([y.astype(np.uint8)[:, None], pixels], axis=1).tofile(path)


def synthetic_images(index: int, *, batch_size: int, seed: int = 0, classes: int = 10) -> Tuple[np.ndarray, np.ndarray]:
    """Batch ``index`` of generated 32x32x3 images: a class-specific pattern plus noise (throughput runs).

    ``0.5 * pattern + 0.5 * noise`` in float32; the benchmark's source makes one batch per record
    on the same cores as the replicas, so the arithmetic runs in place on one array (bit for bit
    the values of the three-temporary expression it replaced: 4.9 -> 3.3 ms a batch of 128).
    """
    rng = np.random.default_rng([seed, 1, int(index)])
    y = rng.integers(0, classes, size=batch_size)
    x = rng.uniform(0, 1, size=(batch_size, 32, 32, 3)).astype(np.float32)
    x *= np.float32(0.5)
    x += _half_patterns(seed, classes)[y]
    return x, y.astype(np.int64)


@functools.lru_cache(maxsize=8)
def _half_patterns(seed: int, classes: int) -> np.ndarray:
    patterns = np.random.default_rng([seed, 0]).uniform(0, 1, size=(classes, 32, 32, 3)).astype(np.float32)
    patterns *= np.float32(0.5)
    patterns.setflags(write=False)
    return patterns


DIGITS_HOLDOUT = 297  # the last images of scikit-learn's digits are never streamed: a held-out test set
SYNTHETIC_PASS = 50_000  # images per "pass" over synthetic data (as many as CIFAR-10's training set)


class ImageStream:
    """Mini-batch ``i`` of an image data set replayed as a stream, one fresh shuffle per pass.

    ``spec`` is ``"digits"``, ``"cifar10:FOLDER"`` or ``"synthetic"``. The data set is loaded on the
    first call (once per Python worker), so the object itself stays small enough to ship to Flink.
    Pass ``p`` visits the training images in ``default_rng([seed, p]).permutation``; a pass has
    ``batches_per_pass`` full batches (the remainder of each shuffle is left out). Batch metadata:
    ``id`` (= ``i``) and ``pass``.

    Example::

        >>> stream = ImageStream("digits", batch_size=32)
        >>> stream.batches_per_pass, stream(50).meta["pass"], stream(50).x.shape
        (46, 1, (32, 8, 8, 1))
    """

    def __init__(self, spec: str, *, batch_size: int, seed: int = 0):
        self.kind, self.folder = parse_image_spec(spec)
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1. Received: batch_size={batch_size}")
        self.spec = spec
        self.batch_size = batch_size
        self.seed = seed
        self._train = None
        self._permutations = {}
        if self.kind == "cifar10":
            cifar10_files(self.folder)  # fails here, in the client, if the folder is unfit
        size = self.train_size
        if size < batch_size:
            raise DataError(f"{spec!r} has {size} training images, fewer than one batch of {batch_size}")
        self.batches_per_pass = size // batch_size

    @property
    def synthetic(self) -> bool:
        return self.kind == "synthetic"

    @property
    def input_shape(self) -> Tuple[int, ...]:
        return (8, 8, 1) if self.kind == "digits" else (32, 32, 3)

    @property
    def train_size(self) -> int:
        if self.kind == "digits":
            return 1797 - DIGITS_HOLDOUT
        if self.kind == "synthetic":
            return SYNTHETIC_PASS
        return sum(os.path.getsize(p) for p in cifar10_files(self.folder)) // CIFAR10_RECORD

    def _data(self):
        if self._train is None:
            if self.kind == "digits":
                x, y = load_digits()
                self._train = (x[:-DIGITS_HOLDOUT], y[:-DIGITS_HOLDOUT])
            else:
                self._train = read_cifar10(self.folder, train=True)
        return self._train

    def __call__(self, index: int) -> Batch:
        index = int(index)
        epoch, position = divmod(index, self.batches_per_pass)
        meta = {"id": index, "pass": epoch}
        if self.synthetic:
            x, y = synthetic_images(index, batch_size=self.batch_size, seed=self.seed)
            return Batch(x, y, meta)
        x, y = self._data()
        if epoch not in self._permutations:
            self._permutations = {epoch: np.random.default_rng([self.seed, epoch]).permutation(len(y))}
        rows = self._permutations[epoch][position * self.batch_size:(position + 1) * self.batch_size]
        return Batch(x[rows], y[rows], meta)

    def holdout(self, batch_size: int = 256):
        """Held-out batches: digits' last 297 images, CIFAR-10's ``test_batch.bin`` if present
        (else none), synthetic batches numbered beyond any stream."""
        if self.kind == "digits":
            x, y = load_digits()
            x, y = x[-DIGITS_HOLDOUT:], y[-DIGITS_HOLDOUT:]
        elif self.kind == "cifar10":
            if not cifar10_files(self.folder, train=False):
                return []
            x, y = read_cifar10(self.folder, train=False)
        else:
            batches = [synthetic_images(10 ** 9 + i, batch_size=batch_size, seed=self.seed) for i in range(4)]
            return [Batch(bx, by) for bx, by in batches]
        return [Batch(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(y), batch_size)]


def parse_image_spec(spec: str) -> Tuple[str, str]:
    """``"digits"`` -> ``("digits", "")``; ``"cifar10:FOLDER"`` -> ``("cifar10", FOLDER)``; ``"synthetic"``."""
    kind, _, folder = str(spec).partition(":")
    if kind in ("digits", "synthetic") and not folder:
        return kind, ""
    if kind == "cifar10" and folder:
        return kind, folder
    raise ConfigError(f"data must be 'digits', 'cifar10:FOLDER' or 'synthetic'. Received: {spec!r}")
