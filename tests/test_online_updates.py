"""Model updates (pyflink_tensair.core.model_updates): what replica 0 publishes, and what a server's view makes of it."""

import dataclasses

import numpy as np
import pytest

from pyflink_tensair import ConfigError, TrainConfig, WireFormatError, simulate
from pyflink_tensair.config import ModelUpdates
from pyflink_tensair.core.messages import SparseGradient
from pyflink_tensair.core.model_updates import ModelView, UpdatePublisher, decode_update, encode_update
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


def test_updates_carry_the_id_maps_whole_in_snapshots_and_rows_that_changed_hands_in_deltas():
    from pyflink_tensair.core.row_resets import Reassignment, RowResets, TableNotices

    def reassign(rows, *changes):
        rows.apply({"user": TableNotices(200, ("user_embedding",), tuple(Reassignment(*c) for c in changes))}, None)

    rows, weights = RowResets(), table_weights()
    reassign(rows, (1, 1, "a"), (2, 1, "b"))
    publisher = UpdatePublisher(ModelUpdates(every_ms=1, snapshot_every=3))
    view = ModelView(DictModel({k: np.zeros_like(v) for k, v in weights.items()}))
    assert view.rows_of("user", ["a"]).tolist() == [0]  # no map yet: every id reads row 0
    first = wired(publisher.publish(weights, 1, 0.0, rows))
    assert first.ids == {"user": {"rows": 200, "ids": [["a", 1], ["b", 2]]}} and view.apply(first)
    assert view.rows_of("user", ["b", "a", "zz"]).tolist() == [2, 1, 0]
    reassign(rows, (1, 2, "c"))  # row 1 goes from "a" to "c"
    second = wired(publisher.publish(weights, 2, 10.0, rows))
    assert second.ids == {"user": {"rows": 200, "ids": [["c", 1]]}} and view.apply(second)
    assert view.rows_of("user", ["a", "b", "c"]).tolist() == [0, 2, 1]
    assert wired(publisher.publish(weights, 3, 20.0, rows)).ids == {}  # nothing changed hands
    fourth = wired(publisher.publish(weights, 4, 30.0, rows))
    assert fourth.snapshot and fourth.ids == {"user": {"rows": 200, "ids": [["c", 1], ["b", 2]]}}
    late = ModelView(DictModel({k: np.zeros_like(v) for k, v in weights.items()}))
    assert not late.apply(second) and late.apply(fourth)  # a view that starts late takes the snapshot's map
    assert late.rows_of("user", ["a", "b", "c"]).tolist() == [0, 2, 1]
    for ids in ({"user": {"rows": 200, "ids": [["c", 900]]}}, {"user": {"ids": [["c", 1]]}},
                {"user": {"rows": 200, "ids": [[1.5, 1]]}}, {"user": [1]}):
        with pytest.raises(WireFormatError, match="id maps are malformed"):
            decode_update(encode_update(dataclasses.replace(fourth, ids=ids)))


def test_a_server_answers_events_of_ids_through_the_map_its_updates_carry():
    import functools
    import json
    import struct

    from pyflink_tensair import ServeConfig, json_event
    from pyflink_tensair.core.model_updates import ModelUpdate
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model
    from pyflink_tensair.online.serving import UpdatedServer

    class Context:
        def get_index_of_this_subtask(self):
            return 0

    build = functools.partial(zoo.click_model, users=11, items=11, dim=4, hidden=4)
    server = UpdatedServer(build, json_event, ServeConfig(python_in="jvm"))
    server.open(Context())
    trained = load_model(build, seed=5)  # other weights than the server's own start
    maps = {"user": {"rows": 11, "ids": [["u1", 3], ["u2", 7]]}, "item": {"rows": 11, "ids": [["i1", 2]]}}
    update = ModelUpdate(1, -1, 0, 0, 0.0, dense=KerasModelAdapter(trained).get_weights(), ids=maps)
    assert list(server._update(encode_update(update))) == [] and server._view.version == 1
    events = [{"id": "e1", "x": {"user": "u1", "item": "i1"}}, {"id": "e2", "x": {"user": "u2", "item": "nope"}},
              {"id": "e3", "x": {"user": "u1"}}, {"id": "e4", "x": {"user": 1.5, "item": "i1"}},
              {"id": "e5", "x": [1.0, 2.0]}]
    out = list(server._answer(["0", "0", *map(json.dumps, events)]))
    letters = [json.loads(o[1]) for o in out if isinstance(o, tuple)]
    assert [(d["position"], d["reason"]) for d in letters] == [(2, "not_a_record"), (3, "not_a_record"),
                                                              (4, "not_a_record")]
    assert "an id is a string or an integer" in letters[1]["detail"] and "one id for each of" in letters[0]["detail"]
    (answers,) = [o for o in out if isinstance(o, bytes)]
    n, width, version, _, _ = struct.unpack_from("<iiqqq", answers)
    assert (n, width, version) == (2, 1, 1)
    expected = trained.predict_on_batch({"user": np.array([3, 7], np.int32), "item": np.array([2, 0], np.int32)})
    np.testing.assert_allclose(np.frombuffer(answers[-16:], "<f8"), expected[:, 0], rtol=1e-5)


def test_events_of_a_model_of_ids_are_parsed_where_the_maps_are_even_with_one_id_input():
    import json

    import keras

    from pyflink_tensair import ServeConfig, json_event
    from pyflink_tensair.online.serving import UpdatedServer

    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model
    from pyflink_tensair.online.serving import _jvm_parse_shape

    def one_id():
        user = keras.Input((), dtype="int32", name="user")
        model = keras.Model(user, keras.layers.Dense(1)(keras.layers.Embedding(11, 2)(user)))
        model.compile(optimizer="sgd", loss="mse")
        return model

    def features():
        x = keras.Input((3,))
        model = keras.Model(x, keras.layers.Dense(1)(x))
        model.compile(optimizer="sgd", loss="mse")
        return model

    class Context:
        def get_index_of_this_subtask(self):
            return 0

    assert _jvm_parse_shape(KerasModelAdapter(load_model(one_id, seed=0))) is None  # the JVM has no id maps
    assert _jvm_parse_shape(KerasModelAdapter(load_model(features, seed=0))) == (3,)
    server = UpdatedServer(one_id, json_event, ServeConfig(python_in="jvm"))
    server.open(Context())
    out = list(server._answer(["0", "0", json.dumps({"id": "e0", "x": 4})]))  # no maps yet: row numbers
    (answers,) = [o for o in out if isinstance(o, bytes)]
    expected = server._adapter.model.predict_on_batch(np.array([4], np.int32))
    np.testing.assert_allclose(np.frombuffer(answers[-8:], "<f8"), expected[:, 0], rtol=1e-5)
    server._view.set_maps({"user": {"u1": 3}})
    out = list(server._answer(["0", "0", json.dumps({"id": "e1", "x": {"user": "u1"}}),
                               json.dumps({"id": "e2", "x": {"user": "nope"}})]))
    (answers,) = [o for o in out if isinstance(o, bytes)]
    expected = server._adapter.model.predict_on_batch(np.array([3, 0], np.int32))
    np.testing.assert_allclose(np.frombuffer(answers[-16:], "<f8"), expected[:, 0], rtol=1e-5)
