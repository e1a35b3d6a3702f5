"""What a replica knows of its peers: how far it holds each peer's steps, whether the peer is done
or serves, how far the peer holds this replica's messages, and the messages it keeps for them.

A replica keeps one :class:`PeerState` per peer in its :class:`PeerLog` (by replica id). Messages of
one sender arrive in order (its channel is FIFO), but one may be missing: refused (counted as
received) or never readable. A message that comes after such a gap is applied and kept in
``ahead`` until the gap is filled; ``applied`` is the step through which every message of the peer
is held, the step the staleness bound and the acknowledgements count.

Example::

    >>> peer = PeerState()
    >>> peer.mark_applied(3, 4)  # steps 3 .. 4 came before 1 .. 2
    >>> peer.applied, peer.ahead, peer.holds(3, 4)
    (0, {3: 4}, True)
    >>> peer.mark_applied(1, 2)  # the gap is filled: everything through step 4 is held
    >>> peer.applied, peer.ahead, peer.progress()
    (4, {}, 4)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from . import wire
from .messages import GradientMessage, PeerMessage


@dataclass
class PeerState:
    """One peer, as one replica sees it (the replica's own counters and model are elsewhere)."""

    applied: int = 0  # every message of the peer through this step is applied (or counted as received)
    ahead: Dict[int, int] = field(default_factory=dict)  # first -> last step of messages held beyond a gap
    final: Optional[int] = None  # its last step, once its done marker came
    acked: int = 0  # how far the peer holds this replica's messages (its acks)
    mode_sequence: int = 0  # the newest mode message seen from it (Mode.AUTO)
    paused: bool = False  # whether it serves (Mode.AUTO)
    offset: int = 0  # the steps this replica took while the peer served
    weights_step: int = 0  # the step of the newest weights message mixed in

    def progress(self) -> int:
        """The peer's step as the staleness bound counts it: applied, plus the steps it did not
        take while it served (it resumes level with this replica)."""
        return self.applied + self.offset

    def mark_applied(self, first: int, last: int) -> None:
        """Steps ``first .. last`` (one message) are applied or counted as received."""
        self.ahead[first] = last
        while self.applied + 1 in self.ahead:  # absorb every message that is now contiguous
            self.applied = self.ahead.pop(self.applied + 1)

    def holds(self, first: int, last: int) -> bool:
        """Whether the message of steps ``first .. last`` is applied already (a repeat)."""
        return last <= self.applied or first in self.ahead

    def skip_to(self, step: int) -> None:
        """Counts every step through ``step`` as received (the peer is done at ``step``: what is
        still missing could not be read and will not come)."""
        if self.applied < step:
            self.applied = step
            self.ahead.clear()

    def resume(self, local_step: int) -> None:
        """The peer trains again after serving: from now on it counts from this replica's
        ``local_step`` (the steps it did not take while it served are made up)."""
        self.offset = max(self.offset, local_step - self.applied)


# The per-peer entries of a replica's snapshot: one int64 per replica id, in id order (the
# replica's own entry is a 0, a -1 for ``peer_final``). Their names and layout are those of
# every release so far.
_PER_PEER = (("applied", "applied"), ("peer_final", "final"), ("acked_by", "acked"), ("peer_mode", "mode_sequence"),
             ("peer_paused", "paused"), ("peer_offset", "offset"), ("peer_weights", "weights_step"))


def peer_arrays(peers: Mapping[int, PeerState], replicas: int) -> Dict[str, np.ndarray]:
    """The per-peer entries of a snapshot (``applied``, ``peer_final``, ``acked_by``,
    ``peer_mode``, ``peer_paused``, ``peer_offset``, ``peer_weights``; ``ahead/<peer>`` apart:
    :func:`ahead_arrays`).

    >>> arrays = peer_arrays({1: PeerState(applied=3, final=5)}, 2)
    >>> arrays["applied"].tolist(), arrays["peer_final"].tolist()
    ([0, 3], [-1, 5])
    """
    def value(peer: Optional[PeerState], attribute: str) -> int:
        if peer is None:
            return -1 if attribute == "final" else 0
        found = getattr(peer, attribute)
        return -1 if found is None else int(found)

    return {key: np.array([value(peers.get(p), attribute) for p in range(replicas)], np.int64)
            for key, attribute in _PER_PEER}


def ahead_arrays(peers: Mapping[int, PeerState]) -> Dict[str, np.ndarray]:
    """``ahead/<peer>``: the ``(first, last)`` rows of the messages a peer has beyond a gap."""
    return {f"ahead/{p}": np.array(sorted(peer.ahead.items()), np.int64) for p, peer in peers.items() if peer.ahead}


def restore_peers(state: Mapping[str, np.ndarray], peer_ids: Iterable[int], replicas: int) -> Dict[int, PeerState]:
    """The peers ``peer_ids`` of ``replicas`` from a snapshot (:func:`peer_arrays`,
    :func:`ahead_arrays`). ``applied`` and ``peer_final`` are in every snapshot; the other
    entries, absent from older ones, are zeros.

    >>> state = peer_arrays({1: PeerState(applied=3, paused=True)}, 2)
    >>> restore_peers({"applied": state["applied"], "peer_final": state["peer_final"]}, [1], 2)
    {1: PeerState(applied=3, ahead={}, final=None, acked=0, mode_sequence=0, paused=False, offset=0, weights_step=0)}
    """
    peers = {p: PeerState() for p in peer_ids}
    for key, attribute in _PER_PEER:
        values = state.get(key, np.zeros(replicas, np.int64))
        for p, peer in peers.items():
            if attribute == "final":
                peer.final = None if values[p] < 0 else int(values[p])
            else:
                setattr(peer, attribute, bool(values[p]) if attribute == "paused" else int(values[p]))
    for key in (k for k in state if k.startswith("ahead/")):
        known = peers.get(int(key.split("/")[1]))
        if known is not None:
            known.ahead = {int(a): int(b) for a, b in state[key]}
    return peers


class PeerLog:
    """One replica's peers and the gradient messages it keeps for them.

    Across a restore (Flink restarts the job from a checkpoint, and the messages that were inside
    the feedback loop are in no checkpoint) the protocol re-sends instead of logging: every message
    carries ``acks``, how far the sender's state holds each peer's messages; a replica keeps the
    messages it sent until every peer has acknowledged them (part of its snapshot) and sends them
    again after a restore. Receivers drop the repeats by ``(sender, step)``. A message a restored
    replica does not count as sent was sent after its snapshot, so no restored peer can have
    applied it: nothing is applied twice, nothing is lost.

    Example::

        >>> log = PeerLog(0, 2)
        >>> log.keep(GradientMessage(0, 1, 1, {}))
        >>> log.note_acks(GradientMessage(1, 1, 1, {}, acks=(1, 0))); len(log.unacked)
        0
    """

    def __init__(self, own_id: int, replicas: int):
        self.own_id, self.replicas = own_id, replicas
        self.peers: Dict[int, PeerState] = {p: PeerState() for p in range(replicas) if p != own_id}
        self.unacked: Dict[int, GradientMessage] = {}  # step -> a message some peer has not acknowledged

    def __getitem__(self, peer: int) -> PeerState:
        return self.peers[peer]

    def __len__(self) -> int:
        return len(self.peers)

    def states(self):
        return self.peers.values()

    def acks(self, received_through: Callable[[int], int]) -> Tuple[int, ...]:
        """What this replica's next message acknowledges: how far it holds each peer's messages."""
        return tuple(0 if r == self.own_id else received_through(r) for r in range(self.replicas))

    def keep(self, message: GradientMessage) -> None:
        """A gradient message sent: kept until every peer has acknowledged it."""
        self.unacked[message.step] = message

    def note_acks(self, message: PeerMessage) -> None:
        """A peer's message says how far it holds this replica's: what every peer holds is dropped."""
        if len(message.acks) != self.replicas:
            return  # a sender that acknowledges nothing (e.g. an older one): keep what it has not confirmed
        peer = self.peers[message.sender]
        peer.acked = max(peer.acked, message.acks[self.own_id])
        confirmed = min(p.acked for p in self.peers.values())
        for step in [s for s in self.unacked if s <= confirmed]:
            del self.unacked[step]

    def to_resend(self, acks: Tuple[int, ...]) -> List[GradientMessage]:
        """The kept messages, oldest first, with today's acknowledgements."""
        return [dataclasses.replace(self.unacked[step], acks=acks) for step in sorted(self.unacked)]

    def snapshot(self, sparse_values: str) -> Dict[str, np.ndarray]:
        state = peer_arrays(self.peers, self.replicas)
        state.update(ahead_arrays(self.peers))
        for step, message in self.unacked.items():
            state[f"unacked/{step:012d}"] = wire.as_uint8(wire.encode_message(message, sparse_values))
        return state

    def restore(self, state: Mapping[str, np.ndarray]) -> None:
        self.peers = restore_peers(state, self.peers, self.replicas)
        self.unacked = {}
        for key in sorted(k for k in state if k.startswith("unacked/")):
            message = wire.decode_message(state[key].tobytes())
            self.unacked[message.step] = message  # type: ignore[assignment]
