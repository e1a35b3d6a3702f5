"""Backpressure from saturated replicas to the batch source, within one Python interpreter.

A replica waits for its peers' gradients on its second input, which the same task thread reads,
so it cannot stop taking batches on its first (a blocked callback would stop both; Flink's input
selection is refused for jobs with checkpoints, docs/reliability.md). Instead the replica's
function reports here whether its replica is saturated (a quarter of its held-batch buffer full while
the staleness bound stops it), and :class:`~.sources.PacedBatches` waits before it makes the
next batch while any replica is. In thread mode the batch source and the replicas of one
TaskManager share its interpreter, so this works on a local mini-cluster and for the replicas
that share the source's TaskManager; elsewhere nothing is reported and a full buffer trains its
oldest batch beyond the bound (``bound_overflows``), as before.

Example::

    >>> report("job", 0, True); saturated()
    True
    >>> report("job", 0, False); saturated()
    False
"""

from __future__ import annotations

import threading
import time
from typing import Set, Tuple

_LOCK = threading.Lock()
_SATURATED: Set[Tuple[str, int]] = set()


def report(owner: str, replica: int, is_saturated: bool) -> None:
    """Replica ``replica`` of ``owner`` (the TrainConfig's name) is, or is no longer, saturated."""
    with _LOCK:
        if is_saturated:
            _SATURATED.add((owner, replica))
        else:
            _SATURATED.discard((owner, replica))


def saturated() -> bool:
    return bool(_SATURATED)


def wait(max_s: float, poll_s: float = 0.002, sleep=time.sleep) -> float:
    """Waits while any replica is saturated, at most ``max_s`` seconds (a replica that never
    reports again must not stop the source for good); returns the seconds waited."""
    waited = 0.0
    while _SATURATED and waited < max_s:
        sleep(poll_s)
        waited += poll_s
    return waited
