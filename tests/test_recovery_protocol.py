"""The replicas' protocol across a restore: snapshots, lost in-flight messages, re-sends.

A small scheduler stands in for Flink: batch ``i`` goes to replica ``i % N``; messages wait in
per-pair FIFO channels. At a checkpoint every replica is snapshotted (a consistent cut: what a
replica applied was sent before its sender's snapshot); at the failure the states go back to the
checkpoint, every message in the channels is lost, and the batches since the checkpoint are
replayed, as Flink's sources do. The protocol must neither lose a message nor apply one twice.
"""

import collections
import random

import numpy as np
import pytest

from pyflink_tensair import PeerUpdates, TrainConfig
from pyflink_tensair.core import Broadcast, FinalModel, GradientMessage, Replica, wire
from pyflink_tensair.testing import LinearModel, make_regression_batches


class Cluster:
    def __init__(self, config: TrainConfig, batches, seed: int):
        self.config, self.batches, self.n = config, batches, config.replicas
        self.replicas = [self._fresh(r) for r in range(self.n)]
        self.channels = {(s, r): collections.deque() for s in range(self.n) for r in range(self.n) if s != r}
        self.next_batch = 0
        self.rng = random.Random(seed)
        self.finals = {}
        self.checkpoint = None

    def _fresh(self, r):
        return Replica(r, LinearModel(3, seed=1), self.config)

    def route(self, sender, events):
        for event in events:
            if isinstance(event, Broadcast):
                data = wire.encode_message(event.message)  # through the wire, as in the job
                for receiver in range(self.n):
                    if receiver != sender:
                        self.channels[(sender, receiver)].append(data)
            elif isinstance(event, FinalModel):
                self.finals[sender] = event

    def step(self):
        """One move: a batch arrives or a channel delivers its oldest message (chosen at random)."""
        busy = [pair for pair, queue in self.channels.items() if queue]
        if self.next_batch < len(self.batches) and (not busy or self.rng.random() < 0.5):
            i = self.next_batch
            self.next_batch += 1
            self.route(i % self.n, self.replicas[i % self.n].on_batch(self.batches[i]))
            if self.next_batch == len(self.batches):
                for r, replica in enumerate(self.replicas):
                    self.route(r, replica.on_input_end())
            return True
        if not busy:
            return False
        sender, receiver = self.rng.choice(busy)
        message = wire.decode_message(self.channels[(sender, receiver)].popleft())
        self.route(receiver, self.replicas[receiver].on_gradient(message))
        return True

    def take_checkpoint(self):
        self.checkpoint = ([wire.encode_tensors(r.snapshot()) for r in self.replicas], self.next_batch)

    def fail_and_restore(self):
        states, position = self.checkpoint
        self.replicas = [self._fresh(r) for r in range(self.n)]
        for queue in self.channels.values():
            queue.clear()  # the loop's records are in no checkpoint
        self.finals = {}
        for replica, data in zip(self.replicas, states):
            replica.restore(wire.decode_tensors(data)[1])
        self.next_batch = position
        for r, replica in enumerate(self.replicas):
            self.route(r, replica.resend())

    def run(self, checkpoint_at=None, fail_at=None):
        moves = 0
        while self.step():
            moves += 1
            if moves == checkpoint_at:
                self.take_checkpoint()
            if moves == fail_at:
                self.fail_and_restore()
        return self


BATCHES = make_regression_batches(40, 3, seed=3)


@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("checkpoint_at,fail_at", [(10, 25), (30, 31), (1, 60)])
@pytest.mark.parametrize("updates", [PeerUpdates.tensair(), PeerUpdates(average_every=3)], ids=["tensair", "averaging"])
def test_dasgd_after_a_restore_trains_every_batch_once_and_applies_every_message_once(replicas, seed, checkpoint_at, fail_at,
                                                                                      updates):
    config = TrainConfig(replicas=replicas, staleness_bound=None, peer_updates=updates)
    cluster = Cluster(config, BATCHES, seed).run(checkpoint_at, fail_at)
    assert sorted(cluster.finals) == list(range(replicas))  # every replica finished: nothing lost
    steps = {r.id: r.local_step for r in cluster.replicas}
    assert sum(steps.values()) == len(BATCHES)  # each batch trained once by the final state
    for replica in cluster.replicas:
        peers_steps = sum(s for r, s in steps.items() if r != replica.id)
        assert replica.messages_applied == peers_steps  # each peer gradient applied exactly once
        if updates.plain:
            assert replica.model_version == replica.local_step + peers_steps
        else:  # each weights message mixed in counts as one more version
            assert replica.model_version > replica.local_step + peers_steps


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("checkpoint_at,fail_at", [(10, 25), (33, 34)])
def test_synchronous_replicas_after_a_restore_end_identical_to_an_undisturbed_run(seed, checkpoint_at, fail_at):
    config = TrainConfig(replicas=2, staleness_bound=0)
    undisturbed = Cluster(config, BATCHES, seed).run()
    restored = Cluster(config, BATCHES, seed + 10).run(checkpoint_at, fail_at)
    assert sorted(restored.finals) == [0, 1]
    for r in range(2):
        for name, value in undisturbed.finals[r].weights.items():
            np.testing.assert_array_equal(restored.finals[r].weights[name], value)
        assert restored.finals[r].model_version == undisturbed.finals[r].model_version


def test_a_restore_resends_exactly_the_messages_a_peer_had_not_acknowledged():
    config = TrainConfig(replicas=2, staleness_bound=None)
    r0, r1 = (Replica(r, LinearModel(3, seed=1), config) for r in range(2))
    sent0 = [e.message for b in BATCHES[:3] for e in r0.on_batch(b) if isinstance(e, Broadcast)]
    assert [m.step for m in sent0] == [1, 2, 3]
    r1.on_gradient(sent0[0])
    r1.on_gradient(sent0[1])
    ack = next(e.message for e in r1.on_batch(BATCHES[3]) if isinstance(e, Broadcast))
    assert ack.acks == (2, 0)  # r1 holds r0's messages through step 2
    r0.on_gradient(ack)
    restored = Replica(0, LinearModel(3, seed=1), config)
    restored.restore(wire.decode_tensors(wire.encode_tensors(r0.snapshot()))[1])
    events = restored.resend()
    assert events[0].phase == "restored" and events[0].local_step == 3
    resent = [e.message for e in events[1:]]
    assert [(m.sender, m.step) for m in resent] == [(0, 3)]
    assert isinstance(resent[0], GradientMessage) and resent[0].acks == (0, 1)
    np.testing.assert_array_equal(resent[0].gradients["w"], sent0[2].gradients["w"])
    assert restored.messages_resent == 1
    # the peer drops a repeat of what it already applied
    r1.on_gradient(sent0[1])
    assert r1.duplicates_dropped == 1
