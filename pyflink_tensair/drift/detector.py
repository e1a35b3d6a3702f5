"""What every drift detector offers: one value in, drift or not out, and a state that survives a checkpoint.

A detector watches one value per step (a batch's loss, or 0/1 errors) and says when its recent
values no longer look like the older ones. It is a pure object: no IO, no pyflink, no TensorFlow;
its whole state is a JSON-serialisable dict (``snapshot()``) that :func:`restore` turns back into
an equal detector, so a replica can keep it in Flink state.

Example::

    >>> from pyflink_tensair.drift import PageHinkley, restore
    >>> detector = PageHinkley(threshold=5.0, min_values=10)
    >>> [detector.update(0.1) for _ in range(20)].count(True)
    0
    >>> detections = [i for i in range(40) if detector.update(1.0)]
    >>> detections[0], detector.last_drift.kind
    (6, 'mean')
    >>> restore(detector.snapshot()).snapshot() == detector.snapshot()
    True
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Dict, Optional, Tuple, Type

from ..errors import ConfigError


@dataclass(frozen=True)
class Drift:
    """One detection: the detector's update count when it fired (``index``, from 0 over every
    value given, skipped ones included), which test fired (``kind``) and that test's statistics."""

    index: int
    kind: str
    statistics: Dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def test_statistic(self) -> Tuple[float, float]:
        """The fired test's statistic and the value it exceeded: OPTWIN's ``t`` / ``t_critical``
        (a mean drift) or ``f`` / ``f_critical`` (a variance drift), Page-Hinkley's
        ``statistic`` / ``threshold``; ``(nan, nan)`` when the statistics carry neither.

        Example::

            >>> Drift(9, "mean", {"t": 4.2, "t_critical": 2.1}).test_statistic()
            (4.2, 2.1)
        """
        s = self.statistics
        for value, bound in (("f", "f_critical") if self.kind == "variance" else ("t", "t_critical"),
                             ("statistic", "threshold")):
            if value in s and bound in s:
                return float(s[value]), float(s[bound])
        return float("nan"), float("nan")


class DriftDetector(ABC):
    """The interface of the drift detectors: ``update(value) -> bool``, ``last_drift``, ``reset()``,
    ``snapshot()`` (and :func:`restore` for the way back). Non-finite values are counted in
    ``skipped`` and change nothing else: a diverged loss is for the hardening layer to report."""

    kind: str = ""  # the name in snapshots and in make()

    def __init__(self):
        self.updates = 0  # values given, skipped ones included
        self.skipped = 0
        self.drifts = 0
        self.last_drift: Optional[Drift] = None

    def update(self, value: float) -> bool:
        """Take the next value; ``True`` when it completes a drift (then the detector starts afresh
        on the values after it, and ``last_drift`` says why)."""
        index = self.updates
        self.updates += 1
        x = float(value)
        if not math.isfinite(x):
            self.skipped += 1
            return False
        found = self._update(x)
        if found is None:
            return False
        kind, statistics = found
        self.drifts += 1
        self.last_drift = Drift(index, kind, {k: float(v) for k, v in statistics.items()})
        self.reset()
        return True

    def prime(self, values) -> None:
        """Start the window from ``values`` (a known-normal level) without counting them or
        reporting a drift: if they hold one, the detector starts afresh after it."""
        for value in values:
            x = float(value)
            if math.isfinite(x) and self._update(x) is not None:
                self.reset()

    @abstractmethod
    def _update(self, x: float):
        """``None``, or ``(kind, statistics)`` for a drift."""

    @abstractmethod
    def reset(self) -> None:
        """Forget the values seen (the counters and ``last_drift`` stay)."""

    @abstractmethod
    def parameters(self) -> dict:
        """The constructor's arguments."""

    @abstractmethod
    def _window_state(self) -> dict:
        """What ``reset()`` would forget, as plain JSON values."""

    @abstractmethod
    def _load_window_state(self, state: dict) -> None:
        pass

    def snapshot(self) -> dict:
        return {"kind": self.kind, "parameters": self.parameters(), "updates": self.updates,
                "skipped": self.skipped, "drifts": self.drifts,
                "last_drift": self.last_drift.to_dict() if self.last_drift else None,
                "window": self._window_state()}


_KINDS: Dict[str, Type[DriftDetector]] = {}


def register(cls: Type[DriftDetector]) -> Type[DriftDetector]:
    _KINDS[cls.kind] = cls
    return cls


def make(kind: str, **parameters) -> DriftDetector:
    """A detector by name (``"optwin"``, ``"page_hinkley"``) with its constructor's arguments."""
    if kind not in _KINDS:
        raise ConfigError(f"drift detector must be one of {sorted(_KINDS)}. Received: detector={kind!r}")
    return _KINDS[kind](**parameters)


def restore(snapshot: dict) -> DriftDetector:
    """The detector a ``snapshot()`` was taken of, in the same state."""
    if not isinstance(snapshot, dict) or snapshot.get("kind") not in _KINDS:
        raise ConfigError(f"not a drift detector's snapshot: kind must be one of {sorted(_KINDS)}. "
                          f"Received: kind={snapshot.get('kind') if isinstance(snapshot, dict) else type(snapshot).__name__!r}")
    detector = make(snapshot["kind"], **snapshot["parameters"])
    detector.updates, detector.skipped, detector.drifts = snapshot["updates"], snapshot["skipped"], snapshot["drifts"]
    last = snapshot.get("last_drift")
    detector.last_drift = Drift(**last) if last else None
    detector._load_window_state(snapshot["window"])
    return detector


def require_number(name: str, value, *, low: float, high: float = math.inf, low_open: bool = False,
                   high_open: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        bounds = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ConfigError(f"{name} must be a number in {bounds}. Received: {name}={value!r}")
