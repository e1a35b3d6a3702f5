"""Arithmetic on gradient dicts whose entries are dense arrays or :class:`SparseGradient` rows.

Sums stay sparse when every term is sparse, so an embedding gradient never grows into a dense
table. Sums are computed in the order given, so replicas that sum the same messages in the same
order get bit-identical results (synchronous SGD relies on it).
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Sequence, cast

import numpy as np

from ..errors import ConfigError

from .messages import Gradient, Gradients, SparseGradient


def merge_sparse(parts: Sequence[SparseGradient]) -> SparseGradient:
    """Sums sparse gradients of one table into unique, sorted rows.

    Example::

        >>> a = SparseGradient(np.array([1, 4]), np.ones((2, 2), np.float32), (5, 2))
        >>> b = SparseGradient(np.array([4]), np.ones((1, 2), np.float32), (5, 2))
        >>> m = merge_sparse([a, b]); m.indices.tolist(), m.values[:, 0].tolist()
        ([1, 4], [1.0, 2.0])
    """
    indices = np.concatenate([p.indices for p in parts])
    values = np.concatenate([p.values for p in parts])
    unique, inverse = np.unique(indices, return_inverse=True)
    summed = np.zeros((unique.shape[0],) + values.shape[1:], dtype=_summing_dtype(values.dtype))
    np.add.at(summed, inverse, values)  # unbuffered and in order: deterministic
    return SparseGradient(unique.astype(parts[0].indices.dtype), summed, parts[0].dense_shape)


def _summing_dtype(dtype) -> np.dtype:
    """Half-float rows (``TrainConfig.sparse_values="float16"``) are summed and scaled in float32."""
    return np.promote_types(dtype, np.float32)


def round_sparse_values(gradients: Gradients, dtype) -> Gradients:
    """The gradients with every sparse entry's rows as ``dtype`` (e.g. ``float16``): what a
    peer decodes from a message whose rows travel so. Dense entries are unchanged. (The Keras
    adapter makes its rows half floats inside the compiled step; this is for other models.)

    Example::

        >>> g = {"emb": SparseGradient(np.array([0]), np.array([[1 / 3]], np.float32), (2, 1))}
        >>> float(round_sparse_values(g, np.float16)["emb"].values[0, 0])
        0.333251953125
    """
    out = {}
    for name, grad in gradients.items():
        if isinstance(grad, SparseGradient) and grad.values.dtype != dtype:
            grad = SparseGradient(grad.indices, grad.values.astype(dtype), grad.dense_shape)
        out[name] = grad
    return out


def _sum_one(terms: List[Gradient]) -> Gradient:
    if all(isinstance(t, SparseGradient) for t in terms):
        return terms[0] if len(terms) == 1 else merge_sparse(terms)
    total = None
    for term in terms:
        dense = term.to_dense() if isinstance(term, SparseGradient) else term
        total = dense.copy() if total is None else total + dense
    return total


def sum_gradients(gradient_sets: Iterable[Gradients]) -> Gradients:
    """Sums gradient dicts name by name, in the order given."""
    sets = list(gradient_sets)
    if not sets:
        raise ConfigError("sum_gradients needs at least one set of gradients")
    names = list(sets[0])
    for other in sets[1:]:
        if list(other) != names:
            raise ConfigError(
                f"gradient sets name different variables: {sorted(names)} vs {sorted(other)}"
            )
    return {name: _sum_one([s[name] for s in sets]) for name in names}


def scale_gradients(gradients: Gradients, factor: float) -> Gradients:
    out: Dict[str, Gradient] = {}
    for name, g in gradients.items():
        if isinstance(g, SparseGradient):
            out[name] = SparseGradient(g.indices, (g.values * factor).astype(_summing_dtype(g.values.dtype)), g.dense_shape)
        else:
            out[name] = (g * factor).astype(g.dtype)
    return out


def average_gradients(gradient_sets: Sequence[Gradients]) -> Gradients:
    """The mean of gradient dicts, summed in the order given (synchronous SGD's update)."""
    total = sum_gradients(gradient_sets)
    return total if len(gradient_sets) == 1 else scale_gradients(total, 1.0 / len(gradient_sets))


def average_weights(weight_sets: Sequence[Mapping[str, np.ndarray]]) -> Dict[str, np.ndarray]:
    """The element-wise mean of several models' weights, in the order given: one model that
    stands for DASGD replicas whose weights drifted apart.

    Example::

        >>> average_weights([{"w": np.array([1.0, 2.0])}, {"w": np.array([3.0, 2.0])}])["w"].tolist()
        [2.0, 2.0]
    """
    return {name: np.asarray(value) for name, value in average_gradients(cast(Sequence[Gradients], weight_sets)).items()}


def dense_nbytes(gradients: Gradients) -> int:
    """What the same gradients would weigh sent dense (the size TensAIR's messages have)."""
    return sum(g.dense_nbytes if isinstance(g, SparseGradient) else g.nbytes for g in gradients.values())
