"""When a replica in ``auto`` mode trains and when it only serves: converged, drift, resume.

The policy sees the prequential loss of every batch (measured before the batch is trained on)
and is in one of two phases::

    TRAINING --converged--> SERVING --drift (own detector, or a peer's)--> TRAINING

- **Converged**: at least ``2 * window`` batches trained since training (re)started (or since a
  peer's drift notice, or since the loss last rose), and the mean loss of the last ``window``
  batches is within ``tolerance`` (relative) of the mean of the ``window`` before them: it neither
  falls nor rises any more; and the newest half of that window is not above the window's mean by
  more than ``tolerance``, so that a spike at its end, which can bring a falling window's mean level
  with the one before, is not taken for a level (a drift demo replica "converged" so at loss 1.1,
  then raised a false alarm).
- **A rise while training**: a second detector of the same kind (``watch``) watches the training
  losses; when it finds a rise (the stream changed while nobody served, so nobody detected a
  drift), the convergence test starts afresh. Nothing is sent or reported (``rises`` counts them):
  the replica trains on either way. Without it, two windows straddling the jump could have equal
  means by chance (the older: near zero, then the spike; the newer: the new, high level), and a
  replica "converged" at a high loss right after a drift (``docs/use_cases.md``: three of five
  runs of the drift demo). Every ``window`` batches the watch starts again from the convergence
  test's ``2 * window`` losses: over a whole training phase OPTWIN's older half holds the
  learning's fall, and a jump from 0.05 to 15 left the newer half's mean below it (read as
  learning). OPTWIN tests from 30 values on (``min_window``), so with its defaults the watch
  needs ``window >= 15``.
- **Drift**: while serving, every batch's loss goes to the drift detector (OPTWIN by default); a
  detection, or a peer's drift notice, starts training again. The detector starts afresh each time
  serving starts (training losses fall, and a falling loss is not what it watches), from the last
  ``window`` training losses: the converged level, so a drift right after converging is a rise.

The policy is pure and its whole state is a JSON-serialisable dict (``snapshot()``), detector
included, so it survives a checkpoint with the replica that holds it.

Example (a loss that settles at 1.0, then jumps to 3.0)::

    >>> policy = AutoPolicy(window=10, tolerance=0.05)
    >>> events = [policy.observe(loss) for loss in [5.0, 3.0, 2.0, 1.5, 1.2] + [1.0] * 30]
    >>> events.index("converged"), policy.training
    (23, False)
    >>> [i for i, loss in enumerate([1.0] * 40 + [3.0] * 10) if policy.observe(loss) == "drift"]
    [40]
    >>> policy.training, policy.drifts
    (True, 1)
"""

from __future__ import annotations

import collections
from typing import Deque, Optional

from ..validation import require_int
from . import detector as detectors
from .detector import Drift


class AutoPolicy:
    """See the module. ``detector`` and ``detector_parameters`` choose the drift detector
    (:func:`pyflink_tensair.drift.make`)."""

    def __init__(self, *, window: int = 50, tolerance: float = 0.01, detector: str = "optwin",
                 detector_parameters: Optional[dict] = None):
        require_int("window", window, minimum=1)
        detectors.require_number("tolerance", tolerance, low=0.0, high=1.0, high_open=True)
        self.window, self.tolerance = int(window), float(tolerance)  # int: the snapshot is JSON
        self.detector_kind, self.detector_parameters = detector, dict(detector_parameters or {})
        self.detector = detectors.make(detector, **self.detector_parameters)
        self.watch = detectors.make(detector, **self.detector_parameters)  # the training losses, for a rise
        self.training = True
        self.recent: Deque[float] = collections.deque(maxlen=2 * self.window)
        self.convergences = 0
        self.drifts = 0  # own detections
        self.peer_drifts = 0  # notices from peers that restarted training here
        self.rises = 0  # rises of the loss while training: each restarted the convergence test
        self._watched = 0  # training losses since the watch was last primed
        self.last_drift: Optional[Drift] = None

    def observe(self, loss: Optional[float]) -> Optional[str]:
        """The next batch's prequential loss; returns ``"converged"``, ``"drift"`` or ``None``.
        ``None`` losses (a batch without labels) change nothing."""
        if loss is None:
            return None
        if self.training:
            if self.watch.update(loss):  # the losses before the rise say nothing of the level after it
                self.rises += 1
                self.recent.clear()
                self._watched = 0
            self.recent.append(float(loss))
            self._watched += 1
            if self._watched >= self.window:  # the watch compares with the convergence test's losses only
                self._watched = 0
                self.watch.reset()
                self.watch.prime(self.recent)
            if self._converged():
                self.training = False
                self.convergences += 1
                self.detector.reset()
                self.detector.prime(list(self.recent)[self.window:])  # the converged level: a drift right after is a rise
                return "converged"
            return None
        if self.detector.update(loss):
            self.drifts += 1
            self.last_drift = self.detector.last_drift
            self._resume()
            return "drift"
        return None

    def on_peer_drift(self) -> bool:
        """A peer detected a drift: train again (while training: start the convergence test
        afresh, the losses before the drift say nothing of the new data). ``True`` if this
        changed the phase."""
        if self.training:
            self.recent.clear()
            self.watch.reset()
            self._watched = 0
            return False
        self.peer_drifts += 1
        self._resume()
        return True

    def _resume(self) -> None:
        self.training = True
        self.recent.clear()
        self.watch.reset()
        self._watched = 0

    def _converged(self) -> bool:
        if len(self.recent) < 2 * self.window:
            return False
        values = list(self.recent)
        older = sum(values[:self.window]) / self.window
        newer = sum(values[self.window:]) / self.window
        half = self.window // 2
        newest = sum(values[-half:]) / half if half else newer
        # and not rising inside the newer window: a spike at its end can bring its mean level
        # with a higher, older window's
        return abs(newer - older) <= self.tolerance * abs(older) and newest <= newer * (1 + self.tolerance)

    def snapshot(self) -> dict:
        return {"window": self.window, "tolerance": self.tolerance, "detector_kind": self.detector_kind,
                "detector_parameters": self.detector_parameters, "training": self.training,
                "recent": list(self.recent), "convergences": self.convergences, "drifts": self.drifts,
                "peer_drifts": self.peer_drifts, "last_drift": self.last_drift.to_dict() if self.last_drift else None,
                "detector": self.detector.snapshot(), "rises": self.rises, "watch": self.watch.snapshot(),
                "watched": self._watched}

    @classmethod
    def restore(cls, state: dict) -> "AutoPolicy":
        policy = cls(window=state["window"], tolerance=state["tolerance"], detector=state["detector_kind"],
                     detector_parameters=state["detector_parameters"])
        policy.training = bool(state["training"])
        policy.recent.extend(float(v) for v in state["recent"])
        policy.convergences, policy.drifts, policy.peer_drifts = state["convergences"], state["drifts"], state["peer_drifts"]
        policy.last_drift = Drift(**state["last_drift"]) if state["last_drift"] else None
        policy.detector = detectors.restore(state["detector"])
        policy.rises = state.get("rises", 0)  # absent from older snapshots: a fresh watch
        if "watch" in state:
            policy.watch, policy._watched = detectors.restore(state["watch"]), state["watched"]
        return policy
