"""The Keras adapter: separate compute/apply, sparse embedding gradients, state, model sources."""

import dataclasses
import functools

import numpy as np
import pytest

keras = pytest.importorskip("keras")
import tensorflow as tf  # noqa: E402

from pyflink_tensair import ModelError, TrainConfig  # noqa: E402
from pyflink_tensair.core import Batch, SparseGradient  # noqa: E402
from pyflink_tensair.core.events import weights_digest  # noqa: E402
from pyflink_tensair.core.gradients import average_gradients, dense_nbytes  # noqa: E402
from pyflink_tensair.core import wire  # noqa: E402
from pyflink_tensair.core.messages import GradientMessage  # noqa: E402
from pyflink_tensair.models import zoo  # noqa: E402
from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model  # noqa: E402
from pyflink_tensair.testing import simulate  # noqa: E402

VOCAB, DIM, LENGTH = 5000, 16, 8


def _embedding_model(**kwargs):
    return KerasModelAdapter(load_model(functools.partial(zoo.embedding_classifier, vocabulary=VOCAB, dim=DIM,
                                                          length=LENGTH, **kwargs), seed=0))


def _token_batch(seed=0, size=32):
    rng = np.random.default_rng(seed)
    return Batch(rng.integers(0, 200, size=(size, LENGTH)).astype(np.int32), rng.integers(0, 2, size=size))


def test_embedding_gradient_is_sparse_unique_ascending_and_equals_the_dense_gradient():
    model = _embedding_model()
    batch = _token_batch()
    grads = model.compute_gradients(batch).gradients
    sparse = grads["000"]
    assert isinstance(sparse, SparseGradient)
    np.testing.assert_array_equal(sparse.indices, np.unique(batch.x))  # every touched row once, ascending
    with tf.GradientTape() as tape:
        loss = model.model.compute_loss(y=batch.y, y_pred=model.model(batch.x, training=True))
    dense = tf.convert_to_tensor(tape.gradient(loss, model.model.trainable_variables)[0]).numpy()
    np.testing.assert_allclose(sparse.to_dense(), dense, atol=1e-7)
    fused = model.train_step(batch).gradients["000"]  # the fused step sends the same rows
    np.testing.assert_array_equal(fused.indices, sparse.indices)
    np.testing.assert_array_equal(fused.values, sparse.values)


def test_sparse_message_carries_only_touched_rows():
    model = _embedding_model()
    grads = model.compute_gradients(_token_batch()).gradients
    message = wire.encode_message(GradientMessage(0, 1, 1, grads))
    table_bytes = VOCAB * DIM * 4
    print(f"\nsparse gradient message: {len(message)} bytes on the wire; dense gradients: {dense_nbytes(grads)} bytes")
    assert dense_nbytes(grads) > table_bytes
    assert len(message) < sum(g.nbytes for g in grads.values()) + 2048  # header overhead only
    assert len(message) < table_bytes / 10


def test_applying_a_sparse_gradient_changes_only_touched_rows():
    model = _embedding_model()
    result = model.compute_gradients(_token_batch())
    before = model.get_weights()["000"].copy()
    model.apply_gradients(result.gradients)
    changed = np.flatnonzero(np.any(model.get_weights()["000"] != before, axis=1))
    np.testing.assert_array_equal(changed, np.sort(result.gradients["000"].indices))


def test_compute_does_not_apply_and_apply_uses_the_optimizer():
    model = KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0))
    batch = Batch(np.ones((4, 20), np.float32), np.array([0, 1, 2, 3]))
    before = model.get_weights()
    result = model.compute_gradients(batch)
    assert weights_digest(before) == weights_digest(model.get_weights())
    assert result.predictions.shape == (4, 4) and result.loss > 0
    # the step's own figures are those of its predictions: one of four labels right is 0.25, and so on
    labels = np.array([0, 1, 2, 3])
    assert result.accuracy == pytest.approx(np.mean(result.predictions.argmax(axis=1) == labels))
    expected_loss = -np.mean(np.log(result.predictions[np.arange(4), labels]))
    assert result.loss == pytest.approx(expected_loss, rel=1e-4)
    model.apply_gradients(result.gradients)
    assert weights_digest(before) != weights_digest(model.get_weights())
    assert int(model.model.optimizer.iterations.numpy()) == 1


def test_state_round_trip_includes_optimizer_slots():
    model = KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0))
    batch = Batch(np.ones((4, 20), np.float32), np.array([0, 1, 2, 3]))
    model.apply_gradients(model.compute_gradients(batch).gradients)
    state = model.get_state()
    assert any(key.startswith("optimizer/") and "momentum" in key for key in state)
    other = KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=1))
    other.set_state(state)
    for a, b in ((model, other),):
        a.apply_gradients(a.compute_gradients(batch).gradients)
        b.apply_gradients(b.compute_gradients(batch).gradients)
        for name, value in a.get_weights().items():
            np.testing.assert_array_equal(value, b.get_weights()[name])


def test_same_seed_gives_same_initial_weights_and_other_seeds_do_not():
    digest = lambda seed: weights_digest(KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=seed)).get_weights())
    assert digest(0) == digest(0) != digest(1)


def test_a_saved_keras_file_continues_training_from_its_weights(tmp_path):
    trained = load_model(zoo.quickstart_classifier, seed=3)
    path = tmp_path / "pretrained.keras"
    trained.save(path)
    loaded = KerasModelAdapter(load_model(str(path), seed=0))
    expected = KerasModelAdapter(trained).get_weights()
    for name, value in loaded.get_weights().items():
        np.testing.assert_array_equal(value, expected[name])


def _uncompiled():
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])


def _broken():
    raise RuntimeError("boom")


@pytest.mark.parametrize("model, message", [
    (_uncompiled, "must be compiled with an optimizer and a loss"),
    (lambda: 42, "must return a keras.Model"),
    (_broken, "failed: RuntimeError('boom')"),
    ("missing.keras", "does not exist"),
    ("model.h5", "path to a .keras file"),
    (3, "must be a function returning a compiled keras.Model"),
])
def test_bad_model_arguments_raise_model_errors(model, message):
    with pytest.raises(ModelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_model(model)


def test_synchronous_replicas_match_a_plain_sequential_run_of_averaged_gradients():
    rng = np.random.default_rng(4)
    batches = [Batch(rng.normal(size=(16, 20)).astype(np.float32), rng.integers(0, 4, 16), {"id": i}) for i in range(12)]
    result = simulate(lambda r: KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0)), batches,
                      TrainConfig(replicas=3, staleness_bound=0), delivery_delay=2)
    reference = KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0))
    for step in range(4):
        grads = [reference.compute_gradients(b).gradients for b in batches[3 * step:3 * step + 3]]
        reference.apply_gradients(average_gradients(grads))
    assert result.replica_max_weight_diff() == 0.0
    for name, value in reference.get_weights().items():
        np.testing.assert_allclose(result.final_models[0].weights[name], value, atol=1e-6)


def test_apply_sgd_is_a_plain_step_that_leaves_the_optimizer_alone():
    for model, batch in ((_embedding_model(), _token_batch()),
                         (KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0)),
                          Batch(np.ones((4, 20), np.float32), np.array([0, 1, 2, 3])))):
        before = model.get_weights()
        grads = model.compute_gradients(batch).gradients
        model.apply_sgd(grads, 0.25)
        for name, value in model.get_weights().items():
            grad = grads[name].to_dense() if isinstance(grads[name], SparseGradient) else grads[name]
            np.testing.assert_allclose(value, before[name] - 0.25 * grad, atol=1e-7)
        assert int(model.model.optimizer.iterations.numpy()) == 0


def test_the_averaged_model_holds_the_mean_of_the_replicas_weights():
    from pyflink_tensair import averaged_keras_model
    from pyflink_tensair.core.events import FinalModel
    from pyflink_tensair.flink.types import encode_final_model

    a, b = (KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=s)).get_weights() for s in (0, 1))
    records = [encode_final_model(FinalModel(1, 7, b)), FinalModel(0, 9, a)]  # bytes or decoded, any order
    averaged = KerasModelAdapter(averaged_keras_model(records, zoo.quickstart_classifier)).get_weights()
    for name in a:
        np.testing.assert_allclose(averaged[name], (a[name] + b[name]) / 2, rtol=1e-6)
    with pytest.raises(ModelError, match="no final model to average"):
        averaged_keras_model([], zoo.quickstart_classifier)


def test_the_fused_step_can_be_turned_off_for_before_after_measurements(monkeypatch):
    from pyflink_tensair.core import Replica
    from pyflink_tensair.models.keras_adapter import FUSED_STEP_VARIABLE

    batch = Batch(np.ones((4, 20), np.float32), np.array([0, 1, 2, 3]))
    fused = Replica(0, KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0)), replicas=2)
    monkeypatch.setenv(FUSED_STEP_VARIABLE, "0")
    unfused = Replica(0, KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0)), replicas=2)
    assert unfused.model.train_step is None and callable(fused.model.train_step)
    for replica in (fused, unfused):
        replica.on_batch(batch)
    for name, value in fused.model.get_weights().items():  # the same step either way, bit for bit
        np.testing.assert_array_equal(value, unfused.model.get_weights()[name])


# ---------------------------------------------------------------- guards (issue 13)

def test_a_step_whose_gradient_is_not_finite_is_not_applied():
    model = KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0))
    before = model.get_state()
    huge = Batch(np.full((8, 20), 3e38, np.float32), np.zeros(8, np.int64))
    for result in (model.train_step(huge), model.train_step(huge, return_gradients=False), model.compute_gradients(huge)):
        assert result.finite is False
    after = model.get_state()
    assert all(np.array_equal(before[k], after[k]) for k in before)  # weights and Adam's slots and step count
    assert model.train_step(Batch(np.ones((8, 20), np.float32), np.zeros(8, np.int64))).finite is True


def test_a_batch_tensorflow_refuses_raises_batch_rejected_and_changes_nothing():
    from pyflink_tensair.errors import BatchRejectedError

    model = KerasModelAdapter(load_model(functools.partial(zoo.word2vec, vocabulary=50, dim=4), seed=0))
    before = model.get_weights()
    batch = Batch({"target": np.array([1, 70], np.int32), "context": np.zeros((2, 5), np.int32)}, np.zeros((2, 5), np.float32))
    with pytest.raises(BatchRejectedError, match=r"indices\[1\] = 70 is not in \[0, 50\)"):
        model.train_step(batch)
    with pytest.raises(BatchRejectedError, match=r"is not in \[0, 50\)"):
        model.train_step(batch, return_gradients=False)
    assert all(np.array_equal(before[k], v) for k, v in model.get_weights().items())


def test_batch_spec_names_the_inputs_their_integer_kinds_and_the_classes():
    from pyflink_tensair.core.guards import BatchSpec

    assert KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0)).batch_spec() == BatchSpec({None: (20,)}, frozenset(), 4)
    spec = KerasModelAdapter(load_model(functools.partial(zoo.word2vec, vocabulary=50, dim=4), seed=0)).batch_spec()
    assert spec == BatchSpec({"target": (), "context": (5,)}, frozenset({"target", "context"}), None)
    assert KerasModelAdapter(load_model(zoo.digits_cnn, seed=0)).batch_spec().inputs == {None: (8, 8, 1)}


def test_a_keras_replica_sets_aside_what_its_model_refuses_and_goes_on():
    from pyflink_tensair import DeadLetter
    from pyflink_tensair.core.replica import Replica

    model = KerasModelAdapter(load_model(functools.partial(zoo.word2vec, vocabulary=50, dim=4), seed=0))
    replica = Replica(0, model)
    bad = Batch({"target": np.array([1, 70], np.int32), "context": np.zeros((2, 5), np.int32)}, np.zeros((2, 5), np.float32), {"id": 4})
    events = replica.on_batch(bad)
    assert [(type(e), e.reason, e.position) for e in events] == [(DeadLetter, "rejected_by_model", 4)]
    good = dataclasses.replace(bad, x={"target": np.array([1, 7], np.int32), "context": np.zeros((2, 5), np.int32)})
    replica.on_batch(good)
    assert (replica.local_step, replica.dead_letters) == (1, 1)


def test_train_refuses_a_sample_batch_the_model_does_not_fit_before_the_job_starts():
    from pyflink_tensair.flink.training import check_sample

    model = load_model(functools.partial(zoo.quickstart_classifier, features=20, classes=4))
    config = TrainConfig()
    check_sample(model, Batch(np.zeros((8, 20), np.float32), np.arange(8) % 4), config)
    with pytest.raises(ModelError, match=r"label_out_of_range.*classes 0 \.\. 3 of the model; found 0 \.\. 7"):
        check_sample(model, Batch(np.zeros((8, 20), np.float32), np.arange(8) % 10), config)
    with pytest.raises(ModelError, match=r"wrong_shape.*rows of shape \(8, 8, 1\); the model takes \(20,\)"):
        check_sample(model, Batch(np.zeros((8, 8, 8, 1), np.float32), np.zeros(8, np.int64)), config)
