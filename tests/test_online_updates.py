"""Model updates (pyflink_tensair.core.updates): what replica 0 publishes, and what a server's view makes of it."""

import numpy as np
import pytest

from pyflink_tensair import ConfigError, TrainConfig, WireFormatError, simulate
from pyflink_tensair.config import ModelUpdates
from pyflink_tensair.core.messages import SparseGradient
from pyflink_tensair.core.updates import ModelView, UpdatePublisher, decode_update, encode_update
from pyflink_tensair.testing import LinearModel, make_regression_batches


class DictModel:
    """A model that is its weights: set_weights takes arrays and SparseGradient rows."""

    def __init__(self, weights):
        self.weights = {k: np.array(v, copy=True) for k, v in weights.items()}

    def set_weights(self, weights):
        for name, value in weights.items():
            if isinstance(value, SparseGradient):
                self.weights[name][value.indices] = value.values
            else:
                self.weights[name] = np.array(value, copy=True)


def table_weights(seed=0, rows=200):
    rng = np.random.default_rng(seed)
    return {"table": rng.normal(size=(rows, 4)).astype(np.float32), "dense": rng.normal(size=(4, 3)).astype(np.float32)}


def wired(update):
    return decode_update(encode_update(update))


def test_deltas_carry_only_changed_table_rows_and_a_view_follows_them():
    weights = table_weights()
    publisher = UpdatePublisher(ModelUpdates(every_ms=1, snapshot_every=3))
    view = ModelView(DictModel({k: np.zeros_like(v) for k, v in weights.items()}))
    first = wired(publisher.publish(weights, 1, 0.0))
    assert first.snapshot and set(first.dense) == {"table", "dense"} and view.apply(first)
    weights["table"][[5, 17]] += 1.0
    weights["dense"] += 0.5
    second = wired(publisher.publish(weights, 2, 10.0))
    assert not second.snapshot and second.base == 1
    assert set(second.dense) == {"dense"} and second.rows["table"].indices.tolist() == [5, 17]
    assert second.nbytes < first.nbytes / 10
    assert view.apply(second) and view.version == 2
    for name in weights:
        np.testing.assert_array_equal(view.model.weights[name], weights[name])
    weights["table"][:150] -= 1.0  # most rows changed: the table goes whole
    third = wired(publisher.publish(weights, 3, 20.0))
    assert "table" in third.dense and not third.rows
    assert wired(publisher.publish(weights, 4, 30.0)).snapshot  # every third update


def test_a_view_that_missed_a_delta_waits_for_the_next_snapshot():
    weights = table_weights()
    publisher = UpdatePublisher(ModelUpdates(every_ms=1, snapshot_every=3))
    updates = []
    for version in range(1, 5):
        weights["table"][version] += 1.0
        updates.append(publisher.publish(weights, version, float(version)))
    view = ModelView(DictModel(table_weights(seed=1)))
    assert view.apply(updates[0]) and not view.apply(updates[2]) and view.skipped == 1
    assert view.version == 1
    assert view.apply(updates[3]) and updates[3].snapshot and view.version == 4
    np.testing.assert_array_equal(view.model.weights["table"], weights["table"])


def test_replica_zero_publishes_by_time_and_steps_and_a_view_ends_at_its_final_model():
    batches = make_regression_batches(40, 3)
    config = TrainConfig(replicas=2, staleness_bound=0, updates=ModelUpdates(every_ms=1e9, every_steps=5))
    result = simulate(lambda r: LinearModel(3, seed=0), batches, config)
    updates = [wired(u) for u in result.updates]
    assert {u.replica for u in updates} == {0} and updates[0].snapshot
    versions = [u.version for u in updates]
    assert versions == sorted(versions) and versions[-1] == result.final_models[0].model_version
    assert all(b - a <= 5 for a, b in zip(versions, versions[1:]))
    assert sum(len(u.steps) for u in updates) == result.replicas[0].local_step  # every own step, once
    view = ModelView(LinearModel(3, seed=7))
    assert all(view.apply(u) for u in updates)
    for name, value in result.final_models[0].weights.items():
        np.testing.assert_array_equal(view.model.get_weights()[name], value)
    served = view.served(updates[-1].time_ms + 25.0)
    assert len(served) == result.replicas[0].local_step and served[:, 1].min() >= 25.0
    # each own step's version, in order; the last update's version may also count a peer's gradient after it
    assert np.all(np.diff(served[:, 0]) > 0) and versions[-1] - 2 < served[-1, 0] <= versions[-1]
    assert len(view.served(updates[-1].time_ms + 30.0)) == 0  # each step counts once


def test_without_updates_nothing_is_published_and_bad_settings_are_refused():
    result = simulate(lambda r: LinearModel(3, seed=0), make_regression_batches(4, 3), TrainConfig())
    assert result.updates == [] and result.replicas[0].update_due_in_s() is None
    with pytest.raises(ConfigError, match="ModelUpdates.every_ms"):
        ModelUpdates(every_ms=0)
    with pytest.raises(ConfigError, match="snapshot_every"):
        ModelUpdates(snapshot_every=0)
    with pytest.raises(ConfigError, match="updates must be a ModelUpdates"):
        TrainConfig(updates=5)
    with pytest.raises(WireFormatError, match="not a model update"):
        from pyflink_tensair.core import wire
        decode_update(wire.encode_tensors({"w": np.zeros(2)}, {"replica": 0}))
