"""Data sets that can be had offline, as NumPy arrays. No pyflink import.

- :func:`load_digits`: scikit-learn's handwritten digits (1,797 real 8x8 images, 10 classes), shipped
  inside its wheel.
- :func:`read_cifar10`: the standard CIFAR-10 binary batches from a folder the user provides.
- :func:`synthetic_images`: generated 32x32x3 images in 10 classes, for throughput runs only.
"""

from __future__ import annotations

import glob
import os
from typing import Tuple

import numpy as np

CIFAR10_RECORD = 1 + 32 * 32 * 3  # a label byte, then 1024 red, 1024 green, 1024 blue bytes
CIFAR10_TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]


def load_digits() -> Tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: images as float32 in [0, 1] of shape (1797, 8, 8, 1), labels int64 in 0..9."""
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    x = (digits.images.astype(np.float32) / 16.0)[..., np.newaxis]
    return x, digits.target.astype(np.int64)


def read_cifar10(folder: str, *, train: bool = True) -> Tuple[np.ndarray, np.ndarray]:
    """Reads CIFAR-10's binary version (``data_batch_1.bin`` .. ``data_batch_5.bin``, or ``test_batch.bin``).

    Returns ``(x, y)``: float32 images in [0, 1] of shape (N, 32, 32, 3) and int64 labels. Files
    present are read in order; a file whose size is not a whole number of records is an error.
    """
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"CIFAR-10 folder {folder!r} does not exist")
    names = CIFAR10_TRAIN_FILES if train else ["test_batch.bin"]
    paths = [os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))]
    if not paths:
        found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "*")))[:10]
        raise FileNotFoundError(f"no CIFAR-10 binary batches ({', '.join(names)}) in {folder!r}; it holds {found}")
    images, labels = [], []
    for path in paths:
        raw = np.fromfile(path, dtype=np.uint8)
        if raw.size == 0 or raw.size % CIFAR10_RECORD:
            raise ValueError(f"{path} holds {raw.size} bytes, not a whole number of {CIFAR10_RECORD}-byte CIFAR-10 records")
        records = raw.reshape(-1, CIFAR10_RECORD)
        if records[:, 0].max() > 9:
            raise ValueError(f"{path} has labels above 9: not a CIFAR-10 binary batch")
        labels.append(records[:, 0].astype(np.int64))
        images.append(records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    return np.concatenate(images).astype(np.float32) / 255.0, np.concatenate(labels)


def write_cifar10(path: str, x: np.ndarray, y: np.ndarray) -> None:
    """Writes images (N, 32, 32, 3) in [0, 1] and labels in CIFAR-10's binary format (for tests)."""
    pixels = np.clip(np.rint(x * 255.0), 0, 255).astype(np.uint8).transpose(0, 3, 1, 2).reshape(len(x), -1)
    np.concatenate([y.astype(np.uint8)[:, None], pixels], axis=1).tofile(path)


def synthetic_images(index: int, *, batch_size: int, seed: int = 0, classes: int = 10) -> Tuple[np.ndarray, np.ndarray]:
    """Batch ``index`` of generated 32x32x3 images: a class-specific pattern plus noise (throughput runs)."""
    patterns = np.random.default_rng([seed, 0]).uniform(0, 1, size=(classes, 32, 32, 3)).astype(np.float32)
    rng = np.random.default_rng([seed, 1, int(index)])
    y = rng.integers(0, classes, size=batch_size)
    x = 0.5 * patterns[y] + 0.5 * rng.uniform(0, 1, size=(batch_size, 32, 32, 3)).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)
