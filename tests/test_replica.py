"""The replica state machine: golden steps, the staleness bound, duplicates, end of input, state."""

import numpy as np
import pytest

from pyflink_tensair import ConfigError, Mode, PeerUpdates, ProtocolError, TrainConfig
from pyflink_tensair.core import (Batch, Broadcast, DoneMessage, FinalModel, GradientMessage, Metrics, Prediction, Replica,
                                  StepResult)
from pyflink_tensair.core import wire
from pyflink_tensair.core.messages import WeightsMessage
from pyflink_tensair.testing import LinearModel, make_regression_batches, simulate


def _model(w, b=0.0, **kwargs):
    model = LinearModel(len(w), **kwargs)
    model.weights = {"w": np.array(w, np.float64), "b": np.array([b])}
    return model


def test_one_step_matches_hand_computation():
    replica = Replica(0, _model([0.5, -0.5], learning_rate=0.05, momentum=0.5))
    events = replica.on_batch(Batch(x=np.array([[1.0, 2.0]]), y=np.array([1.0]), meta={"id": 4}))
    prediction = next(e for e in events if isinstance(e, Prediction))
    # pred = 0.5 - 1.0 = -0.5; err = -1.5; grad w = 2 * x * err = [-3, -6]; grad b = -3
    assert prediction.predictions.tolist() == [-0.5] and prediction.loss == pytest.approx(2.25)
    assert prediction.batch_id == 4 and prediction.model_version == 0
    np.testing.assert_allclose(replica.model.weights["w"], [0.65, -0.2])
    np.testing.assert_allclose(replica.model.weights["b"], [0.15])
    assert replica.local_step == 1 and replica.model_version == 1


def test_synchronous_trajectory_matches_sequential_averaged_sgd():
    batches = make_regression_batches(6, 3, seed=5)
    result = simulate(lambda r: LinearModel(3, seed=2), batches, TrainConfig(replicas=2, staleness_bound=0),
                      delivery_delay=1)
    # golden: plain momentum SGD on the average of each pair of batches' gradients
    w, b = LinearModel(3, seed=2).weights["w"].copy(), 0.0
    vw, vb = np.zeros(3), 0.0
    for k in range(3):
        gw, gb = np.zeros(3), 0.0
        for batch in batches[2 * k:2 * k + 2]:
            err = batch.x @ w + b - batch.y
            gw += 2 * batch.x.T @ err / len(err) / 2
            gb += 2 * err.mean() / 2
        vw, vb = 0.5 * vw + gw, 0.5 * vb + gb
        w, b = w - 0.05 * vw, b - 0.05 * vb
    for final in result.final_models.values():
        np.testing.assert_allclose(final.weights["w"], w, rtol=1e-12)
        np.testing.assert_allclose(final.weights["b"], [b], rtol=1e-12)
    assert result.replica_max_weight_diff() == 0.0


STRATEGIES = {
    "sync": dict(staleness_bound=0),
    "bounded-1": dict(staleness_bound=1),
    "bounded-3-every-2": dict(staleness_bound=3, broadcast_every=2),
    "dasgd": dict(staleness_bound=None),
    "dasgd-every-3": dict(staleness_bound=None, broadcast_every=3),
}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("replicas", [1, 2, 3])
@pytest.mark.parametrize("delay", [0, 4])
def test_conformance(strategy, replicas, delay):
    """What every strategy must do, whatever the replicas and the loop's delay."""
    options = STRATEGIES[strategy]
    batches = make_regression_batches(60, 4, seed=1)
    config = TrainConfig(replicas=replicas, buffer_capacity=1000, **options)
    run = lambda: simulate(lambda r: LinearModel(4, seed=0), batches, config, delivery_delay=delay)
    result = run()
    assert sorted(p.batch_id for p in result.predictions) == list(range(60)), "each batch predicted once"
    assert sorted(result.final_models) == list(range(replicas)), "every replica finished"
    steps = {r.id: r.local_step for r in result.replicas}
    assert sum(steps.values()) == 60
    bound = options["staleness_bound"]
    trained = [m for m in result.metrics if m.phase == "batch"]
    if bound is not None:
        assert max(m.staleness for m in trained) <= bound
    for replica in result.replicas:
        assert replica.bound_overflows == 0 and replica.duplicates_dropped == 0
        if bound == 0:
            assert replica.model_version == max(steps.values())
        else:  # own steps plus every peer message, each applied once
            peer_messages = sum(r.messages_sent - 1 for r in result.replicas if r.id != replica.id)
            assert replica.model_version == replica.local_step + peer_messages
    if bound == 0:
        assert result.replica_max_weight_diff() == 0.0
    again = run()
    for r, final in result.final_models.items():
        for name, value in final.weights.items():
            np.testing.assert_array_equal(value, again.final_models[r].weights[name])
    first_loss = np.mean([p.loss for p in result.predictions[:4]])
    last_loss = np.mean([p.loss for p in result.predictions[-4:]])
    assert last_loss < 0.5 * first_loss, "training reduces the loss"


def test_full_buffer_trains_beyond_the_bound_and_loses_nothing():
    batches = make_regression_batches(40, 3)
    result = simulate(lambda r: LinearModel(3), batches, TrainConfig(replicas=2, staleness_bound=0, buffer_capacity=2),
                      delivery_delay=10)
    assert sum(r.bound_overflows for r in result.replicas) > 0
    assert max(m.staleness for m in result.metrics if m.phase == "batch") > 0
    assert sorted(p.batch_id for p in result.predictions) == list(range(40))


def test_bounded_replica_holds_batches_until_peers_catch_up():
    replica = Replica(0, LinearModel(2), replicas=2, staleness_bound=1)
    batch = make_regression_batches(1, 2)[0]
    replica.on_batch(batch)
    replica.on_batch(batch)  # step 2 needs the peer's step 0: free
    assert replica.local_step == 2
    events = replica.on_batch(batch)  # step 3 needs the peer's step 1
    assert replica.local_step == 2 and replica.held_batches == 1
    assert not any(isinstance(e, Prediction) for e in events)
    peer_grads = {"w": np.zeros(2), "b": np.zeros(1)}
    events = replica.on_gradient(GradientMessage(1, 1, 1, peer_grads))
    assert replica.local_step == 3 and replica.held_batches == 0
    assert [type(e) for e in events][:1] == [Prediction]


def test_blocked_replica_flushes_its_partial_sum_so_peers_cannot_wait_in_a_cycle():
    replica = Replica(0, LinearModel(2), replicas=2, staleness_bound=1, broadcast_every=4)
    batch = make_regression_batches(1, 2)[0]
    sent = [e for _ in range(3) for e in replica.on_batch(batch) if isinstance(e, Broadcast)]
    assert len(sent) == 1 and (sent[0].message.first_step, sent[0].message.step) == (1, 2)


def test_a_restored_outgoing_sum_counts_its_steps_towards_the_period():
    make = lambda: Replica(0, LinearModel(2), replicas=2, staleness_bound=None, broadcast_every=4)
    batch = make_regression_batches(1, 2)[0]

    def steps_sent(replica, batches):
        return [(e.message.first_step, e.message.step) for _ in range(batches) for e in replica.on_batch(batch)
                if isinstance(e, Broadcast) and isinstance(e.message, GradientMessage)]

    straight = make()
    assert steps_sent(straight, 3) == []  # steps 1 .. 3 wait in the outgoing sum
    restored = make()
    restored.restore(straight.snapshot())  # one summed entry of three steps
    for replica in (straight, restored):
        assert steps_sent(replica, 5) == [(1, 4), (5, 8)]
        assert replica.gradient_messages_sent == 2
    np.testing.assert_array_equal(straight.model.get_weights()["w"], restored.model.get_weights()["w"])


def test_duplicates_are_dropped_by_sender_and_step():
    replica = Replica(1, LinearModel(2), replicas=2)
    message = GradientMessage(0, 1, 1, {"w": np.ones(2), "b": np.ones(1)})
    replica.on_gradient(message)
    before = replica.model.get_weights()
    replica.on_gradient(message)
    assert replica.duplicates_dropped == 1 and replica.model_version == 1
    np.testing.assert_array_equal(before["w"], replica.model.get_weights()["w"])


def test_out_of_order_messages_are_applied_once_and_tracked():
    replica = Replica(1, LinearModel(2), replicas=2)
    grads = {"w": np.ones(2), "b": np.ones(1)}
    replica.on_gradient(GradientMessage(0, 2, 2, grads))  # step 1 was lost or is late
    replica.on_gradient(GradientMessage(0, 1, 1, grads))
    replica.on_gradient(GradientMessage(0, 2, 2, grads))  # a resend of step 2
    assert replica.model_version == 2 and replica.duplicates_dropped == 1


def test_end_of_input_with_unequal_batch_counts_finishes_every_replica():
    batches = make_regression_batches(5, 2)
    result = simulate(lambda r: LinearModel(2), batches, TrainConfig(replicas=3, staleness_bound=0))
    assert [r.local_step for r in result.replicas] == [2, 2, 1]
    assert result.replica_max_weight_diff() == 0.0


def test_replica_with_no_batches_still_finishes():
    result = simulate(lambda r: LinearModel(2), make_regression_batches(1, 2), TrainConfig(replicas=3, staleness_bound=1))
    assert sorted(result.final_models) == [0, 1, 2]


def test_serving_mode_predicts_without_training():
    replica = Replica(0, LinearModel(2, seed=3), replicas=2, mode=Mode.SERVE)
    before = replica.model.get_weights()
    events = replica.on_batch(make_regression_batches(1, 2)[0])
    assert [type(e) for e in events] == [Prediction, Metrics]
    np.testing.assert_array_equal(before["w"], replica.model.get_weights()["w"])
    replica.on_gradient(GradientMessage(1, 1, 1, {"w": np.ones(2), "b": np.ones(1)}))
    assert replica.model_version == 1  # a serving replica still applies peers' updates


def test_protocol_violations_raise():
    replica = Replica(0, LinearModel(2), replicas=2)
    with pytest.raises(ProtocolError, match="from sender 0"):
        replica.on_gradient(DoneMessage(0, 1))
    replica.on_input_end()
    with pytest.raises(RuntimeError, match="after its input ended"):
        replica.on_batch(make_regression_batches(1, 2)[0])
    with pytest.raises(ValueError, match="broadcast_every must be 1"):
        Replica(0, LinearModel(2), replicas=2, staleness_bound=0, broadcast_every=2)


def _drive(replicas, script, queue):
    """Runs (kind, target, payload) steps; broadcasts are queued, 'deliver' delivers until quiet."""
    outputs = []

    def handle(events):
        for event in events:
            if isinstance(event, Broadcast):
                queue.extend((r.id, event.message) for r in replicas if r.id != event.message.sender)
            elif isinstance(event, (Prediction, FinalModel)):
                outputs.append(event)

    for kind, target, payload in script:
        if kind == "batch":
            handle(replicas[target].on_batch(payload))
        elif kind == "end":
            handle(replicas[target].on_input_end())
        else:
            while queue:
                dest, message = queue.pop(0)
                handle(replicas[dest].on_gradient(message))
    return queue, outputs


def _assert_same_finals(straight, restored, rest, in_flight):
    """``rest`` of the script driven through both sets of replicas: the same final models."""
    _, out_a = _drive(straight, rest, list(in_flight))
    _, out_b = _drive(restored, rest, list(in_flight))
    finals_a = {e.replica: e for e in out_a if isinstance(e, FinalModel)}
    finals_b = {e.replica: e for e in out_b if isinstance(e, FinalModel)}
    assert sorted(finals_a) == sorted(finals_b) == [0, 1]
    for r in finals_a:
        np.testing.assert_array_equal(finals_a[r].weights["w"], finals_b[r].weights["w"])
        assert finals_a[r].model_version == finals_b[r].model_version


@pytest.mark.parametrize("bound", [0, 2, None])
def test_snapshot_and_restore_resume_exactly(bound):
    batches = make_regression_batches(14, 3, seed=7)
    first = [("batch", i % 2, b) for i, b in enumerate(batches[:7])] + [("deliver", None, None)]
    second = [("batch", i % 2, b) for i, b in enumerate(batches[7:])] + [("end", 0, None), ("end", 1, None)]
    second += [("deliver", None, None)]
    make = lambda: [Replica(r, LinearModel(3), replicas=2, staleness_bound=bound, broadcast_every=1 if bound == 0 else 2,
                            buffer_capacity=50) for r in range(2)]
    straight = make()
    in_flight = []
    _drive(straight, first + [("batch", 0, batches[0])], in_flight)  # leaves held batches, partial sums, messages
    snapshots = [r.snapshot() for r in straight]
    assert all(isinstance(v, np.ndarray) for s in snapshots for v in s.values()), "plain arrays only"
    restored = make()
    for replica, snapshot in zip(restored, snapshots):
        replica.restore(snapshot)
    _assert_same_finals(straight, restored, second, in_flight)


# The counters of snapshots before release 0.2.0: one int64 array "counters", by position, in this order
_POSITIONAL_COUNTERS = ("local_step", "model_version", "messages_sent", "bytes_sent", "dense_bytes_sent",
                        "messages_applied", "duplicates_dropped", "bound_overflows", "_sync_done",
                        "_outgoing_first", "input_ended", "done_sent", "finished", "messages_resent",
                        "batches_served", "_mode_sequence", "_drift_epoch", "dead_letters", "messages_rejected",
                        "gradients_clipped", "steps_skipped", "_unattributed", "messages_while_serving",
                        "_drift_at", "_pending_drift", "_pending_origin", "_position")


def _positional(snapshot):
    """A snapshot in the previous release's layout: the ``counters/<name>`` entries as one
    positional array (a counter the replica's update rule does not keep at its initial value)."""
    named = {k[len("counters/"):]: int(v) for k, v in snapshot.items() if k.startswith("counters/")}
    defaults = {"sync_done": 0, "outgoing_first": 1, "unattributed": 0}
    old = {k: v for k, v in snapshot.items() if not k.startswith("counters/")}
    old["counters"] = np.array([named.get(n.lstrip("_"), defaults.get(n.lstrip("_"))) for n in _POSITIONAL_COUNTERS], np.int64)
    return old


@pytest.mark.parametrize("bound", [0, 2, None])
def test_a_snapshot_of_a_release_before_0_2_is_refused_with_the_reason(bound):
    """0.2.0 read the positional layout still; this release refuses it, saying how to move on."""
    batches = make_regression_batches(7, 3, seed=7)
    make = lambda: [Replica(r, LinearModel(3), replicas=2, staleness_bound=bound, broadcast_every=1 if bound == 0 else 2,
                            buffer_capacity=50) for r in range(2)]
    straight = make()
    _drive(straight, [("batch", i % 2, b) for i, b in enumerate(batches)] + [("deliver", None, None)], [])
    old = [_positional(r.snapshot()) for r in straight]
    assert all(o["counters"][0] > 0 for o in old)
    for replica, snapshot in zip(make(), old):
        with pytest.raises(ProtocolError, match=r"before 0\.2\.0 .* resume it with a 0\.2\.x release"):
            replica.restore(snapshot)
    if bound != 0:  # a rescale reads the old replicas' states: refused alike
        with pytest.raises(ProtocolError, match=r"before 0\.2\.0"):
            make()[0].adopt(2, {0: old[0], 1: old[1]})


def test_a_lone_replica_sends_no_gradients_but_still_ends_its_channel():
    replica = Replica(0, LinearModel(2))
    events = replica.on_batch(make_regression_batches(1, 2)[0])
    assert not any(isinstance(e, Broadcast) for e in events)
    events = replica.on_input_end()
    assert [e.message for e in events if isinstance(e, Broadcast)] == [DoneMessage(0, 1, acks=(0,))]
    assert replica.finished


class _FusedLinearModel(LinearModel):
    """A model with the optional fused ``train_step``; counts which path the replica takes."""

    def __init__(self, *args, sparse_values=None, **kwargs):
        super().__init__(*args, **kwargs)
        if sparse_values is not None:
            self.sparse_values = sparse_values
        self.calls = []

    def train_step(self, batch, return_gradients=True):
        self.calls.append(("train_step", return_gradients))
        result = LinearModel.compute_gradients(self, batch)
        LinearModel.apply_gradients(self, result.gradients)
        return result if return_gradients else StepResult(result.predictions, result.loss, result.accuracy)

    def compute_gradients(self, batch):
        self.calls.append(("compute_gradients",))
        return super().compute_gradients(batch)


@pytest.mark.parametrize("bound, replicas, sparse_values, model_rounds, fused", [
    (None, 2, "float32", None, True), (4, 2, "float32", None, True),
    (None, 1, "float32", None, True),  # no peers: the gradient need not leave the model
    (0, 2, "float32", None, False),  # synchronous: the step's gradient is applied averaged, later
    (None, 2, "float16", None, False),  # the model does not round its own rows as peers decode them
    (None, 2, "float16", "float16", True),
])
def test_replica_uses_the_models_fused_step_only_where_it_means_compute_then_apply(bound, replicas, sparse_values,
                                                                                   model_rounds, fused):
    batches = make_regression_batches(4, 3, seed=1)
    plain = simulate(lambda r: LinearModel(3, seed=0), batches, TrainConfig(replicas=replicas, staleness_bound=bound,
                                                                            sparse_values=sparse_values))
    models = []

    def make(r):
        models.append(_FusedLinearModel(3, seed=0, sparse_values=model_rounds))
        return models[-1]

    result = simulate(make, batches, TrainConfig(replicas=replicas, staleness_bound=bound, sparse_values=sparse_values))
    for r in range(replicas):  # the same weights either way
        np.testing.assert_array_equal(result.final_models[r].weights["w"], plain.final_models[r].weights["w"])
    used = {call for m in models for call in m.calls}
    assert used == ({("train_step", replicas > 1)} if fused else {("compute_gradients",)})


def _peer_message(sender, step, gradients):
    return GradientMessage(sender, step, step, gradients, acks=(0, 0))


@pytest.mark.parametrize("updates, local_steps, expected_w", [
    (PeerUpdates(), 0, [-0.5, -1.0]),  # lr 0.5, no momentum: w -= 0.5 * g
    (PeerUpdates(scale=0.5), 0, [-0.25, -0.5]),
    (PeerUpdates(damping="inverse"), 3, [-0.25, -0.5]),  # 3 local steps past the sender's step 2: 1 / (1 + 1)
    (PeerUpdates(rule="sgd", sgd_learning_rate=0.1), 0, [-0.1, -0.2]),
])
def test_peer_gradients_are_weighed_as_peer_updates_say(updates, local_steps, expected_w):
    replica = Replica(0, _model([0.0, 0.0], learning_rate=0.5, momentum=0.0), replicas=2, staleness_bound=None,
                      peer_updates=updates)
    replica.counts.local_step = local_steps  # as if it had trained: only the step count matters to the factor
    replica.on_gradient(_peer_message(1, 2, {"w": np.array([1.0, 2.0]), "b": np.array([0.0])}))
    np.testing.assert_allclose(replica.model.weights["w"], expected_w)
    assert replica.messages_applied == 1


def test_the_sgd_rule_leaves_the_optimizer_slots_to_own_gradients():
    replica = Replica(0, _model([0.0, 0.0], learning_rate=0.5, momentum=0.9), replicas=2, staleness_bound=None,
                      peer_updates=PeerUpdates(rule="sgd", sgd_learning_rate=0.1))
    replica.on_gradient(_peer_message(1, 1, {"w": np.array([1.0, 2.0]), "b": np.array([3.0])}))
    assert not any(v.any() for v in replica.model.velocity.values())


def test_peer_updates_refuse_what_cannot_apply_them():
    class NoPlainStep:  # a model without apply_sgd
        def get_weights(self):
            return {"w": np.zeros(1)}

    with pytest.raises(ConfigError, match="needs a model with apply_sgd"):
        Replica(0, NoPlainStep(), replicas=2, peer_updates=PeerUpdates(rule="sgd", sgd_learning_rate=0.1))
    with pytest.raises(ConfigError, match="peer_updates weigh DASGD's peer gradients; synchronous replicas"):
        Replica(0, LinearModel(2), replicas=2, staleness_bound=0, peer_updates=PeerUpdates(scale=0.5))


def test_periodic_averaging_sends_weights_after_the_gradients_and_peers_mix_them_in():
    updates = PeerUpdates(average_every=2)
    r0, r1 = (Replica(i, LinearModel(3, seed=0), replicas=2, staleness_bound=None, peer_updates=updates) for i in range(2))
    batches = make_regression_batches(4, 3, seed=2)
    sent = [e.message for b in batches[:2] for e in r0.on_batch(b) if isinstance(e, Broadcast)]
    assert [type(m).__name__ for m in sent] == ["GradientMessage", "GradientMessage", "WeightsMessage"]
    assert sent[2].step == 2 and all(np.array_equal(sent[2].weights[k], v) for k, v in r0.model.get_weights().items())
    r1.on_batch(batches[2])
    for message in sent[:2]:
        r1.on_gradient(message)
    before = r1.model.get_weights()
    r1.on_gradient(sent[2])
    for name, value in r1.model.get_weights().items():  # half way towards replica 0's weights
        np.testing.assert_allclose(value, (before[name] + sent[2].weights[name]) / 2)
    mixed = r1.model.get_weights()
    assert r1.weights_mixed == 1 and r1.metrics_record("batch", None).weights_mixed == 1  # a counter of the table
    r1.on_gradient(sent[2])  # a repeat (after a restore) changes nothing
    assert r1.duplicates_dropped == 1 and all(np.array_equal(mixed[k], v) for k, v in r1.model.get_weights().items())
    restored = Replica(1, LinearModel(3, seed=0), replicas=2, staleness_bound=None, peer_updates=updates)
    restored.restore(r1.snapshot())
    restored.on_gradient(sent[2])  # the newest step mixed in is part of the state (and so are the counters)
    assert restored.duplicates_dropped == 2 and restored.weights_mixed == 1


def test_periodic_averaging_keeps_the_protocol_and_pulls_the_replicas_together():
    batches = make_regression_batches(24, 3, seed=4)
    config = TrainConfig(replicas=2, staleness_bound=None)
    apart = simulate(lambda r: LinearModel(3, seed=0), batches, config, delivery_delay=4)
    averaged = simulate(lambda r: LinearModel(3, seed=0), batches,
                        TrainConfig(replicas=2, staleness_bound=None, peer_updates=PeerUpdates(average_every=3)),
                        delivery_delay=4)
    trained = sorted(m.batch_id for m in averaged.metrics if m.phase == "batch")
    assert trained == list(range(24)) and sorted(averaged.final_models) == [0, 1]
    assert averaged.replica_max_weight_diff() < apart.replica_max_weight_diff()


def test_periodic_averaging_leaves_embedding_tables_out():
    from pyflink_tensair.core.messages import SparseGradient

    class HalfSparse(LinearModel):  # "w" arrives as rows of a table, "b" dense
        def compute_gradients(self, batch):
            result = super().compute_gradients(batch)
            w = result.gradients["w"]
            rows = SparseGradient(np.arange(len(w)), w.reshape(-1), (len(w),))
            return StepResult(result.predictions, result.loss, None, {"w": rows, "b": result.gradients["b"]})

    updates = PeerUpdates(average_every=1)
    replica = Replica(0, HalfSparse(3), replicas=2, staleness_bound=None, peer_updates=updates)
    sent = [e.message for e in replica.on_batch(make_regression_batches(1, 3)[0]) if isinstance(e, Broadcast)]
    assert list(sent[-1].weights) == ["b"]
    only_sparse = Replica(0, HalfSparse(3), replicas=2, staleness_bound=None, peer_updates=updates)
    only_sparse.model.compute_gradients = lambda batch: StepResult(
        np.zeros(len(batch.x)), 1.0, None, {"w": SparseGradient(np.array([0]), np.ones(1), (3,))})
    only_sparse.model.apply_gradients = lambda gradients: None
    sent = [e.message for e in only_sparse.on_batch(make_regression_batches(1, 3)[0]) if isinstance(e, Broadcast)]
    assert [type(m).__name__ for m in sent] == ["GradientMessage"]  # nothing dense to average: no weights message


def _snapshots_module():
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location("replica_snapshots",
                                                  pathlib.Path(__file__).parent / "data" / "replica_snapshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["sync", "bound2", "unbounded"])
def test_a_snapshot_written_before_the_replica_was_split_resumes_exactly(name):
    """Snapshots the release before issue 51 wrote (tests/data): restored now, the replicas hold
    the state this release reaches on the same script, and finish with the same models."""
    data = _snapshots_module()
    bound = data.BOUNDS[name]
    first, second = data.halves()
    straight, in_flight = data.make(bound), []
    _drive(straight, first, in_flight)
    snapshots, saved_in_flight = data.load(name)
    assert [(dest, wire.encode_message(m)) for dest, m in in_flight] == saved_in_flight
    restored = data.make(bound)
    for replica in restored:
        replica.restore(snapshots[replica.id])
    for now, before in zip(restored, straight):
        again, expected = now.snapshot(), before.snapshot()
        assert sorted(again) == sorted(expected)
        assert all(np.array_equal(again[k], expected[k]) for k in expected)
    _assert_same_finals(straight, restored, second, in_flight)
