"""Training modes of the replicas: always, never, auto (converge, serve, resume on drift), in process."""

import dataclasses
import json

import numpy as np
import pytest

from pyflink_tensair.config import AutoSettings, Mode, TrainConfig
from pyflink_tensair.core import wire
from pyflink_tensair.core.events import Broadcast, ModeChange
from pyflink_tensair.core.messages import GradientMessage, ModeMessage
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
        assert own.last_drift == drift  # what the last_drift_* gauges read
        statistic, threshold = own.policy.last_drift.test_statistic()
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


def test_a_serving_replica_follows_a_peers_drift_notice_once_and_tells_the_others():
    replica = Replica(0, 3, LinearModel(4, seed=0), staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
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


def test_a_drift_notice_lost_across_a_restore_is_made_good_by_the_next_mode_message():
    replica = Replica(0, 2, LinearModel(4, seed=0), staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in _concepts(100):
        replica.on_batch(batch)
    assert not replica.training
    # the peer's drift notice (epoch 1) was lost; its next message, a convergence, knows of the drift
    out = replica.on_gradient(ModeMessage(sender=1, step=60, sequence=3, training=False, reason="converged", origin=1, epoch=1))
    assert replica.training and [e.reason for e in out if isinstance(e, ModeChange)] == ["peer_drift"]


def test_a_peers_drift_notice_while_training_restarts_the_convergence_test():
    replica = Replica(0, 2, LinearModel(4, seed=0), staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    batches = _concepts(200)
    for batch in batches[:15]:
        replica.on_batch(batch)
    assert replica.training and len(replica.policy.recent) == 15
    out = replica.on_gradient(ModeMessage(sender=1, step=5, sequence=2, training=True, reason="drift", origin=1, epoch=1))
    assert replica.training and not out and len(replica.policy.recent) == 0


def test_nothing_is_sent_after_the_done_marker():
    replica = Replica(0, 2, LinearModel(4, seed=0), staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in _concepts(100):
        replica.on_batch(batch)
    replica.on_input_end()
    assert replica.done_sent and not replica.training
    out = replica.on_gradient(ModeMessage(sender=1, step=60, sequence=2, training=True, reason="drift", origin=1, epoch=1))
    assert not [e for e in out if isinstance(e, (Broadcast, ModeChange))]


def test_a_bounded_replica_does_not_wait_for_a_peer_that_serves():
    replica = Replica(0, 2, LinearModel(4, seed=0), staleness_bound=1, mode=Mode.AUTO, auto=AUTO)
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


def test_never_predicts_every_batch_and_changes_no_weight():
    batches = _concepts(40)
    result = simulate(lambda r: LinearModel(4, seed=0), batches, TrainConfig(replicas=2, mode="never"))
    start = LinearModel(4, seed=0).get_weights()
    assert len(result.predictions) == 40 and not result.mode_changes
    assert all(m.trained is False for m in result.metrics if m.phase == "batch")
    for model in result.final_models.values():
        assert all(np.array_equal(model.weights[k], start[k]) for k in start)


def test_always_is_train_and_its_batches_say_trained():
    result = simulate(lambda r: LinearModel(4, seed=0), _concepts(20), TrainConfig(replicas=2, mode="always"))
    assert all(m.trained for m in result.metrics if m.phase == "batch") and not result.mode_changes


def test_an_auto_replica_restored_while_serving_serves_and_re_sends_its_mode():
    batches = _concepts(150, 50)
    replica = Replica(0, 2, LinearModel(4, seed=0), staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    for batch in batches[:150]:
        replica.on_batch(batch)
    assert not replica.training
    state = replica.snapshot()
    copy = Replica(0, 2, LinearModel(4, seed=0), staleness_bound=None, mode=Mode.AUTO, auto=AUTO)
    copy.restore({k: np.array(v) for k, v in state.items()})
    assert not copy.training and copy.policy.snapshot() == replica.policy.snapshot()
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
