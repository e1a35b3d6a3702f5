"""Whether a replica trains: its mode, and in ``Mode.AUTO`` the drift protocol among the replicas.

``Mode.TRAIN`` trains every batch, ``Mode.SERVE`` none; in ``Mode.AUTO`` the replica's
:class:`~pyflink_tensair.drift.AutoPolicy` decides::

    TRAINING --loss converged: ModeMessage(training=False) to peers--> SERVING
    SERVING --own drift, or a peer's drift ModeMessage: ModeMessage(training=True)--> TRAINING

**A serving replica's model is fixed**: peer gradients and weights that reach it are received
(acknowledged, counted in ``messages_while_serving`` and for the staleness bound) but not
applied, so that its detector tests a fixed model's loss on the stream; a model that changes under
the detector makes every change look like a drift (docs/use_cases.md, the drift demo).

Every mode message carries the sender's drift ``epoch`` (the drifts it knows of): a replica that
knows fewer trains again, so a notice lost across a restore is made good by the next one. It also
carries where the drift was found (``drift_at``, a batch id): replicas read the stream at
different positions, and a peer's notice takes effect where this replica's input reaches that
position (:meth:`ModeController.reach`), not when it arrives; a replica that trained at once
learnt the new concept on the old one's batches. Batches without growing ids leave a replica to
its own detector.

Example::

    >>> from pyflink_tensair.config import Mode
    >>> ModeController(Mode.TRAIN, None).training, ModeController(Mode.SERVE, None).training
    (True, False)
"""

from __future__ import annotations

import json
from typing import Dict, Optional, Tuple

import numpy as np

from ..config import Mode
from ..drift.policy import AutoPolicy
from . import wire
from .counters import PREFIX, snapshot_counters
from .events import ModeChange
from .messages import ModeMessage
from .peers import PeerState

# the controller's numbers in a replica's snapshot (counters/<name>), as every release wrote them
_COUNTERS = ("mode_sequence", "drift_epoch", "drift_at", "pending_drift", "pending_origin", "position")


class ModeController:
    """One replica's mode (see the module docstring). ``policy``: the AUTO policy, else ``None``."""

    def __init__(self, mode: Mode, policy: Optional[AutoPolicy]):
        self.mode = mode
        self.policy = policy
        self.mode_sequence = 0  # this replica's mode changes
        self.drift_epoch = 0  # drifts this replica knows of, its own and its peers'
        self.drift_at = -1  # the stream position (batch id) of the newest of them, -1: unknown
        self.pending_drift = -1  # a peer's drift this replica's input has not reached: its position
        self.pending_origin = -1  # the replica that found it
        self.position = -1  # the highest batch id this replica has trained or predicted
        self.last_sent: Optional[ModeMessage] = None  # the newest mode change sent: re-sent after a restore
        self.last_drift: Optional[ModeChange] = None  # this replica's own last drift, for the gauges

    @property
    def training(self) -> bool:
        """Whether the next batch is trained on (``False``: predicted only)."""
        if self.mode is Mode.SERVE:
            return False
        return self.policy.training if self.policy is not None else True

    @property
    def serving(self) -> bool:
        """In ``Mode.AUTO``, whether the replica serves (its model is then fixed)."""
        return self.policy is not None and not self.policy.training

    def reach(self, batch_id: int) -> Optional[int]:
        """The replica's input is at ``batch_id``: the origin of a peer's drift that takes effect
        now (the replica then trains again), else ``None``."""
        self.position = max(self.position, batch_id)
        if 0 <= self.pending_drift <= batch_id:
            self.pending_drift = -1
            if self.policy is not None and self.policy.on_peer_drift():
                return self.pending_origin
        return None

    def observe_served(self, loss: Optional[float], batch_id: int) -> Optional[Dict[str, float]]:
        """A served batch's loss: the detector's statistics when it found a drift (the replica
        then trains again), else ``None``."""
        if self.policy is None or self.policy.observe(loss) != "drift":
            return None
        if self.pending_drift >= 0:  # found here before the input reached a peer's position for it: the same drift
            self.pending_drift = -1
        else:
            self.drift_epoch += 1
        self.drift_at = batch_id
        return dict(self.policy.last_drift.statistics)

    def observe_trained(self, loss: Optional[float]) -> bool:
        """A trained batch's loss: whether the policy found the loss converged (the replica then serves)."""
        return self.policy is not None and self.policy.observe(loss) == "converged"

    def message(self, sender: int, local_step: int, reason: str, origin: int) -> ModeMessage:
        """The mode message that tells peers of the phase the policy is now in."""
        self.mode_sequence += 1
        return ModeMessage(sender, local_step, self.mode_sequence, self.training, reason, origin, self.drift_epoch,
                           drift_at=self.drift_at)

    def on_peer_mode(self, message: ModeMessage, peer: PeerState, local_step: int) -> Tuple[bool, int]:
        """A peer's mode message: ``(True, origin)`` when this replica follows its drift now."""
        if message.sequence <= peer.mode_sequence:
            return False, -1  # a repeat (re-sent after a restore): only the newest counts
        peer.mode_sequence = message.sequence
        if peer.paused and message.training:  # it resumes level with this replica
            peer.resume(local_step)
        peer.paused = not message.training
        if message.epoch <= self.drift_epoch:
            return False, -1
        self.drift_epoch, self.drift_at = message.epoch, message.drift_at
        if self.policy is None:
            return False, -1
        if message.drift_at > self.position:  # this replica's input is still before it: follow it there
            if self.pending_drift < 0:
                self.pending_drift, self.pending_origin = message.drift_at, message.origin
            return False, -1
        return self.policy.on_peer_drift(), message.origin

    def snapshot(self) -> Dict[str, np.ndarray]:
        state = {PREFIX + name: np.array(getattr(self, name), np.int64) for name in _COUNTERS}
        if self.last_sent is not None:
            state["last_mode"] = wire.as_uint8(wire.encode_message(self.last_sent))
        if self.policy is not None:
            state["policy"] = wire.as_uint8(json.dumps(self.policy.snapshot(), separators=(",", ":")).encode())
        return state

    def restore(self, state) -> None:
        counters = snapshot_counters(state)
        for name in _COUNTERS:
            if name in counters:
                setattr(self, name, counters[name])
        self.last_sent = wire.decode_message(state["last_mode"].tobytes()) if "last_mode" in state else None  # type: ignore[assignment]
        if self.policy is not None and "policy" in state:
            self.policy = AutoPolicy.restore(json.loads(state["policy"].tobytes().decode()))
