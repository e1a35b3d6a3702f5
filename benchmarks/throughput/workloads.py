"""The benchmark's workloads: a model and a deterministic batch for every number, same for every system.

- ``dense``: the reference CIFAR-10 CNN (122,570 parameters, Adam), batches of 128 generated
  32x32x3 images in 10 classes, shipped as uint8 pixels and scaled inside the model.
- ``sparse``: word2vec with the reference sizes (two tables of 50,000 x 300, SGD), batches of 2,048
  skip-gram pairs with 4 negatives, word ids drawn from a Zipf law over the vocabulary (rank ``k``
  with probability proportional to ``1 / (k + 10)``), so the rows a batch touches are as skewed as
  in text.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from pyflink_tensair.core.messages import Batch
from pyflink_tensair.datasets import synthetic_images

VOCABULARY, DIM, NEGATIVES = 50_000, 300, 4


@dataclass(frozen=True)
class Workload:
    name: str
    batch_size: int
    model: Callable  # a model spec for train(): a partial of a zoo builder
    make_batch: Callable[[int], Batch]
    batch_bytes: int
    description: str


def dense_batch(index: int, batch_size: int = 128, seed: int = 0, pixels: str = "float32") -> Batch:
    x, y = synthetic_images(index, batch_size=batch_size, seed=seed)
    if pixels == "uint8":
        x = np.round(x * 255).astype(np.uint8)
    return Batch(x, y, {"id": int(index)})


@functools.lru_cache(maxsize=4)
def _zipf_cdf(vocabulary: int) -> np.ndarray:
    weights = 1.0 / (np.arange(vocabulary) + 10.0)
    return np.cumsum(weights / weights.sum())


def sparse_batch(index: int, batch_size: int = 2048, vocabulary: int = VOCABULARY, negatives: int = NEGATIVES,
                 seed: int = 0) -> Batch:
    rng = np.random.default_rng([seed, 7, int(index)])
    cdf = _zipf_cdf(vocabulary)
    draw = lambda shape: np.minimum(np.searchsorted(cdf, rng.random(shape)), vocabulary - 1).astype(np.int32)  # noqa: E731
    target = draw(batch_size)
    context = draw((batch_size, 1 + negatives))
    y = np.zeros((batch_size, 1 + negatives), np.float32)
    y[:, 0] = 1.0
    return Batch({"target": target, "context": context}, y, {"id": int(index)})


def get(name: str, batch_size: int = None, pixels: str = "uint8") -> Workload:
    """``pixels``: how the dense workload ships its images, ``uint8`` (scaled inside the model,
    as image pipelines do: 393 KB a batch) or ``float32`` (1.5 MB, the benchmark's images until
    2026-12-01); the sparse workload has none."""
    from pyflink_tensair.models import zoo

    if pixels not in ("float32", "uint8"):
        raise ValueError(f"pixels must be 'float32' or 'uint8'. Received: {pixels!r}")
    if name == "dense":
        size = batch_size or 128
        pixel_bytes = 1 if pixels == "uint8" else 4
        return Workload("dense", size, functools.partial(zoo.cifar10_cnn, pixels=pixels),
                        functools.partial(dense_batch, batch_size=size, pixels=pixels),
                        size * (32 * 32 * 3 * pixel_bytes + 2 * 4),
                        f"CIFAR-10 CNN (122,570 parameters), batch {size}, generated 32x32x3 {pixels} images")
    if name == "sparse":
        size = batch_size or 2048
        return Workload("sparse", size, functools.partial(zoo.word2vec, vocabulary=VOCABULARY, dim=DIM, negatives=NEGATIVES),
                        functools.partial(sparse_batch, batch_size=size), size * (1 + 2 * (1 + NEGATIVES)) * 4,
                        f"word2vec, 2 tables of {VOCABULARY:,} x {DIM}, batch {size} pairs, 4 negatives, Zipf word ids")
    raise ValueError(f"workload must be 'dense' or 'sparse'. Received: {name!r}")
