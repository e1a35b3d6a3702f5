"""Who runs a replica's callbacks: the host's own thread, or a trainer thread that owns the replica.

A Flink Python function runs inside a bundle: while it trains, its task thread waits and reads no
input, and while the task thread moves the next batch into Python, the model idles. A
:class:`TrainerThread` takes the model work off the host's thread, so the two overlap::

    host thread (Flink callbacks)                  trainer thread (owns the Replica)
    put_batch(b)  ─► work queue (FIFO, bounded) ──┐
    put_message(m) ─► message queue (FIFO) ───────┼─► messages first, then work: replica.on_*(...)
    put_end()     ─► work queue ──────────────────┘        │
    take()  ◄──────────────── outbox (events, in the order the replica returned them) ◄┘

Peer messages jump ahead of queued batches: a replica sees them as if they had arrived earlier,
an order the channel could have delivered too, so the staleness bound keeps its meaning (a batch
is still trained only once the replica has applied what the bound requires). Batches stay in
arrival order, and so do the messages of one sender. ``put_batch`` blocks while
``max_waiting_batches`` batches wait unstarted: that is the host's backpressure, and it only ever
waits for computation, never for input, so it cannot deadlock the loop.

:class:`InlineTrainer` has the same interface and runs each callback at once on the host's thread
(how the replica ran before; ``TrainConfig.trainer_thread`` chooses).

Example::

    >>> import numpy as np
    >>> from pyflink_tensair.core.messages import Batch
    >>> from pyflink_tensair.core.replica import Replica
    >>> from pyflink_tensair.testing import LinearModel
    >>> trainer = TrainerThread(Replica(0, LinearModel(3, seed=0)))
    >>> trainer.put_batch(Batch(np.ones((4, 3), np.float32), np.ones(4, np.float32)))
    >>> trainer.wait_idle()
    >>> [type(e).__name__ for e in trainer.take()]
    ['Prediction', 'Metrics']
    >>> trainer.close()
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Callable, Deque, List, Optional

from .events import Event
from ..errors import ConfigError, TrainerFailed  # noqa: F401 (TrainerFailed: raised here, imported from here too)
from .messages import Batch, PeerMessage
from .replica import Replica

_END = object()


class InlineTrainer:
    """Runs every callback on the caller's thread, before the call returns."""

    def __init__(self, replica: Replica):
        self.replica = replica
        self._outbox: List[Event] = []

    @property
    def busy(self) -> bool:
        return False

    idle_s = None  # the host's thread is the trainer: its idle time is the host's

    def expected_remaining_s(self) -> float:
        return 0.0

    def put_batch(self, batch: Batch) -> None:
        self._outbox += self.replica.on_batch(batch)

    def put_message(self, message: PeerMessage) -> None:
        self._outbox += self.replica.on_gradient(message)

    def put_end(self) -> None:
        self._outbox += self.replica.on_input_end()

    def call(self, function: Callable[[Replica], List[Event]]) -> None:
        self._outbox += function(self.replica)

    def take(self) -> List[Event]:
        out, self._outbox = self._outbox, []
        return out

    def wait_idle(self, timeout: Optional[float] = None) -> None:
        pass

    def close(self) -> None:
        pass


class TrainerThread:
    """See the module docstring. ``max_waiting_batches``: batches queued unstarted before
    ``put_batch`` blocks (one keeps the next batch ready while the current one trains)."""

    def __init__(self, replica: Replica, *, max_waiting_batches: int = 1, name: Optional[str] = None):
        if not isinstance(max_waiting_batches, int) or max_waiting_batches < 1:
            raise ConfigError(f"max_waiting_batches must be an int >= 1. Received: {max_waiting_batches!r}")
        self.replica = replica
        self._max_waiting = max_waiting_batches
        self._lock = threading.Condition()
        self._messages: Deque[PeerMessage] = collections.deque()
        self._work: Deque[object] = collections.deque()  # batches, callables, _END
        self._waiting_batches = 0
        self._working = False
        self._closing = False
        self._error: Optional[BaseException] = None
        self._outbox: List[Event] = []
        self._item_s = 0.0  # moving average of one item's duration
        self.idle_s = 0.0  # time the trainer waited for work, from its first item on
        self._thread = threading.Thread(target=self._run, name=name or f"tensair-trainer-{replica.id}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the host's side

    @property
    def busy(self) -> bool:
        """Whether work is queued or running (its events are not all in the outbox yet)."""
        with self._lock:
            return self._working or bool(self._messages or self._work)

    def expected_remaining_s(self) -> float:
        """A guess of how long the queued and running work still takes (for a flush timer)."""
        with self._lock:
            return self._item_s * (len(self._messages) + len(self._work) + self._working)

    def put_batch(self, batch: Batch) -> None:
        with self._lock:
            while self._waiting_batches >= self._max_waiting and self._error is None and not self._closing:
                self._lock.wait()
            self._check()
            self._work.append(batch)
            self._waiting_batches += 1
            self._lock.notify_all()

    def put_message(self, message: PeerMessage) -> None:
        self._put(self._messages, message)

    def put_end(self) -> None:
        self._put(self._work, _END)

    def call(self, function: Callable[[Replica], List[Event]]) -> None:
        """Runs ``function(replica)`` on the trainer thread, in order with the batches; the events
        it returns go to the outbox."""
        self._put(self._work, function)

    def take(self) -> List[Event]:
        """The events ready so far, in order; raises :class:`TrainerFailed` if the trainer did."""
        with self._lock:
            self._check()
            out, self._outbox = self._outbox, []
            return out

    def wait_idle(self, timeout: Optional[float] = None) -> None:
        """Blocks until everything queued so far has run (or ``timeout`` seconds passed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while (self._working or self._messages or self._work) and self._error is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                self._lock.wait(left)
            self._check()

    def close(self) -> None:
        """Stops the thread once the running item is done (queued work is dropped)."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _put(self, queue: Deque, item) -> None:
        with self._lock:
            self._check()
            queue.append(item)
            self._lock.notify_all()

    def _check(self) -> None:
        if self._error is not None:
            raise TrainerFailed(f"replica {self.replica.id}'s trainer thread failed: {self._error!r}") from self._error
        if self._closing:
            raise TrainerFailed(f"replica {self.replica.id}'s trainer thread is closed")

    # ------------------------------------------------------------------ the trainer's side

    def _run(self) -> None:
        started_once = False
        while True:
            with self._lock:
                waited = time.perf_counter()
                while not (self._messages or self._work or self._closing):
                    self._lock.wait()
                if started_once:
                    self.idle_s += time.perf_counter() - waited
                if self._closing:
                    return
                if self._messages:
                    item = self._messages.popleft()
                else:
                    item = self._work.popleft()
                    if isinstance(item, Batch):
                        self._waiting_batches -= 1
                self._working = True
                self._lock.notify_all()  # a batch slot may have freed
            began = time.perf_counter()
            try:
                events = self._apply(item)
            except BaseException as err:  # reported to the host at its next call
                with self._lock:
                    self._error = err
                    self._working = False
                    self._lock.notify_all()
                return
            took = time.perf_counter() - began
            started_once = True
            with self._lock:
                self._outbox += events
                self._working = False
                self._item_s = took if self._item_s == 0 else 0.8 * self._item_s + 0.2 * took
                self._lock.notify_all()

    def _apply(self, item) -> List[Event]:
        if isinstance(item, Batch):
            return self.replica.on_batch(item)
        if item is _END:
            return self.replica.on_input_end()
        if callable(item):
            return list(item(self.replica))
        return self.replica.on_gradient(item)
