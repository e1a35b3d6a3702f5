"""Pacing numbered batches at a rate: a stream replayed as a live one."""

from __future__ import annotations

import time
from typing import Dict, Optional, Union


class Pacer:
    """Paces numbered batches at ``rate`` per second (0: unpaced): batch ``n`` goes out no earlier
    than ``start + n / rate``, ``start`` taken from the first batch this process sees (after a
    restore: paced from then on). :meth:`meta` waits until the batch is due and returns its
    ``{"id": n, "scheduled_at": due}``.

    Example::

        >>> Pacer(0).meta(7)
        {'id': 7}
    """

    def __init__(self, rate: float):
        self.rate = float(rate)
        self._start: Optional[float] = None

    def meta(self, number: int, position: Optional[float] = None) -> dict:
        """``position``: where the batch falls in the paced sequence (default: ``number``)."""
        meta: Dict[str, Union[int, float]] = {"id": int(number)}
        if self.rate > 0:
            at = number if position is None else position
            if self._start is None:
                self._start = time.time() - at / self.rate
            due = self._start + at / self.rate
            wait = due - time.time()  # read the clock once: a second read may be past due
            if wait > 0:
                time.sleep(wait)
            meta["scheduled_at"] = due
        return meta
