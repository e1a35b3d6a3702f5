"""Training modes of the replicas: train, serve, auto (converge, serve, resume on drift), in process."""

import dataclasses
import json

import numpy as np
import pytest

from pyflink_tensair.config import AutoSettings, Mode, TrainConfig
from pyflink_tensair.core import wire
from pyflink_tensair.core.events import Broadcast, ModeChange
from pyflink_tensair.core.messages import GradientMessage, ModeMessage, WeightsMessage
from pyflink_tensair.core.replica import Replica
from pyflink_tensair.core.simulation import simulate
from pyflink_tensair.errors import ConfigError, WireFormatError
from pyflink_tensair.testing import LinearModel, make_regression_batches

AUTO = AutoSettings(window=10, tolerance=0.05)


def _concepts(*lengths):
    """Batches of one linear target per length (a new target each time), ids in stream order."""
    batches = []
    for seed, length in enumerate(lengths):
        batches += [dataclasses.replace(b, meta={"id": len(batches) + i})
                    for i, b in enumerate(make_regression_batches(length, 4, seed=seed))]
    return batches


@pytest.mark.parametrize("bound", [None, 2])
def test_auto_replicas_converge_serve_and_train_again_after_a_drift(bound):
    batches = _concepts(300, 300)
    config = TrainConfig(replicas=2, staleness_bound=bound, mode="auto", auto=AUTO)
    result = simulate(lambda r: LinearModel(4, seed=0), batches, config, delivery_delay=2)
    assert sorted(p.batch_id for p in result.predictions) == list(range(600))  # every batch predicted
    for replica in (0, 1):
        changes = [c for c in result.mode_changes if c.replica == replica]
        assert [(c.training, c.reason) for c in changes] == [(False, "converged"), (True, "drift"), (False, "converged")]
        converged, drift, again = changes
        assert converged.batch_id < 300 <= drift.batch_id < 310 < again.batch_id
        assert drift.statistics["window"] > 0 and "t_critical" in drift.statistics
        own = result.replicas[replica]
        assert own.modes.last_drift == drift  # what the last_drift_* gauges read
        statistic, threshold = own.modes.policy.last_drift.test_statistic()
        assert statistic > threshold > 0 and (statistic, threshold) in {
            (drift.statistics["t"], drift.statistics["t_critical"]), (drift.statistics["f"], drift.statistics["f_critical"])}
    batch_records = [m for m in result.metrics if m.phase == "batch"]
    trained = [m for m in batch_records if m.trained]
    assert len(batch_records) == 600 and 0.1 < len(trained) / 600 < 0.5
    assert all(m.bound_overflows == 0 for m in batch_records)
    if bound is not None:  # the bound holds among the replicas that train
        assert max(m.staleness for m in trained) <= bound
    late = [p.loss for p in result.predictions if p.batch_id >= 550]
    assert np.mean(late) < 0.01  # the second target is learnt


class _AppliesWhileServing(Replica):
    """The rule before issue 24 part 5: a serving replica applied its peers' gradients and weights."""

    serving = property(lambda self: False)


def _served_model_versions(metrics, replica):
    """Per serving phase of ``replica`` (a run of its batches predicted without training, in
    stream order), the model versions its predictions were made with."""
    phases, current = [], []
    for m in sorted((m for m in metrics if m.phase == "batch" and m.replica == replica), key=lambda m: m.batch_id):
        if m.trained is False:
            current.append(m.model_version)
        elif current:
            phases, current = phases + [current], []
    return phases + ([current] if current else [])


def test_a_serving_replica_keeps_its_model_and_counts_a_peers_gradients_as_received():
    replica = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    batches = _concepts(120)
    for batch in batches[:100]:
        replica.on_batch(batch)
    assert replica.serving and not replica.training
    weights, version, applied = replica.model.get_weights(), replica.model_version, replica.messages_applied
    peer = LinearModel(4, seed=1)
    gradient = peer.compute_gradients(batches[100]).gradients
    replica.on_gradient(GradientMessage(1, 1, 1, gradient))
    replica.on_gradient(WeightsMessage(1, 1, peer.get_weights()))
    assert all(np.array_equal(replica.model.get_weights()[k], weights[k]) for k in weights)
    assert (replica.model_version, replica.messages_applied, replica.messages_while_serving) == (version, applied, 2)
    assert replica.on_batch(batches[100])[-1].model_version == version
    # received all the same: acknowledged, and a repeat is a duplicate
    assert replica.rule.received_through(1) == 1 and replica.peers[1].weights_step == 1
    replica.on_gradient(GradientMessage(1, 1, 1, gradient))
    assert replica.duplicates_dropped == 1 and replica.messages_while_serving == 2
    # training again after a drift: peers' gradients are applied again
    replica.on_gradient(ModeMessage(sender=1, step=1, sequence=1, training=True, reason="drift", origin=1, epoch=1))
    assert replica.training and not replica.serving
    replica.on_gradient(GradientMessage(1, 2, 2, gradient))
    assert (replica.model_version, replica.messages_applied, replica.messages_while_serving) == (version + 1, applied + 1, 2)
    assert not np.array_equal(replica.model.get_weights()["w"], weights["w"])
    # the count survives a restore
    copy = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    copy.restore(replica.snapshot())
    assert copy.messages_while_serving == 2


def test_a_lagging_peers_gradients_no_longer_raise_a_serving_replicas_loss_into_a_false_alarm():
    # docs/use_cases.md, the drift demo: a replica converged ahead of its peer, which still trained
    # far behind (29 steps in Flink); applied, the peer's gradients moved the serving model away
    # from the concept until OPTWIN fired, before any drift. Here the peer's weights stay where it started.
    batches, lagging = _concepts(300), LinearModel(4, seed=1)
    fixed = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    old = _AppliesWhileServing(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    changes = {fixed: [], old: []}
    for replica in changes:
        for batch in batches[:100]:
            replica.on_batch(batch)
        assert not replica.training
    version = fixed.model_version
    for step, batch in enumerate(batches[100:], start=1):
        message = GradientMessage(1, step, step, lagging.compute_gradients(batch).gradients)
        for replica, seen in changes.items():
            seen += [e for e in replica.on_gradient(message) + replica.on_batch(batch) if isinstance(e, ModeChange)]
    assert [c.reason for c in changes[old]][:1] == ["drift"]  # the old rule: a false alarm on one concept
    assert changes[fixed] == [] and fixed.serving and fixed.model_version == version
    assert fixed.messages_while_serving == 200 and fixed._acks()[1] == 200


@pytest.mark.parametrize("bound", [None, 2])
def test_in_simulation_every_serving_phase_predicts_with_one_model(bound):
    # a slow loop (delay 10): peers' gradients and weights (averaging every 8) reach a replica that serves
    batches = _concepts(300, 300)
    config = TrainConfig(replicas=2, staleness_bound=bound, mode="auto", auto=AUTO)
    result = simulate(lambda r: LinearModel(4, seed=0), batches, config, delivery_delay=10)
    for replica in result.replicas:
        phases = _served_model_versions(result.metrics, replica.id)
        assert len(phases) >= 2 and all(len(set(versions)) == 1 for versions in phases), phases
    assert sum(r.messages_while_serving for r in result.replicas) > 0
    drifts = [c.batch_id for c in result.mode_changes if c.reason == "drift"]
    assert drifts and all(300 <= d < 310 for d in drifts), drifts


def test_a_rise_while_training_restarts_the_convergence_test():
    # a drift nobody served through: the loss falls, jumps (8, 4) and settles at a level equal, by
    # chance, to the mean of the window that straddles the jump (docs/use_cases.md: 3 of 5 demo
    # runs). Window 15: OPTWIN tests from 30 values on, the watch's 2 * window
    falling = [0.5 * 0.93 ** i for i in range(45)]  # a third lower every window: not converged
    level = (sum(falling[-13:]) + 8.0 + 4.0) / 15
    losses = falling + [8.0, 4.0] + [level] * 60

    def converged_at(policy):
        return [i for i, loss in enumerate(losses) if policy.observe(loss) == "converged"]

    blind = AutoSettings(window=15, tolerance=0.01).policy()
    blind.watch.update = lambda loss: False  # the rule before: no watch on the training losses
    assert converged_at(blind) == [61]  # the two windows straddle the jump: equal means
    policy = AutoSettings(window=15, tolerance=0.01).policy()
    assert converged_at(policy) == [76] and policy.rises == 1  # 2 * window batches after the rise
    assert policy.detector.drifts == 0 and policy.drifts == 0  # not a drift: nothing reported
    copy = type(policy).restore(json.loads(json.dumps(policy.snapshot())))
    assert copy.snapshot() == policy.snapshot()
    older = policy.snapshot()
    for key in ("rises", "watch", "watched"):  # a snapshot from before the watch restores too
        del older[key]
    assert type(policy).restore(older).rises == 0


def test_a_serving_replica_follows_a_peers_drift_notice_once_and_tells_the_others():
    replica = Replica(0, LinearModel(4, seed=0), replicas=3, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in _concepts(100):
        replica.on_batch(batch)
    assert not replica.training
    notice = ModeMessage(sender=2, step=40, sequence=2, training=True, reason="drift", origin=2, epoch=1)
    out = replica.on_gradient(notice)
    change = next(e for e in out if isinstance(e, ModeChange))
    sent = [e.message for e in out if isinstance(e, Broadcast)]
    assert replica.training and (change.reason, change.origin, change.training) == ("peer_drift", 2, True)
    assert [(m.training, m.reason, m.origin, m.epoch) for m in sent] == [(True, "peer_drift", 2, 1)]
    assert replica.on_gradient(notice) == []  # a repeat changes nothing
    newer = ModeMessage(sender=1, step=41, sequence=1, training=True, reason="peer_drift", origin=2, epoch=1)
    assert not [e for e in replica.on_gradient(newer) if isinstance(e, (Broadcast, ModeChange))]  # the same drift


def test_a_replica_behind_in_the_stream_follows_a_peers_drift_where_its_own_input_reaches_it():
    # the drift demo (docs/use_cases.md): the replica ahead found the drift at its batch 601 while
    # this one served batch 540; training at once, it learnt the new labelling on old-concept batches
    batches = _concepts(150, 100)
    replica = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in batches[:100]:
        replica.on_batch(batch)
    assert replica.serving
    notice = ModeMessage(sender=1, step=80, sequence=2, training=True, reason="drift", origin=1, epoch=1, drift_at=150)
    assert not [e for e in replica.on_gradient(notice) if isinstance(e, (Broadcast, ModeChange))]
    served = replica.batches_served
    for batch in batches[100:150]:  # the old concept still: served, the model fixed
        assert not [e for e in replica.on_batch(batch) if isinstance(e, ModeChange)]
    assert replica.serving and replica.batches_served == served + 50
    # the pending notice is Flink state: a restore here keeps it
    copy = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    copy.restore(replica.snapshot())
    for r in (replica, copy):
        out = r.on_batch(batches[150])
        change = next(e for e in out if isinstance(e, ModeChange))
        sent = [e.message for e in out if isinstance(e, Broadcast) and isinstance(e.message, ModeMessage)]
        assert (change.reason, change.origin, change.batch_id, change.training) == ("peer_drift", 1, 150, True)
        assert [(m.reason, m.epoch, m.drift_at) for m in sent] == [("peer_drift", 1, 150)]
        assert r.training and r.local_step == replica.local_step  # batch 150 was trained on


def test_a_drift_found_before_a_peers_position_for_it_is_the_same_drift():
    batches = _concepts(100, 100)
    replica = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in batches[:100]:
        replica.on_batch(batch)
    replica.on_gradient(ModeMessage(sender=1, step=80, sequence=2, training=True, reason="drift", origin=1, epoch=1,
                                    drift_at=10 ** 6))  # ids this replica never reaches: its own detector decides
    changes = [e for b in batches[100:] for e in replica.on_batch(b) if isinstance(e, ModeChange)]
    assert changes[0].reason == "drift" and 100 <= changes[0].batch_id < 110
    assert replica.modes.drift_epoch == 1 and replica.modes.pending_drift == -1


def test_a_peers_drift_notice_without_a_position_is_followed_at_once():
    replica = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in _concepts(100):
        replica.on_batch(batch)
    out = replica.on_gradient(ModeMessage(sender=1, step=80, sequence=2, training=True, reason="drift", origin=1, epoch=1))
    assert replica.training and [e.reason for e in out if isinstance(e, ModeChange)] == ["peer_drift"]
    assert wire.decode_message(wire.encode_message(ModeMessage(1, 2, 3, True, "drift", 1, 1, (0, 2), drift_at=99))).drift_at == 99


def test_a_drift_notice_lost_across_a_restore_is_made_good_by_the_next_mode_message():
    replica = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in _concepts(100):
        replica.on_batch(batch)
    assert not replica.training
    # the peer's drift notice (epoch 1) was lost; its next message, a convergence, knows of the drift
    out = replica.on_gradient(ModeMessage(sender=1, step=60, sequence=3, training=False, reason="converged", origin=1, epoch=1))
    assert replica.training and [e.reason for e in out if isinstance(e, ModeChange)] == ["peer_drift"]


def test_a_peers_drift_notice_while_training_restarts_the_convergence_test():
    replica = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    batches = _concepts(200)
    for batch in batches[:15]:
        replica.on_batch(batch)
    assert replica.training and len(replica.modes.policy.recent) == 15
    out = replica.on_gradient(ModeMessage(sender=1, step=5, sequence=2, training=True, reason="drift", origin=1, epoch=1))
    assert replica.training and not out and len(replica.modes.policy.recent) == 0


def test_nothing_is_sent_after_the_done_marker():
    replica = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in _concepts(100):
        replica.on_batch(batch)
    replica.on_input_end()
    assert replica.done_sent and not replica.training
    out = replica.on_gradient(ModeMessage(sender=1, step=60, sequence=2, training=True, reason="drift", origin=1, epoch=1))
    assert not [e for e in out if isinstance(e, (Broadcast, ModeChange))]


def test_a_bounded_replica_does_not_wait_for_a_peer_that_serves():
    replica = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=1, mode=Mode.AUTO, auto=AUTO)
    batches = _concepts(20)
    replica.on_batch(batches[0])
    replica.on_batch(batches[1])
    replica.on_batch(batches[2])
    assert replica.held_batches == 1  # step 3 waits for peer 1's step 1
    replica.on_gradient(ModeMessage(sender=1, step=0, sequence=1, training=False, reason="converged", origin=1))
    assert replica.held_batches == 0 and replica.local_step == 3  # peer 1 serves: nothing to wait for
    for batch in batches[3:]:
        replica.on_batch(batch)
    assert replica.local_step == 20 and replica.bound_overflows == 0
    replica.on_gradient(ModeMessage(sender=1, step=0, sequence=2, training=True, reason="drift", origin=1, epoch=1))
    for batch in _concepts(23)[20:]:  # training again, counted from here: 2 steps ahead of it, then wait
        replica.on_batch(batch)
    assert replica.local_step == 22 and replica.held_batches == 1 and replica.bound_overflows == 0


def test_serve_predicts_every_batch_and_changes_no_weight():
    batches = _concepts(40)
    result = simulate(lambda r: LinearModel(4, seed=0), batches, TrainConfig(replicas=2, mode="serve"))
    start = LinearModel(4, seed=0).get_weights()
    assert len(result.predictions) == 40 and not result.mode_changes
    assert all(m.trained is False for m in result.metrics if m.phase == "batch")
    for model in result.final_models.values():
        assert all(np.array_equal(model.weights[k], start[k]) for k in start)


def test_train_batches_say_trained_and_the_old_mode_names_are_refused():
    result = simulate(lambda r: LinearModel(4, seed=0), _concepts(20), TrainConfig(replicas=2, mode="train"))
    assert all(m.trained for m in result.metrics if m.phase == "batch") and not result.mode_changes
    for old in ("always", "never"):
        with pytest.raises(ConfigError, match=f"mode must be one of 'train', 'serve', 'auto'. Received: mode='{old}'"):
            TrainConfig(mode=old)


def test_an_auto_replica_restored_while_serving_serves_and_re_sends_its_mode():
    batches = _concepts(150, 50)
    replica = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in batches[:150]:
        replica.on_batch(batch)
    assert not replica.training
    state = replica.snapshot()
    copy = Replica(0, LinearModel(4, seed=0), replicas=2, staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    copy.restore({k: np.array(v) for k, v in state.items()})
    assert not copy.training and copy.modes.policy.snapshot() == replica.modes.policy.snapshot()
    resent = [e.message for e in copy.resend() if isinstance(e, Broadcast)]
    assert [(m.training, m.reason) for m in resent if isinstance(m, ModeMessage)] == [(False, "converged")]
    later = [[type(e).__name__ for e in r.on_batch(b)] for r in (replica, copy) for b in batches[150:152]]
    assert later[:2] == later[2:]
    assert replica.batches_served == copy.batches_served


def test_mode_messages_round_trip_the_wire_and_bad_ones_are_refused():
    message = ModeMessage(sender=1, step=7, sequence=3, training=False, reason="converged", origin=1, acks=(2, 0))
    assert wire.decode_message(wire.encode_message(message)) == message
    bad = wire.encode_record(wire.KIND_MODE, {"sender": 1, "step": 7, "sequence": 3, "training": "no",
                                              "reason": "converged", "origin": 1}, {})
    with pytest.raises(WireFormatError, match="training"):
        wire.decode_message(bad)
    bad = wire.encode_record(wire.KIND_MODE, {"sender": 1, "step": 7, "sequence": 3, "training": True,
                                              "reason": "bored", "origin": 1}, {})
    with pytest.raises(WireFormatError, match="reason"):
        wire.decode_message(bad)
    assert not isinstance(wire.decode_message(wire.encode_message(message)), GradientMessage)


def test_mode_changes_are_json_records():
    change = ModeChange(1, 2.5, 30, 12, True, "drift", 1, {"t": 4.0})
    assert ModeChange.from_json(change.to_json()) == change and json.loads(change.to_json())["reason"] == "drift"


@pytest.mark.parametrize("kwargs,field", [
    ({"mode": "auto", "staleness_bound": 0}, "staleness_bound"), ({"mode": "sometimes"}, "mode"),
    ({"auto": AutoSettings(window=5), "mode": "auto", "staleness_bound": None}, None),
])
def test_auto_mode_configuration(kwargs, field):
    if field is None:
        assert TrainConfig(**kwargs).mode is Mode.AUTO
        return
    with pytest.raises(ConfigError, match=field):
        TrainConfig(**kwargs)


@pytest.mark.parametrize("kwargs,field", [({"window": 0}, "window"), ({"tolerance": -0.1}, "tolerance"),
                                          ({"detector": "adwin"}, "detector"), ({"detector_parameters": [1]}, "detector_parameters"),
                                          ({"detector_parameters": {"rigor": -1}}, "rigor")])
def test_auto_settings_are_checked_on_construction(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        AutoSettings(**kwargs)
