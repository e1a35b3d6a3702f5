"""A replica count that changes across a restore: the new replicas merge the old ones' models
(pyflink_tensair.core.rescale), train the old ones' held batches once, and go on. In one process;
the cluster test (test_cluster.py) does it through savepoints."""

import collections
import contextlib
import json

import numpy as np
import pytest

from pyflink_tensair import ProtocolError
from pyflink_tensair.core import Broadcast, FinalModel, Metrics, Replica, wire
from pyflink_tensair.core.messages import RescaleMessage
from pyflink_tensair.core.rescale import Rescale
from pyflink_tensair.testing import LinearModel, make_regression_batches


def _replicas(n, bound=2):
    return [Replica(r, LinearModel(3, seed=r), replicas=n, staleness_bound=bound, broadcast_every=2, buffer_capacity=50)
            for r in range(n)]


class _Loop:
    """Replicas and the messages between them (through the wire format), delivered in send order."""

    def __init__(self, replicas):
        self.replicas = replicas
        self.pending = collections.deque()
        self.events = []

    def take(self, sender, events):
        for event in events:
            self.events.append(event)
            if isinstance(event, Broadcast):
                data = wire.encode_message(event.message)
                self.pending.extend((peer, data) for peer in range(len(self.replicas)) if peer != sender)

    def deliver(self):
        while self.pending:
            peer, data = self.pending.popleft()
            self.take(peer, self.replicas[peer].on_gradient(wire.decode_message(data)))

    def trained(self):
        return [e.batch_id for e in self.events if isinstance(e, Metrics) and e.phase == "batch"]


@contextlib.contextmanager
def _merges():
    """The model states set while it is open: a merge's (a replica trains its held batches right after)."""
    merged, real_set_state = [], LinearModel.set_state
    LinearModel.set_state = lambda model, state: (merged.append(state), real_set_state(model, state))[1]
    try:
        yield merged
    finally:
        LinearModel.set_state = real_set_state


def _first_run(batches, n=2):
    """``n`` replicas train ``batches`` with no message delivered: later batches wait behind the bound."""
    loop = _Loop(_replicas(n, bound=1))
    for i, batch in enumerate(batches):
        loop.take(i % n, loop.replicas[i % n].on_batch(batch))
    return loop


def _rescaled(snapshots, holders, n):
    """``n`` new replicas; new replica ``r`` adopts the old snapshots ``holders[r]`` lists."""
    loop = _Loop(_replicas(n))
    for r, replica in enumerate(loop.replicas):
        loop.take(r, replica.adopt(len(snapshots), {old: snapshots[old] for old in holders[r]}))
    return loop


@pytest.mark.parametrize("new_count, holders", [(3, [[0], [], [1]]), (1, [[0, 1, 2]])])
def test_new_replicas_start_from_the_old_replicas_average_and_train_each_batch_once(new_count, holders):
    old_count = sum(len(h) for h in holders)
    batches = make_regression_batches(24, 3, seed=3)
    first = _first_run(batches[:12], old_count)
    held = sum(r.held_batches for r in first.replicas)
    assert held > 0, "the first run must leave held batches to hand over"
    snapshots = [r.snapshot() for r in first.replicas]
    mean = {k: np.mean([s[f"model/{k}"] for s in snapshots], axis=0) for k in first.replicas[0].model.get_state()}
    newest = max(r.model_version for r in first.replicas)

    with _merges() as merged:
        second = _rescaled(snapshots, holders, new_count)
        second.deliver()  # the rescale messages: every replica merges
    assert len(merged) == new_count
    for state in merged:
        assert sorted(state) == sorted(mean)
        for name, value in mean.items():
            np.testing.assert_allclose(state[name], value, rtol=1e-12)
    assert all(replica.model_version >= newest for replica in second.replicas)
    for i, batch in enumerate(batches[12:]):
        second.take(i % new_count, second.replicas[i % new_count].on_batch(batch))
        second.deliver()
    for r, replica in enumerate(second.replicas):
        second.take(r, replica.on_input_end())
    second.deliver()

    assert sorted(first.trained() + second.trained()) == list(range(24))  # every batch once
    assert sorted(e.replica for e in second.events if isinstance(e, FinalModel)) == list(range(new_count))
    # the job's totals carry over: messages the old replicas sent are counted by their adopters
    sent_since = sum(1 for e in second.events if isinstance(e, Broadcast) and not isinstance(e.message, RescaleMessage))
    assert sum(r.messages_sent for r in second.replicas) == sum(r.messages_sent for r in first.replicas) + sent_since


def test_a_checkpoint_inside_one_replicas_merge_restores_and_every_merge_completes():
    """The loop's messages are in no checkpoint: one taken when replica 1 has merged and replica 0
    has not yet heard from it. After the restore replica 1 must send its part again, or replica 0
    waits for ever."""
    first = _first_run(make_regression_batches(8, 3, seed=4))
    snapshots = [r.snapshot() for r in first.replicas]
    with _merges() as merged:
        second = _rescaled(snapshots, [[0, 1], []], 2)
        peer, data = second.pending.popleft()  # replica 0's part reaches replica 1 ...
        second.take(peer, second.replicas[peer].on_gradient(wire.decode_message(data)))
        assert peer == 1 and not second.replicas[1].rescaling and second.replicas[0].rescaling
        checkpoint = [r.snapshot() for r in second.replicas]  # ... replica 1's part to 0 is in flight
    assert "rescale/meta" in checkpoint[0] and "rescale_sent" in checkpoint[1]
    restored = _Loop(_replicas(2))
    for r, replica in enumerate(restored.replicas):
        replica.restore(checkpoint[r])
    with _merges() as merged_again:
        for r, replica in enumerate(restored.replicas):
            restored.take(r, replica.resend())
        restored.deliver()
    assert not any(r.rescaling for r in restored.replicas)
    np.testing.assert_array_equal(merged_again[0]["weights/w"], merged[0]["weights/w"])  # the same bits
    # replica 1 keeps its part until replica 0 has sent it something from after its merge
    batches = make_regression_batches(4, 3, seed=6)
    for i, batch in enumerate(batches):
        restored.take(i % 2, restored.replicas[i % 2].on_batch(batch))
        restored.deliver()
    assert "rescale_sent" not in restored.replicas[1].snapshot()


def test_a_peers_messages_from_after_its_merge_wait_for_this_replicas_merge():
    snapshots = [r.snapshot() for r in _first_run(make_regression_batches(9, 3, seed=8), n=3).replicas]
    second = _rescaled(snapshots, [[0], [1], [2]], 3)
    parts = {(peer, wire.decode_message(data).sender): data for peer, data in second.pending}
    second.pending.clear()
    late = second.replicas[0]
    for sender in (1, 2):  # replicas 1 and 2 merge; replica 0 has only replica 1's part
        for other in (1, 2):
            if other != sender:
                second.take(other, second.replicas[other].on_gradient(wire.decode_message(parts[(other, sender)])))
        second.take(sender, second.replicas[sender].on_gradient(wire.decode_message(parts[(sender, 0)])))
    second.take(0, late.on_gradient(wire.decode_message(parts[(0, 1)])))
    second.pending.clear()
    batch = make_regression_batches(1, 3, seed=9)[0]
    events = second.replicas[1].on_batch(batch)  # trained on 1's merged model, its gradient sent to 0
    message = next(e.message for e in events if isinstance(e, Broadcast))
    second.take(0, late.on_gradient(message))
    assert late.rescaling and late.messages_applied == 0  # held until its own merge
    with _merges() as merged:
        second.take(0, late.on_gradient(wire.decode_message(parts[(0, 2)])))
    assert not late.rescaling and late.messages_applied == 1 and len(merged) == 1


def test_a_state_saved_inside_a_merge_or_by_a_synchronous_replica_is_not_merged_again():
    first = _first_run(make_regression_batches(8, 3, seed=4))
    merging = _rescaled([r.snapshot() for r in first.replicas], [[0, 1], []], 2).replicas[0].snapshot()
    with pytest.raises(ProtocolError, match="inside a merge of an earlier rescale"):
        _replicas(1)[0].adopt(2, {0: merging})
    sync = _Loop([Replica(r, LinearModel(3), replicas=2, staleness_bound=0) for r in range(2)])
    sync.take(0, sync.replicas[0].on_batch(make_regression_batches(1, 3)[0]))
    with pytest.raises(ProtocolError, match="by a synchronous replica"):
        _replicas(1)[0].adopt(2, {0: sync.replicas[0].snapshot()})


def test_batches_and_peer_messages_wait_for_the_merge():
    snapshots = [r.snapshot() for r in _first_run(make_regression_batches(6, 3, seed=5)).replicas]
    second = _rescaled(snapshots, [[0], [1]], 2)
    waiting = second.replicas[0]
    before = waiting.model.get_state()["weights/w"].copy()
    events = waiting.on_batch(make_regression_batches(1, 3, seed=9)[0])
    assert not [e for e in events if isinstance(e, Metrics) and e.phase == "batch"]  # held, not trained
    np.testing.assert_array_equal(waiting.model.get_state()["weights/w"], before)
    second.deliver()
    assert not waiting.rescaling and not waiting.held_batches


def test_a_merge_refuses_what_does_not_add_up():
    state = {"w": np.ones(2, np.float32)}
    a = Rescale.start(0, replicas=2, old_replicas=2, adopted={0: state})
    with pytest.raises(ProtocolError, match="adopted by replica 1 and by replica 0"):
        a.receive(RescaleMessage(1, 2, (0,), 0, state))
    with pytest.raises(ProtocolError, match="rescaled from 3"):
        a.receive(RescaleMessage(1, 3, (1,), 0, state))
    a.receive(RescaleMessage(1, 2, (), 0, {}))
    with pytest.raises(ProtocolError, match="adopted \\[0\\]: an old replica's state is missing"):
        a.merged()


@pytest.mark.flink
def test_the_operators_markers_are_records_of_the_wire_format():
    """ReplicaHooks.withMeta (Java) writes the adopt and open markers of a rescale: the bytes
    encode_record writes for the same meta."""
    pytest.importorskip("pyflink")
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway

    from pyflink_tensair.flink.environment import add_channel_jar

    add_channel_jar(StreamExecutionEnvironment.get_execution_environment())
    with_meta = get_gateway().jvm.pyflinktensair.checkpoint.ReplicaHooks.withMeta
    for kind, meta in ((wire.KIND_ADOPT, '{"old_replica":1,"old_replicas":3}'), (wire.KIND_OPEN, '{"old_replicas":12}'),
                       (wire.KIND_OPEN, '{"old_replicas":2}')):
        made = bytes(with_meta(wire.encode_marker(kind), meta))
        assert made == wire.encode_record(kind, json.loads(meta), {})


def test_rescale_messages_and_markers_cross_the_wire():
    message = RescaleMessage(2, 3, (0, 2), 17, {"w": np.arange(4, dtype=np.float32), "it": np.array(5)})
    back = wire.decode_message(wire.encode_message(message))
    assert (back.sender, back.old_replicas, back.covers, back.model_version) == (2, 3, (0, 2), 17)
    np.testing.assert_array_equal(back.state["w"], message.state["w"])
    assert wire.rescale_of(wire.encode_record(wire.KIND_ADOPT, {"old_replica": 1, "old_replicas": 2}, {})) == (1, 2)
    assert wire.rescale_of(wire.encode_record(wire.KIND_OPEN, {"old_replicas": 2}, {})) == (-1, 2)
    with pytest.raises(wire.WireFormatError, match="malformed adopt marker"):
        wire.rescale_of(wire.encode_record(wire.KIND_ADOPT, {"old_replica": 2, "old_replicas": 2}, {}))
    with pytest.raises(wire.WireFormatError, match="covers"):
        wire.decode_message(wire.encode_record(wire.KIND_RESCALE, {"sender": 0, "old_replicas": 2, "covers": [2],
                                                                   "model_version": 0, "order": "[]"}, {}))
