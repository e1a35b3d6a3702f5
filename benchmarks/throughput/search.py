"""The rate search: double while sustainable, then bisect between the last good and first bad rate.

Example::

    >>> probes = search(lambda rate: rate <= 37, start=4, bisections=3)
    >>> [(p.rate, p.sustainable) for p in probes]
    [(4, True), (8, True), (16, True), (32, True), (64, False), (48.0, False), (40.0, False), (36.0, True)]
    >>> best_rate(probes)
    36.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional


@dataclass
class Probe:
    rate: float
    sustainable: bool
    detail: dict


class _Enough(Exception):
    pass


def search(probe: Callable[[float], object], *, start: float, bisections: int = 3, max_rate: float = 4096,
           min_rate: float = 0.25, max_probes: Optional[int] = None) -> List[Probe]:
    """``probe(rate)`` returns a bool or ``(bool, detail)``. Starts at ``start``; halves down if
    ``start`` already fails (to ``min_rate``), doubles up while it holds (to ``max_rate``).
    ``max_probes``: stop after that many probes (a smoke run: the best rate is then a lower bound).

    Example::

        >>> [p.rate for p in search(lambda rate: rate <= 37, start=4, max_probes=2)]
        [4, 8]
    """
    probes: List[Probe] = []
    try:
        _search(probe, probes, start, bisections, max_rate, min_rate, max_probes)
    except _Enough:
        pass
    return probes


def _search(probe, probes: List[Probe], start, bisections, max_rate, min_rate, max_probes) -> None:
    def run(rate):
        if max_probes is not None and len(probes) >= max_probes:
            raise _Enough
        out = probe(rate)
        ok, detail = (out if isinstance(out, tuple) else (bool(out), {}))
        probes.append(Probe(rate, bool(ok), detail))
        return bool(ok)

    rate = start
    if run(rate):
        good, bad = rate, None
        while rate * 2 <= max_rate:
            rate *= 2
            if run(rate):
                good = rate
            else:
                bad = rate
                break
    else:
        good, bad = None, rate
        while rate / 2 >= min_rate:
            rate /= 2
            if run(rate):
                good = rate
                break
            bad = rate
    if good is None or bad is None:
        return
    for _ in range(bisections):
        middle = (good + bad) / 2
        if run(middle):
            good = middle
        else:
            bad = middle


def best_rate(probes: List[Probe]) -> Optional[float]:
    good = [p.rate for p in probes if p.sustainable]
    return max(good) if good else None
