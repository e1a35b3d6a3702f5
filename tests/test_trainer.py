"""The trainer thread: same replica, same results as inline; messages first; backpressure; errors."""

import sys
import threading
import time
import types

import numpy as np
import pytest

from pyflink_tensair import ConfigError
from pyflink_tensair.core import Broadcast, FinalModel, Metrics, Prediction, Replica
from pyflink_tensair.core import trainer as trainer_module
from pyflink_tensair.core.trainer import InlineTrainer, TrainerFailed, TrainerThread
from pyflink_tensair.waiting import wait_until
from pyflink_tensair.testing import LinearModel, make_regression_batches


class GatedModel(LinearModel):
    """A LinearModel whose gradient step waits for ``gate`` and that logs what it is asked to do."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.gate.set()
        self.log = []

    def compute_gradients(self, batch):
        self.log.append(("batch", batch.id))
        assert self.gate.wait(10), "the test never opened the gate"
        return super().compute_gradients(batch)

    def apply_gradients(self, gradients):
        self.log.append(("apply",))
        return super().apply_gradients(gradients)


class ModelClock:
    """The clock the trainer thread reads (``time.perf_counter``): it moves only when a model
    says its step took time, so an item's measured duration is exactly what the test chose."""

    def __init__(self, monkeypatch):
        self.now = 0.0
        monkeypatch.setattr(trainer_module, "time", types.SimpleNamespace(perf_counter=lambda: self.now,
                                                                          monotonic=time.monotonic))


class TimedModel(GatedModel):
    """A GatedModel whose gradient step takes ``step_s`` seconds by ``clock``."""

    def __init__(self, *args, clock: ModelClock, step_s: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.clock, self.step_s = clock, step_s

    def compute_gradients(self, batch):
        self.clock.now += self.step_s
        return super().compute_gradients(batch)


class FailingModel(LinearModel):
    def compute_gradients(self, batch):
        raise FloatingPointError("the model exploded")


def _wait_for(predicate, timeout=10.0):
    wait_until(predicate, timeout, interval_s=0.005)


def _waiting_inside(thread: threading.Thread, function: str) -> bool:
    """Whether ``thread`` is parked in a ``wait`` (a lock's or a condition's) called from ``function``."""
    frame, names = sys._current_frames().get(thread.ident), []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return "wait" in names and function in names[names.index("wait"):]


@pytest.fixture
def trainer_factory():
    made = []

    def make(replica, **kwargs):
        trainer = TrainerThread(replica, **kwargs)
        made.append(trainer)
        return trainer

    yield make
    for trainer in made:
        trainer.close()


def _run(trainer, batches):
    for batch in batches:
        trainer.put_batch(batch)
    trainer.put_end()
    trainer.wait_idle(10)
    return trainer.take()


def test_thread_and_inline_emit_the_same_events_and_end_with_the_same_model(trainer_factory):
    batches = make_regression_batches(8, 3, seed=1)
    inline = _run(InlineTrainer(Replica(0, LinearModel(3, seed=0))), batches)
    threaded = _run(trainer_factory(Replica(0, LinearModel(3, seed=0))), batches)
    assert [type(e) for e in threaded] == [type(e) for e in inline]
    assert [e.batch_id for e in threaded if isinstance(e, Prediction)] == list(range(8))
    for a, b in zip(inline, threaded):
        if isinstance(a, Prediction):
            np.testing.assert_array_equal(a.predictions, b.predictions)
    final_inline, final_thread = inline[-1], threaded[-1]
    assert isinstance(final_thread, FinalModel)
    for name in final_inline.weights:
        np.testing.assert_array_equal(final_inline.weights[name], final_thread.weights[name])


def test_peer_messages_jump_ahead_of_queued_batches_and_batches_keep_their_order(trainer_factory):
    model = GatedModel(3, seed=0)
    replica = Replica(0, model, replicas=2, staleness_bound=None)
    peer = Replica(1, LinearModel(3, seed=0), replicas=2, staleness_bound=None)
    message = next(e.message for e in peer.on_batch(make_regression_batches(1, 3, seed=9)[0]) if isinstance(e, Broadcast))
    trainer = trainer_factory(replica, max_waiting_batches=2)
    first, second, third = make_regression_batches(3, 3, seed=2)
    model.gate.clear()
    trainer.put_batch(first)
    _wait_for(lambda: model.log == [("batch", 0)])  # the trainer is inside batch 0
    trainer.put_batch(second)
    trainer.put_batch(third)
    trainer.put_message(message)
    model.gate.set()
    trainer.wait_idle(10)
    # batch 0's own update, then the peer's message, then batches 1 and 2 in arrival order
    assert model.log == [("batch", 0), ("apply",), ("apply",), ("batch", 1), ("apply",), ("batch", 2), ("apply",)]
    assert replica.messages_applied == 1 and replica.local_step == 3


def test_put_batch_blocks_while_enough_batches_wait_and_messages_never_block(trainer_factory, monkeypatch):
    model = TimedModel(3, seed=0, clock=ModelClock(monkeypatch), step_s=0.5)
    replica = Replica(0, model, replicas=2, staleness_bound=None)
    trainer = trainer_factory(replica, max_waiting_batches=1)
    warm_up, *batches = make_regression_batches(4, 3, seed=3)
    trainer.put_batch(warm_up)  # one item of 0.5 s (by the trainer's clock): the duration it expects of each
    trainer.wait_idle(10)
    assert sum(isinstance(e, Metrics) for e in trainer.take()) == 1 and model.log == [("batch", 0), ("apply",)]
    model.log.clear()
    model.gate.clear()
    trainer.put_batch(batches[0])
    _wait_for(lambda: len(model.log) == 1)
    trainer.put_batch(batches[1])  # one waits: still accepted
    returned = threading.Event()
    putter = threading.Thread(target=lambda: (trainer.put_batch(batches[2]), returned.set()), daemon=True)
    putter.start()
    _wait_for(lambda: _waiting_inside(putter, "put_batch") or returned.is_set())
    assert not returned.is_set(), "put_batch must wait while a batch is already waiting"
    peer = Replica(1, LinearModel(3, seed=0), replicas=2, staleness_bound=None)
    message = next(e.message for e in peer.on_batch(batches[0]) if isinstance(e, Broadcast))
    trainer.put_message(message)  # returns at once: the loop must always be drained
    # batch 0 running, batch 1 and the message queued (batch 2 is not in yet): 3 items of 0.5 s
    assert trainer.busy and trainer.expected_remaining_s() == pytest.approx(1.5)
    model.gate.set()
    assert returned.wait(10)
    trainer.wait_idle(10)
    assert replica.local_step == 4 and not trainer.busy and trainer.expected_remaining_s() == 0
    assert sum(isinstance(e, Metrics) for e in trainer.take()) == 3


def test_an_error_in_the_model_reaches_the_host_with_its_cause(trainer_factory):
    trainer = trainer_factory(Replica(0, FailingModel(3)))
    trainer.put_batch(make_regression_batches(1, 3)[0])
    _wait_for(lambda: not trainer.busy)
    with pytest.raises(TrainerFailed, match="the model exploded") as err:
        trainer.take()
    assert isinstance(err.value.__cause__, FloatingPointError)
    with pytest.raises(TrainerFailed):
        trainer.put_batch(make_regression_batches(1, 3)[0])  # and it stays failed


def test_a_waiting_host_is_released_when_the_trainer_fails(trainer_factory):
    model = GatedModel(3)
    trainer = trainer_factory(Replica(0, model), max_waiting_batches=1)
    batches = make_regression_batches(3, 3)
    model.gate.clear()
    trainer.put_batch(batches[0])
    _wait_for(lambda: len(model.log) == 1)
    trainer.put_batch(batches[1])
    errors = []
    blocked = threading.Thread(target=lambda: _capture(errors, trainer.put_batch, batches[2]), daemon=True)
    blocked.start()

    def explode(batch):
        raise FloatingPointError("late failure")

    model.compute_gradients = explode  # batch 1 fails once batch 0 is done
    model.gate.set()
    blocked.join(10)
    assert not blocked.is_alive() and len(errors) == 1 and isinstance(errors[0], TrainerFailed)


def _capture(errors, function, *args):
    try:
        function(*args)
    except Exception as err:
        errors.append(err)


def test_two_bounded_replicas_on_trainer_threads_keep_the_bound_and_train_every_batch(trainer_factory):
    bound = 1
    replicas = [Replica(r, LinearModel(3, seed=0), replicas=2, staleness_bound=bound) for r in range(2)]
    trainers = [trainer_factory(r, max_waiting_batches=1) for r in replicas]
    batches = make_regression_batches(20, 3, seed=4)
    events = {0: [], 1: []}

    def pump():
        for r, trainer in enumerate(trainers):
            for event in trainer.take():
                events[r].append(event)
                if isinstance(event, Broadcast):
                    trainers[1 - r].put_message(event.message)

    for i, batch in enumerate(batches):
        trainers[i % 2].put_batch(batch)
        pump()
    for trainer in trainers:
        trainer.put_end()
    _wait_for(lambda: (pump(), all(r.finished for r in replicas))[1])
    pump()
    trained = sorted(e.batch_id for r in events for e in events[r] if isinstance(e, Prediction))
    assert trained == list(range(20))
    assert max(e.staleness for r in events for e in events[r] if isinstance(e, Metrics) and e.phase == "batch") <= bound
    assert all(isinstance(events[r][-1], FinalModel) for r in events)
    assert sum(r.bound_overflows for r in replicas) == 0


def test_bad_max_waiting_batches_is_refused():
    with pytest.raises(ConfigError, match="max_waiting_batches must be an int >= 1"):
        TrainerThread(Replica(0, LinearModel(3)), max_waiting_batches=0)
