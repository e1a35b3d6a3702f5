"""What a replica lets in: batches it can train on, and peer messages that fit its model.

Pure checks, no IO: each returns ``None`` (let it in) or a :class:`Refusal` (why not, as a
:data:`~pyflink_tensair.core.messages.DEAD_LETTER_REASONS` code and words). The replica turns a
refusal into a dead letter and a count; :class:`~pyflink_tensair.config.Guards` sets the policy.

Example::

    >>> spec = BatchSpec(inputs={None: (3,)}, classes=4)
    >>> check_batch(Batch(np.zeros((2, 3), np.float32), np.array([0, 4])), spec, needs_labels=True)
    Refusal(reason='label_out_of_range', detail='labels must be classes 0 .. 3 of the model; found 0 .. 4')
    >>> check_batch(Batch(np.zeros((2, 3), np.float32), np.array([0, 3])), spec, needs_labels=True) is None
    True
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, NamedTuple, Optional, Tuple

import numpy as np

from ..config import DEFAULT_MAX_BATCH_BYTES
from .gradients import scale_gradients
from .messages import Batch, Gradients, SparseGradient, WeightsMessage

Shape = Tuple[Optional[int], ...]


class Refusal(NamedTuple):
    reason: str
    detail: str


@dataclass(frozen=True)
class BatchSpec:
    """What a model takes. ``inputs``: the shape after the batch axis of each input (``None``
    dims: any size), keyed by input name, or by ``None`` for a model of one array input;
    ``integer_inputs``: the inputs that take integers (indices: floats are refused);
    ``classes``: the number of classes integer labels index (``None``: not checked)."""

    inputs: Dict[Optional[str], Shape]
    integer_inputs: FrozenSet[Optional[str]] = field(default_factory=frozenset)
    classes: Optional[int] = None


def _numeric(array: np.ndarray) -> bool:
    return array.dtype.kind in "biuf"


def _finite(array: np.ndarray) -> bool:
    return array.dtype.kind != "f" or bool(np.isfinite(array).all())


def _fits(shape: tuple, expected: Shape) -> bool:
    return len(shape) == len(expected) and all(e is None or s == e for s, e in zip(shape, expected))


def check_batch(batch: Batch, spec: Optional[BatchSpec], *, needs_labels: bool,
                max_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Optional[Refusal]:
    """Whether ``batch`` can be trained on (``needs_labels``) or predicted, by a model of ``spec``
    (``None``: the checks that need no model)."""
    arrays = dict(batch.x) if isinstance(batch.x, dict) else {None: batch.x}
    if batch.size == 0:
        return Refusal("empty", "the batch has no rows")
    nbytes = sum(int(a.nbytes) for a in arrays.values()) + (0 if batch.y is None else int(batch.y.nbytes))
    if nbytes > max_bytes:
        return Refusal("oversized", f"the batch has {nbytes} bytes; Guards.max_batch_bytes is {max_bytes}")
    if needs_labels and batch.y is None:
        return Refusal("missing_field", "a batch to train on needs labels 'y'")
    if spec is not None:
        if set(arrays) != set(spec.inputs):
            names = lambda keys: sorted("x" if k is None else k for k in keys)  # noqa: E731
            return Refusal("missing_field", f"the model takes inputs {names(spec.inputs)}; the batch has {names(arrays)}")
        for name, array in arrays.items():
            label = "x" if name is None else f"x[{name!r}]"
            if not _fits(array.shape[1:], spec.inputs[name]):
                return Refusal("wrong_shape", f"{label} has rows of shape {array.shape[1:]}; the model takes "
                                              f"{tuple(spec.inputs[name])}")
            if name in spec.integer_inputs and array.dtype.kind not in "biu":
                return Refusal("wrong_dtype", f"{label} is {array.dtype}; the model takes integers there")
    for name, array in arrays.items():
        label = "x" if name is None else f"x[{name!r}]"
        if not _numeric(array):
            return Refusal("wrong_dtype", f"{label} is {array.dtype}, not numbers")
        if not _finite(array):
            return Refusal("non_finite", f"{label} holds NaN or infinite values")
    y = batch.y
    if y is not None:
        if not _numeric(y):
            return Refusal("wrong_dtype", f"labels are {y.dtype}, not numbers")
        if not _finite(y):
            return Refusal("non_finite", "labels hold NaN or infinite values")
        if spec is not None and spec.classes is not None and y.size and y.ndim <= 1:
            low, high = y.min(), y.max()
            if low < 0 or high > spec.classes - 1:
                return Refusal("label_out_of_range", f"labels must be classes 0 .. {spec.classes - 1} of the model; "
                                                     f"found {_number(low)} .. {_number(high)}")
    return None


def _number(value) -> str:
    value = value.item()
    return str(int(value)) if float(value).is_integer() else str(value)


# ------------------------------------------------------------------ peer messages

def gradient_norm(gradients: Gradients) -> float:
    """The global L2 norm of a gradient; ``inf`` or ``nan`` when any value is not finite. One
    BLAS dot product per tensor (no copy, a fraction of a millisecond per MB); a sum of squares
    that overflows float32 is taken again in float64, so a huge but finite gradient has a
    finite norm (which a norm bound can then judge)."""
    total = 0.0
    for grad in gradients.values():
        values = grad.values if isinstance(grad, SparseGradient) else grad
        flat = np.ravel(values)
        if flat.dtype not in (np.float32, np.float64):  # half-float rows, ints: BLAS needs float32
            flat = flat.astype(np.float32)
        square = float(np.dot(flat, flat))
        if not math.isfinite(square):
            square = float(np.einsum("i,i->", flat, flat, dtype=np.float64))
        total += square
    return math.sqrt(total) if total >= 0 else float("nan")


def variable_shapes(weights: Dict[str, np.ndarray]) -> Dict[str, tuple]:
    """The shapes a peer message must match: the model's trainable weights'."""
    return {name: tuple(np.shape(value)) for name, value in weights.items()}


def check_tensors(tensors: Dict[str, object], shapes: Dict[str, tuple], *, dense_only: bool = False) -> Optional[Refusal]:
    """Whether a message's tensors fit the model: the same names, the same shapes, float values,
    and the rows of a sparse gradient inside its table. ``dense_only``: a subset of the names,
    all dense (a weights message carries only the variables with dense gradients)."""
    names, expected = set(tensors), set(shapes)
    if names - expected:
        return Refusal("unknown_tensor", f"tensors {sorted(names - expected)[:5]} are no variables of the model")
    if not dense_only and expected - names:
        return Refusal("unknown_tensor", f"tensors {sorted(expected - names)[:5]} of the model are missing")
    for name, value in tensors.items():
        if isinstance(value, SparseGradient):
            if dense_only or tuple(value.dense_shape) != shapes[name]:
                return Refusal("wrong_shape", f"sparse {name!r} of table {tuple(value.dense_shape)}; the variable is "
                                              f"{shapes[name]}")
            indices = value.indices
            if indices.dtype.kind not in "iu" or (indices.size and (indices.min() < 0 or indices.max() >= shapes[name][0])):
                return Refusal("wrong_shape", f"sparse {name!r} has indices outside its table of {shapes[name][0]} rows")
            values = value.values
        else:
            values = np.asarray(value)
            if values.shape != shapes[name]:
                return Refusal("wrong_shape", f"{name!r} has shape {values.shape}; the variable is {shapes[name]}")
        if values.dtype.kind != "f":
            return Refusal("wrong_dtype", f"{name!r} is {values.dtype}, not floats")
    return None


def check_norm(norm: float, max_norm: Optional[float]) -> Optional[Refusal]:
    """Non-finite gradients are always refused; norms above ``max_norm`` are outliers."""
    if not math.isfinite(norm):
        return Refusal("non_finite", "the gradient holds NaN or infinite values")
    if max_norm is not None and norm > max_norm:
        return Refusal("norm_bound", f"the gradient's norm {norm:.4g} is above Guards.max_gradient_norm {max_norm:g}")
    return None


# ------------------------------------------------------------------ single records (to_batches)

def check_record(record, *, features_shape: Optional[tuple], labelled: Optional[bool],
                 classes: Optional[int] = None) -> Tuple[Optional[Refusal], Optional[np.ndarray], object]:
    """``(refusal, features, label)`` of one ``(features, label)`` record for the default collate.

    ``features_shape``: the shape every record's features must have (``None``: any);
    ``labelled``: whether records carry a label (``None``: either, the first one decides);
    ``classes``: integer labels must be ``0 .. classes - 1``.

    Example::

        >>> check_record(([1.0, float("nan")], 0), features_shape=(2,), labelled=True)[0].reason
        'non_finite'
    """
    if not isinstance(record, (tuple, list)) and not (hasattr(record, "__len__") and hasattr(record, "__getitem__")):
        return Refusal("missing_field", f"a record is (features, label) or (features,); received a "
                                        f"{type(record).__name__}"), None, None
    if isinstance(record, (str, bytes)):
        return Refusal("missing_field", f"a record is (features, label) or (features,); received a "
                                        f"{type(record).__name__}"), None, None
    if len(record) not in (1, 2):
        return Refusal("missing_field", "a record is (features, label) or (features,); received "
                                        f"{len(record)} fields"), None, None
    if labelled is not None and (len(record) == 2) != labelled:
        return Refusal("missing_field", "the stream's records carry labels; this one has none" if labelled
                       else "the stream's records carry no labels; this one has one"), None, None
    try:
        features = np.asarray(record[0], dtype=np.float64)
    except (TypeError, ValueError) as err:
        if "inhomogeneous" in str(err):
            return Refusal("wrong_shape", "features are a ragged list of lists"), None, None
        return Refusal("wrong_dtype", f"features are not an array of numbers ({str(err)[:100]})"), None, None
    if features_shape is not None and features.shape != tuple(features_shape):
        return Refusal("wrong_shape", f"features of shape {features.shape}; the stream's are {tuple(features_shape)}"), None, None
    if not np.isfinite(features).all():
        return Refusal("non_finite", "features hold NaN or infinite values"), None, None
    label = record[1] if len(record) == 2 else None
    if label is not None:
        if isinstance(label, (bool, np.bool_)) or not isinstance(label, (int, float, np.integer, np.floating)):
            return Refusal("wrong_dtype", f"a label is a number; received a {type(label).__name__}"), None, None
        if not math.isfinite(label):
            return Refusal("non_finite", f"the label is {label}"), None, None
        if classes is not None and not (float(label).is_integer() and 0 <= label < classes):
            return Refusal("label_out_of_range", f"labels must be classes 0 .. {classes - 1}; received {label}"), None, None
    elif len(record) == 2:
        return Refusal("missing_field", "the label is None"), None, None
    return None, features, label


def vet_peer_tensors(message, shapes: Dict[str, tuple], guards) -> Tuple[Optional[Refusal], object, bool]:
    """``(refusal, message, clipped)``: whether a peer's gradient or weights message fits the
    model's ``shapes`` and is finite, and within ``guards.max_gradient_norm`` (weights: no bound);
    with ``guards.norm_action == "clip"`` a gradient beyond it comes back scaled down to it
    (``clipped``) instead of refused."""
    weights = isinstance(message, WeightsMessage)
    tensors = message.weights if weights else message.gradients
    refusal = check_tensors(tensors, shapes, dense_only=weights)
    if refusal is not None:
        return refusal, message, False
    norm = gradient_norm(tensors)
    refusal = check_norm(norm, None if weights else guards.max_gradient_norm)
    if refusal is not None and refusal.reason == "norm_bound" and guards.norm_action == "clip":
        return None, dataclasses.replace(message, gradients=scale_gradients(message.gradients,
                                                                           guards.max_gradient_norm / norm)), True
    return refusal, message, False
