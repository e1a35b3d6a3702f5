"""What a replica knows of one peer: how far it holds the peer's steps, whether the peer is done or
serves, how far the peer holds this replica's messages.

A replica keeps one :class:`PeerState` per peer (``Replica._peers``, by replica id). Messages of
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

from dataclasses import dataclass, field
from typing import Dict, Iterable, Mapping, Optional

import numpy as np


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
