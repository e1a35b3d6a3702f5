"""Is an arrival rate sustainable? Judged from each batch's delay behind its schedule.

A batch scheduled at ``t`` (``start + i / rate``) and trained at ``t + d`` has delay ``d``. After a
warm-up, the rate is sustainable when the delay does not keep growing: the least-squares slope of
delay against scheduled time over the measurement window stays below ``max_slope`` (the backlog
grows by less than that many seconds per second), and every batch was trained. The window's last
delays must also be under ``max_delay_s``, unless the delay is clearly falling (slope below
``-max_slope``): the source starts sending while the operators still load their models, and a
sustainable system is then still working off that start-up backlog.

Example::

    >>> steady = [(t / 10, 0.05) for t in range(200)]
    >>> judge(steady, expected=200).sustainable
    True
    >>> growing = [(t / 10, 0.02 * t) for t in range(200)]
    >>> judge(growing, expected=200).sustainable
    False
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np


@dataclass(frozen=True)
class Verdict:
    sustainable: bool
    reason: str
    trained: int
    expected: int
    slope: Optional[float]
    mean_delay_s: Optional[float]
    last_delay_s: Optional[float]

    def to_dict(self) -> dict:
        return asdict(self)


def judge(delays: Sequence[Tuple[float, float]], *, expected: int, warmup: float = 0.3,
          max_slope: float = 0.05, max_delay_s: float = 2.0) -> Verdict:
    """``delays``: ``(scheduled_at, delay_s)`` per trained batch; ``expected``: batches sent."""
    points: List[Tuple[float, float]] = sorted(delays)
    trained = len(points)
    if trained < max(10, expected):
        return Verdict(False, f"only {trained} of {expected} batches were trained", trained, expected, None, None, None)
    start, end = points[0][0], points[-1][0]
    window = [p for p in points if p[0] >= start + warmup * (end - start)]
    xs = np.array([p[0] for p in window])
    ys = [p[1] for p in window]
    my = sum(ys) / len(ys)
    # least squares of delay = slope * (x - mean x) + c; centred, a window of one instant gets slope 0
    design = np.column_stack([xs - xs.mean(), np.ones(len(xs))])
    slope = float(np.linalg.lstsq(design, ys, rcond=None)[0][0])
    tail = ys[-max(1, len(ys) // 10):]
    last = sum(tail) / len(tail)
    if slope > max_slope:
        reason = f"delay grows {slope:.3f} s per s"
    elif last > max_delay_s and slope >= -max_slope:
        reason = f"delay {last:.2f} s at the end, over {max_delay_s} s, not falling"
    elif last > max_delay_s:
        reason = f"start-up backlog falling ({slope:.3f} s per s)"
    else:
        reason = "delay bounded"
    sustainable = reason == "delay bounded" or reason.startswith("start-up backlog")
    # + 0.0: a flat window's slope, 0 up to rounding, reports as 0.0, never as -0.0
    return Verdict(sustainable, reason, trained, expected, round(slope, 4) + 0.0, round(my, 4), round(last, 4))
