"""OPTWIN: drift in a monitored value found by splitting a sliding window at its optimal cut.

After Tosi and Theobald, "OPTWIN: Drift identification with optimal sub-windows" (2024), the
detector TensAIR pairs its replicas with. The window holds the last ``n`` values (at most
``max_window``) and is split into the older ``W_hist`` (``n - m`` values) and the recent ``W_new``
(``m`` values). The cut is chosen once per window length: the smallest ``m`` for which Welch's
t-test at the per-test confidence ``δ`` tells a rise of the mean by ``rigor`` standard deviations
of ``W_hist``, even when ``W_new``'s variance is as high as the F-test at ``δ`` still accepts::

    rigor >= t_δ(df) * sqrt(1 / (n - m) + f_δ / m),     f_δ = F⁻¹(δ; m - 1, n - m - 1)

(``df``: Welch-Satterthwaite's degrees of freedom for variances 1 and ``f_δ``; ``m`` at most
``n // 2``; a window too short for the rigor is cut in half). A small ``m`` reacts fast; a small
``rigor`` needs a larger ``m`` and sees smaller changes. Each value then runs two one-sided tests:

- **mean**: Welch's t of ``mean(W_new) - mean(W_hist)`` above ``t_δ(df)``: a drift;
- **variance**: ``var(W_new) / var(W_hist)`` above ``f_δ``: a drift if the mean rose too; if the
  mean fell (a model that learns), the window starts again from ``W_new``, without a drift.

Only rises count: a falling loss is learning, not drift. After a drift the window starts again.
``δ = confidence ** (1 / 4)`` as in the authors' implementation. Three things differ from that
implementation. Two go towards the paper's definitions: the t statistic divides by variances (it
divides by standard deviations there), and the F quantile's degrees of freedom are those of
``var(W_new) / var(W_hist)`` (they are swapped there). The third: where the variance rose and
the mean fell, the authors empty the window; here it keeps ``W_new``. Emptied, a window whose
newest values were a drift's first losses (the spread is the jump's; the mean still lower,
because the older part held higher values) started again at the new level and never saw the
rise: the drift demo's serving replica missed a permutation that way (``docs/use_cases.md``). Cuts and critical values are computed once
per (confidence, rigor) and window length and shared by every detector of the process.

Example (a loss that rises by one standard deviation, from about 1.0 to about 1.1, at value 500)::

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> values = np.concatenate([1 + 0.1 * rng.standard_normal(500), 1.1 + 0.1 * rng.standard_normal(500)])
    >>> detector = OPTWIN()
    >>> [i for i, v in enumerate(values) if detector.update(v)]
    [534]
    >>> detector.last_drift.kind, detector.last_drift.statistics["window"]
    ('mean', 535.0)
"""

from __future__ import annotations

import math
import threading
from functools import lru_cache
from typing import List, Optional, Tuple

import numpy as np
from scipy.special import fdtri, stdtrit

from .. import validation
from ..errors import ConfigError
from .detector import DriftDetector, register, require_number

_SMALLEST = 4  # the shortest window with two values on each side


class CutTable:
    """The cut ``m`` (size of ``W_new``), ``t_δ`` and ``f_δ`` for every window length, computed in
    order of length on first use (each cut starts its search from the previous one: the
    detectable change falls monotonically with ``m`` up to ``n // 2``)."""

    def __init__(self, delta: float, rigor: float):
        self.delta, self.rigor = delta, rigor
        self._m: List[int] = [0] * _SMALLEST
        self._t: List[float] = [0.0] * _SMALLEST
        self._f: List[float] = [0.0] * _SMALLEST
        self._solved: Optional[int] = None  # the previous length's cut, if it met the rigor
        self._lock = threading.Lock()  # replicas of one TaskManager share the table

    def detectable(self, n: int, m: int) -> Tuple[float, float, float]:
        """``(smallest detectable rise in W_hist's standard deviations, t_δ, f_δ)`` for the cut."""
        hist = n - m
        f = float(fdtri(m - 1, hist - 1, self.delta))
        a, b = 1.0 / hist, f / m
        df = (a + b) ** 2 / (a * a / (hist - 1) + b * b / (m - 1))
        t = float(stdtrit(df, self.delta))
        return t * math.sqrt(a + b), t, f

    def _cut(self, n: int) -> int:
        half = n // 2

        def meets(m):
            return self.detectable(n, m)[0] <= self.rigor

        if self._solved is None:
            if not meets(half):
                return half  # too short for the rigor: the most sensitive split, unsolved
            m = half
        else:
            m = min(self._solved, half)
            while m < half and not meets(m):
                m += 1
            if not meets(m):
                self._solved = None
                return half
        while m > 2 and meets(m - 1):
            m -= 1
        self._solved = m
        return m

    def at(self, n: int) -> Tuple[int, float, float]:
        if n >= len(self._m):
            with self._lock:
                for length in range(len(self._m), n + 1):
                    m = self._cut(length)
                    _, t, f = self.detectable(length, m)
                    self._m.append(m)
                    self._t.append(t)
                    self._f.append(f)
        return self._m[n], self._t[n], self._f[n]


@lru_cache(maxsize=None)
def cut_table(confidence: float, rigor: float) -> CutTable:
    return CutTable(confidence ** 0.25, rigor)


class _Side:
    """Running count, sum and sum of squares of one sub-window."""

    __slots__ = ("count", "total", "squares")

    def __init__(self):
        self.count, self.total, self.squares = 0, 0.0, 0.0

    def add(self, x: float, sign: int = 1) -> None:
        self.count += sign
        self.total += sign * x
        self.squares += sign * x * x

    def mean(self) -> float:
        return self.total / self.count

    def variance(self, noise: float) -> float:
        """Sample variance, its standard deviation raised by ``noise`` (a constant window has some)."""
        raw = max(self.squares - self.total * self.total / self.count, 0.0) / (self.count - 1)
        return (math.sqrt(raw) + noise) ** 2


@register
class OPTWIN(DriftDetector):
    """OPTWIN over a sliding window of ``min_window`` to ``max_window`` values; see the module.

    ``confidence``: of the drift (0.999 in the paper's experiments); ``rigor``: the rise of the
    mean, in standard deviations of the older values, that the cut makes detectable (0.5);
    ``noise``: added to each standard deviation so that constant windows can be compared.
    """

    kind = "optwin"

    def __init__(self, confidence: float = 0.999, rigor: float = 0.5, min_window: int = 30,
                 max_window: int = 25000, noise: float = 1e-6):
        super().__init__()
        require_number("confidence", confidence, low=0.5, high=1.0, low_open=True, high_open=True)
        require_number("rigor", rigor, low=0.0, low_open=True)
        require_number("noise", noise, low=0.0)
        for name, value in (("min_window", min_window), ("max_window", max_window)):
            validation.require_int(name, value, minimum=_SMALLEST)
        if max_window < min_window:
            raise ConfigError(f"max_window must be >= min_window. Received: min_window={min_window}, "
                              f"max_window={max_window}")
        self.confidence, self.rigor, self.noise = float(confidence), float(rigor), float(noise)
        self.min_window, self.max_window = min_window, max_window
        self._cuts = cut_table(self.confidence, self.rigor)
        self._buffer = np.zeros(max_window + 1)
        self.reset()

    def parameters(self) -> dict:
        return {"confidence": self.confidence, "rigor": self.rigor, "min_window": self.min_window,
                "max_window": self.max_window, "noise": self.noise}

    def reset(self) -> None:
        self._start, self._length = 0, 0
        self._hist, self._new = _Side(), _Side()
        self._since_exact = 0

    @property
    def window(self) -> int:
        return self._length

    def values(self) -> List[float]:
        """The window, oldest first."""
        idx = (self._start + np.arange(self._length)) % len(self._buffer)
        return self._buffer[idx].tolist()

    def _at(self, i: int) -> float:
        return float(self._buffer[(self._start + i) % len(self._buffer)])

    def _place_cut(self) -> None:
        """Move values across the cut until W_new holds the cut's ``m`` newest values."""
        n = self._length
        m = self._cuts.at(n)[0] if n >= _SMALLEST else n
        boundary, target = self._hist.count, n - m
        for i in range(boundary, target):
            x = self._at(i)
            self._new.add(x, -1)
            self._hist.add(x)
        for i in range(target, boundary):
            x = self._at(i)
            self._hist.add(x, -1)
            self._new.add(x)

    def _recount(self, boundary: int) -> None:
        """Sums from the values again, the oldest ``boundary`` in W_hist (running sums lose digits
        over long windows; a snapshot re-sums too, so that a restored detector goes on bit for bit)."""
        values = self.values()
        self._hist, self._new = _Side(), _Side()
        for x in values[:boundary]:
            self._hist.add(x)
        for x in values[boundary:]:
            self._new.add(x)
        self._since_exact = 0

    def _update(self, x: float):
        capacity = len(self._buffer)
        self._buffer[(self._start + self._length) % capacity] = x
        self._length += 1
        self._new.add(x)
        if self._length > self.max_window:
            oldest = float(self._buffer[self._start])
            self._start = (self._start + 1) % capacity
            self._length -= 1
            self._hist.add(oldest, -1)
        self._place_cut()
        self._since_exact += 1
        if self._since_exact >= self.max_window:
            self._recount(self._hist.count)
        n = self._length
        if n < self.min_window:
            return None
        m, t_critical, f_critical = self._cuts.at(n)
        mean_h, mean_n = self._hist.mean(), self._new.mean()
        var_h, var_n = self._hist.variance(self.noise), self._new.variance(self.noise)
        t = (mean_n - mean_h) / math.sqrt(var_n / m + var_h / (n - m))
        f = var_n / var_h
        statistics = {"window": n, "cut": m, "mean_hist": mean_h, "mean_new": mean_n, "var_hist": var_h,
                      "var_new": var_n, "t": t, "t_critical": t_critical, "f": f, "f_critical": f_critical}
        if t > t_critical:
            return "mean", statistics
        if f > f_critical:
            if mean_n > mean_h:
                return "variance", statistics
            self._keep_newest(m)  # more spread but a lower mean: learning, not drift
        return None

    def _keep_newest(self, m: int) -> None:
        """The window starts again from W_new, its ``m`` newest values (the level it moved to)."""
        self._start = (self._start + self._length - m) % len(self._buffer)
        self._length = m
        self._recount(m - (self._cuts.at(m)[0] if m >= _SMALLEST else m))

    def _window_state(self) -> dict:
        self._recount(self._hist.count)
        return {"values": self.values()}

    def _load_window_state(self, state: dict) -> None:
        self.reset()
        values = [float(v) for v in state["values"]]
        if len(values) > self.max_window:
            raise ConfigError(f"an OPTWIN snapshot holds at most max_window values. Received: {len(values)} values, "
                              f"max_window={self.max_window}")
        self._buffer[:len(values)] = values
        self._length = n = len(values)
        self._recount(n - (self._cuts.at(n)[0] if n >= _SMALLEST else n))
