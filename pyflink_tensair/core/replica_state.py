"""A replica's state in a checkpoint: the layout of :meth:`Replica.snapshot
<pyflink_tensair.core.replica.Replica.snapshot>`, its restore and what it re-sends then, and what
a rescaled replica takes over from the old replicas' states.

Across a restore (Flink restarts the job from a checkpoint, and the messages that were inside the
feedback loop are in no checkpoint) the protocol re-sends instead of logging (:class:`~.peers.PeerLog`):
nothing is applied twice, nothing is lost.

The functions take the replica (not imported here: the replica's module imports this one) and
read its parts. A snapshot is a flat dict of plain arrays, each part writing its own entries:

==========================  ==========================================================
``model/<name>``            the model's weights and optimizer slots
``counters/<name>``         one int64 each: the replica's (:mod:`.counters`), the update
                            rule's (``sync_done``, ``outgoing_first``, ``unattributed``)
                            and the mode controller's (``drift_epoch``, ``position``, ...)
``applied``, ``peer_*``,    per peer, in replica-id order (:class:`~.peers.PeerLog`),
``acked_by``, ``ahead/``,   and the gradient messages some peer has not acknowledged
``unacked/<step>``
``held/<i>``                the batches held while the bound stops the replica (records)
``outgoing``, ``sync/``     the update rule's: DASGD's unsent sum, synchronous SGD's
                            pending contributions (records)
``last_mode``, ``policy``   the mode controller's (:mod:`.auto_mode`)
``rescale/``, ``rescale_*`` a merge in progress, or the part a merged replica re-sends
``rows/``, ``notices_out``  id tables' rows and the notices to pass on
==========================  ==========================================================

Counters are read by name: a counter a snapshot lacks keeps its default, a name this release does
not know is ignored. A snapshot of a release before 0.2.0 (its counters one positional array) is
refused with a message that says so.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, Mapping, Tuple

import numpy as np

from ..errors import ProtocolError
from . import wire
from .counters import ReplicaCounters, refuse_positional_counters, snapshot_counters
from .events import Broadcast
from .messages import DoneMessage

State = Dict[str, np.ndarray]


def snapshot(replica) -> State:
    """Everything ``replica`` needs to resume (see the module docstring)."""
    state = {f"model/{k}": np.array(v) for k, v in replica.model.get_state().items()}
    state.update(replica.counts.snapshot())
    state.update((f"counters/{name}", np.array(value, np.int64)) for name, value in replica.rule.counters().items())
    state.update(replica.modes.snapshot())
    state.update(replica.peers.snapshot(replica.sparse_values))
    for i, batch in enumerate(replica.held):
        state[f"held/{i:06d}"] = wire.as_uint8(wire.encode_batch(batch))
    state.update(replica.rule.snapshot())
    state.update(replica.rescale.snapshot())
    state.update(replica.rows.snapshot())
    return state


def restore(replica, state: Mapping[str, np.ndarray]) -> None:
    """Puts ``replica`` back where :func:`snapshot` found it."""
    refuse_positional_counters(state)
    replica.model.set_state(model_state(state))
    replica.counts = ReplicaCounters.from_snapshot(state)
    replica.rule.restore(state, snapshot_counters(state))
    replica.modes.restore(state)
    replica.peers.restore(state)
    replica.held = collections.deque(held_batches(state))
    replica.rescale.restore(replica.id, state)
    replica.rows.restore(state)


def resend(replica) -> list:
    """After :func:`restore`: a ``"restored"`` metrics record (where the replica resumes), then
    the messages some peer may not hold, oldest first: its rescale part, the gradient messages
    never acknowledged (:class:`~.peers.PeerLog`), its newest mode message (receivers keep only
    the newest: a repeat changes nothing) and its done marker if it was sent; and with model
    updates a snapshot of the restored version, so that servers catch up at once."""
    out: list = [replica.metrics_record("restored", None)]
    acks = replica.peers.acks(replica.rule.received_through)
    part = replica.rescale.to_resend()
    if part is not None:  # peers that hold it drop a repeat
        out.append(Broadcast(part))
    out += [Broadcast(message) for message in replica.peers.to_resend(acks)]
    if replica.modes.last_sent is not None:
        out.append(Broadcast(dataclasses.replace(replica.modes.last_sent, acks=acks)))
    if replica.counts.done_sent:
        out.append(Broadcast(DoneMessage(replica.id, replica.counts.local_step, acks)))
    replica.counts.messages_resent += len(out) - 1
    if replica.publisher is not None:
        replica.publisher.reset()
        replica.publish(out, force=True)
    return out


def take_over(replica, old_replicas: int, states: Mapping[int, Mapping[str, np.ndarray]]
              ) -> Tuple[Dict[int, State], Dict[int, int]]:
    """After a rescale: adds the old replicas' ``states`` (by old id) to ``replica`` (their held
    batches, totals, positions and id-table rows); returns their models and model versions, for
    the merge."""
    versions = {}
    for old in sorted(states):
        state = states[old]
        if "rescale/meta" in state or any(k.startswith("sync/") for k in state):
            raise ProtocolError(
                f"old replica {old}'s state was saved {'inside a merge of an earlier rescale' if 'rescale/meta' in state else 'by a synchronous replica'}"
                f": it cannot be merged. Resume with the replica count it was saved with ({old_replicas}) and "
                "rescale from a later checkpoint or savepoint")
        refuse_positional_counters(state)
        counters = snapshot_counters(state)
        replica.counts.add_totals(state)
        replica.modes.position = max(replica.modes.position, counters.get("position", -1))
        versions[old] = counters.get("model_version", 0)
        replica.held.extend(held_batches(state))
        replica.rows.adopt(state)
    return {old: model_state(state) for old, state in states.items()}, versions


def model_state(state: Mapping[str, np.ndarray]) -> State:
    return {k[len("model/"):]: v for k, v in state.items() if k.startswith("model/")}


def held_batches(state: Mapping[str, np.ndarray]):
    return (wire.decode_batch(state[k].tobytes()) for k in sorted(state) if k.startswith("held/"))
