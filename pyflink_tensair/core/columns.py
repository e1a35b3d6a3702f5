"""Many ``(features[, label])`` records to the columns of one mini-batch, checked as
:func:`~pyflink_tensair.core.guards.check_record` checks each, at NumPy's speed.

The common chunk (plain tuples or lists, features of one shape, finite, labels Python ints or
floats) is read with one ``np.asarray`` per column; any other chunk is read record by record with
``check_record``, so a bad record gets exactly the reason it would get alone. Pure, no IO.

Example::

    >>> columns = records_to_columns([([1.0, 2.0], 1), ([3.0, float("nan")], 0), ([5.0, 6.0], 1)],
    ...                              features_shape=None, labelled=None, classes=2)
    >>> columns.x.tolist(), columns.y.tolist(), [(i, r.reason) for i, r in columns.refused]
    ([[1.0, 2.0], [5.0, 6.0]], [1, 1], [(1, 'non_finite')])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .guards import Refusal, check_record

_PLAIN_LABELS = frozenset((int, float))


@dataclass
class Columns:
    """``x`` (float32, one row per good record) and ``y`` (``None`` without labels; int64 when every
    label is an int, else float64, as ``np.asarray`` reads the labels), ``refused``: ``(index in
    the chunk, Refusal)`` of the bad records; ``features_shape`` and ``labelled``: what the stream
    has settled once this chunk is read (``None`` while no good record came)."""

    x: Optional[np.ndarray]
    y: Optional[np.ndarray]
    refused: List[Tuple[int, Refusal]] = field(default_factory=list)
    features_shape: Optional[tuple] = None
    labelled: Optional[bool] = None

    @property
    def size(self) -> int:
        return 0 if self.x is None else len(self.x)


def records_to_columns(records: Sequence, *, features_shape: Optional[tuple], labelled: Optional[bool],
                       classes: Optional[int] = None) -> Columns:
    """The good records of ``records`` as columns, the bad ones refused with their reason.

    ``features_shape``, ``labelled`` and ``classes``: as :func:`~pyflink_tensair.core.guards.check_record`
    takes them (``None``: the first good record settles the shape, and whether records carry labels).
    """
    fast = _all_good(records, features_shape, labelled, classes)
    if fast is not None:
        x, y = fast
        return Columns(x.astype(np.float32), y, [], tuple(x.shape[1:]), y is not None)
    good_x, good_y, refused = [], [], []
    for index, record in enumerate(records):
        refusal, features, label = check_record(record, features_shape=features_shape, labelled=labelled,
                                                classes=classes)
        if refusal is not None:
            refused.append((index, refusal))
            continue
        if features_shape is None:
            features_shape = features.shape
        if labelled is None:
            labelled = label is not None
        good_x.append(features)
        good_y.append(label)
    if not good_x:
        return Columns(None, None, refused, features_shape, labelled)
    x = np.asarray(good_x, dtype=np.float32)
    y = np.asarray(good_y) if labelled else None
    return Columns(x, y, refused, tuple(features_shape), labelled)


def _all_good(records, features_shape, labelled, classes) -> Optional[Tuple[np.ndarray, Optional[np.ndarray]]]:
    """``(x as float64, y)`` when every record is good and plain, else ``None`` (read them one by one)."""
    if not records or not all(type(r) is tuple or type(r) is list for r in records):
        return None
    lengths = {len(r) for r in records}
    if len(lengths) != 1:
        return None
    (width,) = lengths
    if width not in (1, 2) or (labelled is not None and (width == 2) != labelled):
        return None
    try:
        x = np.asarray([r[0] for r in records], dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return None
    if (features_shape is not None and x.shape[1:] != tuple(features_shape)) or not np.isfinite(x).all():
        return None
    if width == 1:
        return x, None
    labels = [r[1] for r in records]
    if not set(map(type, labels)) <= _PLAIN_LABELS:  # bools, None, NumPy scalars: one by one
        return None
    try:
        y = np.asarray(labels)
    except OverflowError:
        return None
    if y.dtype.kind not in "if" or not np.isfinite(y).all():
        return None
    if classes is not None and not ((y == np.floor(y)).all() and (y >= 0).all() and (y < classes).all()):
        return None
    return x, y
