"""The one deadline loop: poll a condition until it holds or the time is up.

Example::

    >>> calls = iter([None, 0, "up"])
    >>> wait_until(lambda: next(calls), timeout_s=1, interval_s=0.01, what="the service")
    'up'
    >>> wait_until(lambda: False, timeout_s=0.02, interval_s=0.01, what="the service")
    Traceback (most recent call last):
    ...
    pyflink_tensair.errors.WaitTimeout: waited 0.02 s for the service
"""

from __future__ import annotations

import time
from typing import Callable, Optional, TypeVar

from .errors import WaitTimeout  # noqa: F401 (raised here, imported from here by callers)

T = TypeVar("T")


def wait_until(condition: Callable[[], Optional[T]], timeout_s: float, *, interval_s: float = 0.2,
               what: str = "the condition") -> T:
    """Calls ``condition()`` every ``interval_s`` seconds until it returns a truthy value, and
    returns that value; raises :class:`WaitTimeout` (``"waited <timeout_s> s for <what>"``) once
    ``timeout_s`` seconds (``time.monotonic``) have passed without one. The condition is called
    at least once, and once more after the last sleep; what it raises goes through."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"waited {timeout_s:g} s for {what}")
        time.sleep(interval_s)
