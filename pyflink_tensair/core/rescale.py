"""A job resumed with another replica count: the new replicas merge the old ones' models.

Flink hands each old replica's keyed state to the new subtask that now holds its key group (the
replica operator sends an adopt marker under each such old key, then the open marker with the
old count). A new replica therefore holds the state of some old replicas, maybe none. It sums
their models (:func:`partial_state`) and sends that sum to every peer in a
:class:`~pyflink_tensair.core.messages.RescaleMessage`, its first message; once it holds one from
every peer it sets its model to the average of all old replicas' (:meth:`Rescale.merged`), summed
in sender order so that every new replica computes the same bits. Until then it holds its batches
and its peers' later messages.

Averaged: float arrays, weights and optimizer slots alike. Integer arrays (an optimizer's step
count) take their maximum, as does the model version: the model goes on from the newest version
any old replica reached, so servers and exports see versions grow.

What else carries over is the :class:`~pyflink_tensair.core.replica.Replica`'s to decide (its
``adopt``): the old replicas' held batches go to the replica that adopted them, and their counts
add up there. A replica that has merged keeps its own message and sends it again after a restore
until every peer has sent it something from after that peer's merge: the loop's messages are in
no checkpoint, so a restore can bring one replica back merged and its peer not.

Example (three old replicas' models into two new replicas)::

    >>> olds = {r: {"w": np.full(2, float(r), np.float32), "it": np.array(r + 1)} for r in range(3)}
    >>> a = Rescale.start(0, replicas=2, old_replicas=3, adopted={0: olds[0], 2: olds[2]})
    >>> b = Rescale.start(1, replicas=2, old_replicas=3, adopted={1: olds[1]})
    >>> a.receive(b.own), a.complete
    (True, True)
    >>> merged, version = a.merged(); merged["w"], merged["it"]
    (array([1., 1.], dtype=float32), array(3))
"""

from __future__ import annotations

import json
from typing import Dict, List, Mapping, Optional

import numpy as np

from ..errors import ProtocolError
from . import wire
from .messages import PeerMessage, RescaleMessage

State = Dict[str, np.ndarray]


def partial_state(states: Mapping[int, Mapping[str, np.ndarray]]) -> State:
    """The float arrays of ``states`` (old replica id -> model state) summed in id order, the
    other arrays' maximum; ``{}`` for no states."""
    merged: State = {}
    names = {frozenset(state) for state in states.values()}
    if len(names) > 1:
        raise ProtocolError(f"the old replicas' models name different arrays: {sorted(map(sorted, names))!r:.300}")
    for old in sorted(states):
        for name, value in states[old].items():
            value = np.asarray(value)
            if name not in merged:
                merged[name] = value.astype(np.float64) if _averaged(value) else value.copy()
            elif merged[name].shape != value.shape:
                raise ProtocolError(f"old replica {old}'s {name!r} has shape {value.shape}, another's {merged[name].shape}")
            elif _averaged(value):
                merged[name] += value
            else:
                merged[name] = np.asarray(np.maximum(merged[name], value))
    return {name: value.astype(np.asarray(states[min(states)][name]).dtype, copy=False) for name, value in merged.items()}


def _averaged(value: np.ndarray) -> bool:
    return np.issubdtype(value.dtype, np.floating)


class Rescale:
    """One new replica's part in the merge (see the module docstring): its own sum (``own``,
    sent to every peer) and the peers' sums as they arrive. ``early`` holds the peers' other
    messages that came before the merge (a peer that merged first trains at once); the replica
    handles them once the model is merged. They are not part of :meth:`snapshot`: unapplied,
    they are unacknowledged, so their senders send them again after a restore."""

    def __init__(self, replica_id: int, replicas: int, old_replicas: int, parts: Dict[int, RescaleMessage]):
        self.replica_id = replica_id
        self.replicas = replicas
        self.old_replicas = old_replicas
        self.parts = parts
        self.early: List[PeerMessage] = []

    @classmethod
    def start(cls, replica_id: int, replicas: int, old_replicas: int, adopted: Mapping[int, State],
              model_versions: Optional[Mapping[int, int]] = None) -> "Rescale":
        """Replica ``replica_id`` of ``replicas`` has adopted ``adopted`` (old replica id -> its
        model state) of ``old_replicas``; ``model_versions``: their model versions."""
        if old_replicas < 1 or any(not 0 <= old < old_replicas for old in adopted):
            raise ProtocolError(f"adopted old replicas {sorted(adopted)} of {old_replicas}")
        versions = model_versions or {}
        own = RescaleMessage(replica_id, old_replicas, tuple(sorted(adopted)),
                             max((int(versions.get(old, 0)) for old in adopted), default=0), partial_state(adopted))
        return cls(replica_id, replicas, old_replicas, {replica_id: own})

    @property
    def own(self) -> RescaleMessage:
        return self.parts[self.replica_id]

    @property
    def complete(self) -> bool:
        return len(self.parts) == self.replicas

    def receive(self, message: RescaleMessage) -> bool:
        """Takes a peer's sum; ``False`` for a repeat (a peer sends its own again after a restore)."""
        if message.sender in self.parts:
            return False
        if not 0 <= message.sender < self.replicas or message.old_replicas != self.old_replicas:
            raise ProtocolError(f"replica {self.replica_id} of {self.replicas}, rescaled from {self.old_replicas}, "
                                f"received a rescale message from replica {message.sender} of a job rescaled from "
                                f"{message.old_replicas}")
        taken = {old: part.sender for part in self.parts.values() for old in part.covers}
        twice = sorted(old for old in message.covers if old in taken)
        if twice:
            raise ProtocolError(f"old replicas {twice} were adopted by replica {message.sender} and by replica "
                                f"{taken[twice[0]]}: their key groups went to two subtasks")
        self.parts[message.sender] = message
        return True

    def merged(self):
        """``(model state, model version)``: the average of every old replica's model (integer
        arrays: their maximum) and the newest version among them. Needs :attr:`complete`."""
        if not self.complete:
            raise ProtocolError(f"replica {self.replica_id} merges before every peer's rescale message is in")
        covered = sorted(old for part in self.parts.values() for old in part.covers)
        if covered != list(range(self.old_replicas)):
            raise ProtocolError(f"the checkpoint held {self.old_replicas} replicas, the new replicas adopted "
                                f"{covered}: an old replica's state is missing")
        parts = [self.parts[sender] for sender in sorted(self.parts)]
        sums = partial_state({i: part.state for i, part in enumerate(parts) if part.state})
        merged = {name: (np.asarray(value, np.float64) / self.old_replicas).astype(value.dtype) if _averaged(value) else value
                  for name, value in sums.items()}
        return merged, max(part.model_version for part in parts)

    # ------------------------------------------------------------------ state

    def snapshot(self) -> State:
        """The merge in progress, as flat arrays (``rescale/...``): a checkpoint may fall inside it."""
        meta = {"replicas": self.replicas, "old_replicas": self.old_replicas,
                "parts": {str(s): {"covers": list(p.covers), "model_version": p.model_version, "order": list(p.state)}
                          for s, p in self.parts.items()}}
        state = {"rescale/meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
        for sender, part in self.parts.items():
            state.update((f"rescale/{sender:04d}/{name}", value) for name, value in part.state.items())
        return state

    @classmethod
    def restore(cls, replica_id: int, state: Mapping[str, np.ndarray]) -> Optional["Rescale"]:
        """The merge a :meth:`snapshot` in ``state`` holds, or ``None``."""
        if "rescale/meta" not in state:
            return None
        meta = json.loads(np.asarray(state["rescale/meta"]).tobytes().decode())
        parts = {int(s): RescaleMessage(int(s), meta["old_replicas"], tuple(p["covers"]), p["model_version"],
                                        {name: state[f"rescale/{int(s):04d}/{name}"] for name in p["order"]})
                 for s, p in meta["parts"].items()}
        return cls(replica_id, meta["replicas"], meta["old_replicas"], parts)


class RescaleState:
    """One replica's side of a rescale: the merge in progress (``merging``), then, once merged, its
    own part (``sent``), sent again after a restore until every peer has sent it a message from
    after that peer's own merge (a restore may bring a peer back mid-merge)."""

    def __init__(self):
        self.merging: Optional[Rescale] = None
        self.sent: Optional[RescaleMessage] = None
        self.heard: set = set()

    def to_resend(self) -> Optional[RescaleMessage]:
        """The part to send again after a restore (peers that hold it drop the repeat)."""
        return self.merging.own if self.merging is not None else self.sent

    def hear(self, sender: int, peers: int) -> None:
        """A peer's message other than its part: it has merged."""
        if self.sent is not None:
            self.heard.add(sender)
            if len(self.heard) == peers:
                self.sent, self.heard = None, set()

    def finish(self, replicas: int) -> Rescale:
        """The merge is complete: returns it and keeps its own part (with peers) until they are heard."""
        done, self.merging = self.merging, None
        assert done is not None
        if replicas > 1:
            self.sent, self.heard = done.own, set()
        return done

    def snapshot(self) -> State:
        state = self.merging.snapshot() if self.merging is not None else {}
        if self.sent is not None:
            state["rescale_sent"] = wire.as_uint8(wire.encode_message(self.sent))
            state["rescale_heard"] = np.array(sorted(self.heard), np.int64)
        return state

    def restore(self, replica_id: int, state: Mapping[str, np.ndarray]) -> None:
        self.merging = Rescale.restore(replica_id, state)
        self.sent = wire.decode_message(state["rescale_sent"].tobytes()) if "rescale_sent" in state else None  # type: ignore[assignment]
        self.heard = {int(p) for p in state.get("rescale_heard", [])}
