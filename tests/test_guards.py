"""Bad input, poisoned peer messages and non-finite steps (issue 13), in process: what a replica
sets aside, refuses, clips or skips, and that the protocol goes on and loses nothing."""

import dataclasses

import numpy as np
import pytest

from pyflink_tensair import BadInputError, DeadLetter, Guards, TrainConfig
from pyflink_tensair.core import wire
from pyflink_tensair.core.events import FinalModel, Metrics
from pyflink_tensair.core.guards import BatchSpec, check_batch, check_record, gradient_norm
from pyflink_tensair.core.messages import Batch, DoneMessage, GradientMessage, RefusedMessage, SparseGradient
from pyflink_tensair.core.replica import Replica
from pyflink_tensair.datasets.corpus import read_corpus
from pyflink_tensair.testing import LinearModel, make_regression_batches, max_weight_diff, simulate

SPEC = BatchSpec(inputs={None: (3,)}, classes=4)
GOOD = Batch(np.zeros((4, 3), np.float32), np.array([0, 1, 2, 3]), {"id": 1})


@pytest.mark.parametrize("batch, reason", [
    (Batch(np.zeros((0, 3), np.float32), np.zeros(0, np.int64)), "empty"),
    (Batch(np.zeros((4, 5), np.float32), np.zeros(4, np.int64)), "wrong_shape"),
    (Batch(np.zeros((4, 3), np.float32), None), "missing_field"),
    (Batch({"a": np.zeros((4, 3), np.float32)}, np.zeros(4, np.int64)), "missing_field"),
    (Batch(np.array([[0, 1, np.nan]] * 4, np.float32), np.zeros(4, np.int64)), "non_finite"),
    (Batch(np.zeros((4, 3), np.float32), np.array([0.0, np.inf, 1, 2])), "non_finite"),
    (Batch(np.array([["a", "b", "c"]] * 4), np.zeros(4, np.int64)), "wrong_dtype"),
    (Batch(np.zeros((4, 3), np.float32), np.array([0, 1, 4, 2])), "label_out_of_range"),
    (Batch(np.zeros((4, 3), np.float32), np.array([0, -1, 1, 2])), "label_out_of_range"),
])
def test_a_batch_the_model_cannot_take_is_refused_with_its_reason(batch, reason):
    refusal = check_batch(batch, SPEC, needs_labels=True)
    assert refusal is not None and refusal.reason == reason, refusal
    assert check_batch(GOOD, SPEC, needs_labels=True) is None


def test_an_oversized_batch_and_floats_where_the_model_takes_indices_are_refused():
    assert check_batch(GOOD, SPEC, needs_labels=True, max_bytes=64).reason == "oversized"
    spec = BatchSpec(inputs={"target": (), "context": (5,)}, integer_inputs=frozenset({"target", "context"}))
    floats = Batch({"target": np.zeros(2, np.float32), "context": np.zeros((2, 5), np.int32)}, np.zeros((2, 5)))
    assert check_batch(floats, spec, needs_labels=True).reason == "wrong_dtype"
    ints = dataclasses.replace(floats, x={"target": np.zeros(2, np.int32), "context": np.zeros((2, 5), np.int32)})
    assert check_batch(ints, spec, needs_labels=True) is None


@pytest.mark.parametrize("record, reason", [
    (([1.0, 2.0], 0), None), (([1.0, "a"], 0), "wrong_dtype"), (([1.0, 2.0, 3.0], 0), "wrong_shape"),
    (([[1.0], [2.0, 3.0]], 0), "wrong_shape"), (([1.0, float("nan")], 0), "non_finite"), (([1.0, 2.0],), "missing_field"),
    (([1.0, 2.0], None), "missing_field"), ("text", "missing_field"), (7, "missing_field"), (([1.0, 2.0], 4), "label_out_of_range"),
    (([1.0, 2.0], 1.5), "label_out_of_range"), (([1.0, 2.0], "cat"), "wrong_dtype"), (([1.0, 2.0], float("inf")), "non_finite"),
])
def test_a_record_is_checked_before_it_joins_a_batch(record, reason):
    refusal, features, _ = check_record(record, features_shape=(2,), labelled=True, classes=4)
    assert (refusal and refusal.reason) == reason
    if reason is None:
        assert features.shape == (2,)


def _pair(**kwargs):
    return [Replica(r, LinearModel(3, seed=0), replicas=2, **kwargs) for r in range(2)]


def test_a_bad_batch_becomes_a_dead_letter_and_is_counted_not_trained():
    replica = Replica(0, LinearModel(3, seed=0))
    before = replica.model.get_weights()
    events = replica.on_batch(Batch(np.zeros((4, 5), np.float32), np.zeros(4), {"id": 9}))
    assert [type(e) for e in events] == [DeadLetter]
    letter = events[0]
    assert (letter.reason, letter.what, letter.stage, letter.position, letter.replica) == ("wrong_shape", "batch", "replica", 9, 0)
    assert "float32[4, 5]" in letter.preview
    assert replica.dead_letters == 1 and replica.local_step == 0
    assert max_weight_diff([before, replica.model.get_weights()]) == 0.0
    assert replica.on_batch(make_regression_batches(1, 3)[0])[-1].dead_letters == 1  # the next batch trains
    assert replica.local_step == 1


def test_fail_fast_policy_raises_instead():
    replica = Replica(0, LinearModel(3, seed=0), guards=Guards(bad_input="fail"))
    with pytest.raises(BadInputError, match="wrong_shape"):
        replica.on_batch(Batch(np.zeros((4, 5), np.float32), np.zeros(4), {"id": 9}))


def _gradient(sender=1, step=1, scale=1.0, **extra):
    grads = {"w": np.full(3, scale), "b": np.array([scale])}
    grads.update(extra)
    return GradientMessage(sender, step, step, grads, acks=(0, 0))


@pytest.mark.parametrize("poison, reason", [
    (dict(w=np.array([np.nan, 0.0, 0.0])), "non_finite"),
    (dict(w=np.array([np.inf, 0.0, 0.0])), "non_finite"),
    (dict(w=np.zeros(4)), "wrong_shape"),
    (dict(extra=np.zeros(3)), "unknown_tensor"),
    (dict(w=SparseGradient(np.array([7]), np.ones((1,)), (3,))), "wrong_shape"),
])
def test_a_poisoned_peer_gradient_is_refused_counted_and_the_bound_goes_on(poison, reason):
    r0, _ = _pair(staleness_bound=1)
    before = r0.model.get_weights()
    message = dataclasses.replace(_gradient(), gradients={**_gradient().gradients, **poison})
    events = r0.on_gradient(message)
    letters = [e for e in events if isinstance(e, DeadLetter)]
    assert [(l.reason, l.what, l.position) for l in letters] == [(reason, "message", 1)]
    assert r0.messages_rejected == 1 and r0.messages_applied == 0 and r0.model_version == 0
    assert max_weight_diff([before, r0.model.get_weights()]) == 0.0
    assert r0.peers[1].progress() == 1  # counted as received: the staleness bound does not wait for it
    r0.on_gradient(message)  # a repeat is a duplicate, not a second refusal
    assert r0.messages_rejected == 1 and r0.duplicates_dropped == 1


def test_peer_messages_are_refused_whatever_the_bad_input_policy():
    r0, _ = _pair(guards=Guards(bad_input="fail"))
    r0.on_gradient(dataclasses.replace(_gradient(), gradients={"w": np.array([np.nan] * 3), "b": np.zeros(1)}))
    assert r0.messages_rejected == 1


def test_the_norm_bound_rejects_or_clips_outliers():
    norm = gradient_norm(_gradient(scale=10.0).gradients)
    assert norm == pytest.approx(20.0)
    rejecting, _ = _pair(guards=Guards(max_gradient_norm=5.0))
    rejecting.on_gradient(_gradient(scale=10.0))
    assert (rejecting.messages_rejected, rejecting.messages_applied) == (1, 0)
    clipping, _ = _pair(guards=Guards(max_gradient_norm=5.0, norm_action="clip"))
    reference, _ = _pair()
    clipping.on_gradient(_gradient(scale=10.0))
    reference.on_gradient(_gradient(scale=2.5))  # what the clip leaves: norm 5
    assert (clipping.gradients_clipped, clipping.messages_applied, clipping.messages_rejected) == (1, 1, 0)
    assert max_weight_diff([clipping.model.get_weights(), reference.model.get_weights()]) < 1e-12


class _ExplodesOnBatch(LinearModel):
    """Gives a non-finite gradient on batch ``bad``."""

    def __init__(self, *args, bad=2, **kwargs):
        super().__init__(*args, **kwargs)
        self.bad = bad

    def compute_gradients(self, batch):
        result = super().compute_gradients(batch)
        if batch.id == self.bad:
            return dataclasses.replace(result, gradients={k: np.full_like(v, np.nan) for k, v in result.gradients.items()})
        return result


def test_a_dasgd_replica_skips_its_own_non_finite_step_and_sends_nothing():
    replica = Replica(0, _ExplodesOnBatch(3, seed=0), replicas=2, staleness_bound=None)
    batches = make_regression_batches(4, 3)
    replica.on_batch(batches[0]), replica.on_batch(batches[1])
    weights = replica.model.get_weights()
    events = replica.on_batch(batches[2])
    metrics = [e for e in events if isinstance(e, Metrics)][-1]
    assert (metrics.trained, metrics.steps_skipped, replica.local_step, replica.messages_sent) == (False, 1, 2, 2)
    assert max_weight_diff([weights, replica.model.get_weights()]) == 0.0
    assert all(np.isfinite(v).all() for v in replica.model.get_weights().values())


def test_synchronous_replicas_stay_identical_when_one_step_is_not_finite():
    batches = make_regression_batches(12, 3)
    config = TrainConfig(replicas=2, staleness_bound=0)
    result = simulate(lambda r: _ExplodesOnBatch(3, seed=0, bad=4), batches, config)
    assert result.replica_max_weight_diff() == 0.0
    finals = [m for m in result.metrics if m.phase == "final"]
    assert sum(m.steps_skipped for m in finals) == 1  # the replica whose step it was; it sent a zero in its place
    assert sum(m.messages_rejected for m in finals) == 0
    assert all(np.isfinite(v).all() for f in result.final_models.values() for v in f.weights.values())


def test_a_message_that_does_not_decode_counts_against_its_sender():
    r0, _ = _pair(staleness_bound=1)
    events = r0.on_gradient(RefusedMessage(1, 1, 2, wire.KIND_GRADIENT, "unsupported format version 2"))
    assert [e.reason for e in events if isinstance(e, DeadLetter)] == ["not_a_record"]
    assert r0.peers[1].progress() == 2 and r0.messages_rejected == 1
    r0.on_gradient(RefusedMessage(1, 5, 5, wire.KIND_DONE, "bad bytes"))
    r0.on_input_end()
    r0.on_gradient(_gradient(step=3)), r0.on_gradient(_gradient(step=4)), r0.on_gradient(_gradient(step=5))
    assert r0.finished  # the done marker's final step came through its header
    unknown = r0.on_gradient(RefusedMessage(-1, 0, 0, 0, "junk"))
    assert [e.reason for e in unknown] == ["not_a_record"] and r0.messages_rejected == 3


def test_the_guards_counters_survive_a_restore():
    replica = Replica(0, LinearModel(3, seed=0), replicas=2)
    replica.on_batch(Batch(np.zeros((0, 3), np.float32), np.zeros(0)))
    replica.on_gradient(dataclasses.replace(_gradient(), gradients={"w": np.zeros(4), "b": np.zeros(1)}))
    restored = Replica(0, LinearModel(3, seed=0), replicas=2)
    restored.restore(replica.snapshot())
    assert (restored.dead_letters, restored.messages_rejected) == (2, 1)


def test_simulate_reports_dead_letters_and_trains_every_good_batch():
    good = make_regression_batches(8, 3)
    bad = [Batch(np.zeros((2, 7), np.float32), np.zeros(2), {"id": 100}), Batch(np.full((2, 3), np.nan), np.zeros(2), {"id": 101})]
    result = simulate(lambda r: LinearModel(3, seed=0), good[:3] + bad + good[3:], TrainConfig(replicas=2))
    assert sorted((l.position, l.reason) for l in result.dead_letters) == [(100, "wrong_shape"), (101, "non_finite")]
    trained = sorted(m.batch_id for m in result.metrics if m.phase == "batch" and m.trained)
    assert trained == sorted(b.id for b in good)


def test_a_corpus_line_that_is_not_utf8_is_set_aside_with_its_offset(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"to be or not\n\xff\xfebroken line\nthat is the question\n")
    assert list(read_corpus(str(path))) == ["to be or not", "\ufffd\ufffdbroken line", "that is the question"]
    letters = []
    assert list(read_corpus(str(path), letters)) == ["to be or not", "that is the question"]
    assert [(l.reason, l.what, l.stage, l.position) for l in letters] == [("bad_utf8", "line", "corpus", 13)]
    assert "invalid start byte" in letters[0].detail and str(path) in letters[0].detail


def test_dead_letters_round_trip_through_the_wire():
    letter = DeadLetter("oversized", "1 GB", "batch", "replica", 3, "x float32[...]", replica=1, time=2.5)
    assert wire.decode_dead_letter(wire.encode_dead_letter(letter)) == letter
    assert wire.peek_kind(wire.encode_dead_letter(letter)) == wire.KIND_DEAD_LETTER
    with pytest.raises(Exception, match="reason must be one of"):
        DeadLetter("mystery", "", "batch", "replica", 0)


@pytest.mark.parametrize("staleness", [1, 2, None])
def test_a_message_lost_to_unreadable_bytes_does_not_stall_dasgd(staleness):
    """Nothing tells whose it was; the sender's next message (FIFO) or its done marker does."""
    replicas = _pair(staleness_bound=staleness)
    queue, lost = [], []

    def emit(sender, events):
        for event in events:
            if type(event).__name__ == "Broadcast":
                message = event.message
                if sender == 1 and isinstance(message, GradientMessage) and message.step == 2:
                    lost.append(message)
                    message = RefusedMessage(-1, 0, 0, 0, "junk")  # unreadable: no sender, no step
                queue.append((1 - sender, message))

    for i, batch in enumerate(make_regression_batches(8, 3)):
        emit(i % 2, replicas[i % 2].on_batch(batch))
        while queue:
            receiver, message = queue.pop(0)
            emit(receiver, replicas[receiver].on_gradient(message))
    for r in (0, 1):
        emit(r, replicas[r].on_input_end())
    while queue:
        receiver, message = queue.pop(0)
        emit(receiver, replicas[receiver].on_gradient(message))
    assert len(lost) == 1 and replicas[0].messages_rejected == 1
    assert all(r.finished for r in replicas)
    assert replicas[0].messages_applied == 3  # of r1's four steps


def test_synchronous_replicas_fail_loudly_on_a_message_nobody_can_attribute():
    from pyflink_tensair.errors import ProtocolError

    r0, _ = _pair(staleness_bound=0)
    with pytest.raises(ProtocolError, match="cannot tell whose step is missing"):
        r0.on_gradient(RefusedMessage(-1, 0, 0, 0, "junk"))


def test_a_replica_is_saturated_while_a_quarter_of_its_buffer_waits_for_the_bound():
    r0, r1 = _pair(staleness_bound=1, buffer_capacity=16)
    batches = make_regression_batches(12, 3)
    for batch in batches[:6]:
        r0.on_batch(batch)  # r1 sends nothing: after 2 steps r0 holds the rest
    assert (r0.local_step, r0.held_batches, r0.saturated) == (2, 4, True)
    sent = [e.message for b in batches[6:9] for e in r1.on_batch(b) if type(e).__name__ == "Broadcast"]
    for message in sent:
        r0.on_gradient(message)
    assert not r0.saturated and r0.held_batches < 4
