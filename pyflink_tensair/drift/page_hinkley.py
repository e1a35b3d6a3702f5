"""The Page-Hinkley test for a rise of the mean (Page 1954; as in Gama, Sebastião and Rodrigues 2013).

The cumulative deviation of each value from the running mean, less an allowed ``delta``, fades
by ``alpha`` per value::

    mean_t = mean_{t-1} + (x_t - mean_{t-1}) / t
    sum_t  = alpha * sum_{t-1} + (x_t - mean_t - delta)
    drift when sum_t - min(sum_1 .. sum_t) > threshold   (after min_values values)

``threshold`` is in the monitored value's units times values: a rise of ``d`` in the mean is seen
after about ``threshold / (d - delta)`` values. Only rises count, as for OPTWIN.

Example::

    >>> detector = PageHinkley(threshold=2.0)
    >>> [detector.update(0.0) for _ in range(50)].count(True), detector.update(5.0)
    (0, True)
"""

from __future__ import annotations

from .detector import DriftDetector, register, require_number
from .. import validation


@register
class PageHinkley(DriftDetector):
    """Page-Hinkley over the values since the last drift; see the module. Defaults as in River and MOA."""

    kind = "page_hinkley"

    def __init__(self, delta: float = 0.005, threshold: float = 50.0, alpha: float = 1 - 1e-4, min_values: int = 30):
        super().__init__()
        require_number("delta", delta, low=0.0)
        require_number("threshold", threshold, low=0.0, low_open=True)
        require_number("alpha", alpha, low=0.0, high=1.0, low_open=True)
        validation.require_int("min_values", min_values, minimum=1)
        self.delta, self.threshold, self.alpha, self.min_values = float(delta), float(threshold), float(alpha), min_values
        self.reset()

    def parameters(self) -> dict:
        return {"delta": self.delta, "threshold": self.threshold, "alpha": self.alpha, "min_values": self.min_values}

    def reset(self) -> None:
        self._count, self._mean, self._sum, self._minimum = 0, 0.0, 0.0, 0.0

    def _update(self, x: float):
        self._count += 1
        self._mean += (x - self._mean) / self._count
        self._sum = self.alpha * self._sum + (x - self._mean - self.delta)
        self._minimum = min(self._minimum, self._sum)
        statistic = self._sum - self._minimum
        if self._count >= self.min_values and statistic > self.threshold:
            return "mean", {"values": self._count, "mean": self._mean, "statistic": statistic, "threshold": self.threshold}
        return None

    def _window_state(self) -> dict:
        return {"count": self._count, "mean": self._mean, "sum": self._sum, "minimum": self._minimum}

    def _load_window_state(self, state: dict) -> None:
        self._count, self._mean = int(state["count"]), float(state["mean"])
        self._sum, self._minimum = float(state["sum"]), float(state["minimum"])
