"""The model as a vectorized SQL function (pyflink_tensair.online.udf): a folder of model updates
followed in the order written, from the newest snapshot on; and ``SELECT tensair_predict(...)``
answering with the newest weights in a local mini-cluster."""

import os

import numpy as np
import pytest

from pyflink_tensair.config import ModelUpdates
from pyflink_tensair.core.model_updates import ModelView, UpdatePublisher, encode_update
from pyflink_tensair.online.udf import UpdatesFollower

FEATURES = 20


class DictModel:
    def __init__(self, weights):
        self.weights = {k: np.array(v) for k, v in weights.items()}

    def set_weights(self, weights):
        for name, value in weights.items():
            self.weights[name] = np.array(value)


def write_updates(folder, weights_by_version, snapshot_every=2):
    """Publishes ``weights_by_version`` (version 1, 2, ...) and writes each update as its own file,
    in order (distinct modification times)."""
    publisher = UpdatePublisher(ModelUpdates(every_ms=1, snapshot_every=snapshot_every))
    updates = []
    for version, weights in enumerate(weights_by_version, start=1):
        publisher.note_step(version, 1000.0 * version)
        update = publisher.publish(weights, version, 1000.0 * version)
        path = os.path.join(folder, f"update-0-{version:06d}.bin")
        with open(path, "wb") as f:
            f.write(encode_update(update))
        os.utime(path, ns=(version * 10**9, version * 10**9))
        updates.append(update)
    return updates


def test_a_follower_applies_new_files_in_order_and_a_late_one_starts_at_the_newest_snapshot(tmp_path):
    versions = [{"w": np.full(3, float(v))} for v in range(1, 6)]
    updates = write_updates(str(tmp_path), versions[:3])
    assert [u.snapshot for u in updates] == [True, False, True]
    early = UpdatesFollower(ModelView(DictModel({"w": np.zeros(3)})), str(tmp_path), poll_ms=0)
    assert early.poll(now=0.0) == 1 and early.view.version == 3  # the late start: snapshot 3 only
    for version in (4, 5):  # the trainer goes on (restarted: snapshots)
        update = UpdatePublisher(ModelUpdates(every_ms=1, snapshot_every=1)).publish(versions[version - 1], version,
                                                                                     1000.0 * version)
        path = tmp_path / f"update-0-{version:06d}.bin"
        path.write_bytes(encode_update(update))
        os.utime(path, ns=(version * 10**9, version * 10**9))
    assert early.poll(now=1.0) == 2 and early.view.version == 5
    np.testing.assert_array_equal(early.view.model.weights["w"], np.full(3, 5.0))
    assert early.poll(now=2.0) == 0  # nothing new


@pytest.mark.flink
def test_the_sql_function_answers_with_the_newest_weights_of_the_folder(tmp_path):
    pytest.importorskip("pyflink")
    from pyflink.table import EnvironmentSettings, TableEnvironment

    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter
    from pyflink_tensair.online.udf import predict_function

    reference = zoo.quickstart_classifier()
    adapter = KerasModelAdapter(reference)
    start = adapter.get_weights()
    versions = [{name: value * (1.0 + 0.1 * v) for name, value in start.items()} for v in range(1, 4)]
    write_updates(str(tmp_path), versions)
    adapter.set_weights(versions[-1])
    rows = [[((i * 3 + j) % 7) / 7.0 for j in range(FEATURES)] for i in range(12)]
    expected = np.asarray(reference.predict_on_batch(np.asarray(rows, np.float32)), np.float64)

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("parallelism.default", "1")
    names = [f"f{j}" for j in range(FEATURES)]
    t_env.create_temporary_view("events", t_env.from_elements([(i, *r) for i, r in enumerate(rows)], ["id", *names]))
    t_env.create_temporary_function("tensair_predict", predict_function(
        zoo.quickstart_classifier, features=FEATURES, updates_folder=str(tmp_path), freshness_folder=str(tmp_path)))
    result = t_env.sql_query(f"SELECT id, tensair_predict({', '.join(names)}) AS p FROM events")
    with result.execute().collect() as results:
        answered = {row[0]: np.asarray(row[1]) for row in results}
    assert sorted(answered) == list(range(12))
    np.testing.assert_allclose(np.stack([answered[i] for i in range(12)]), expected, rtol=1e-5, atol=1e-6)
    assert list(tmp_path.glob("udf-freshness-*.jsonl"))  # the first batch used version 3: its steps' freshness
