"""Model export while training (``TrainConfig.exports``, the jobs' ``--exports-every-s``)."""

import argparse
import functools
import os

import numpy as np
import pytest

from pyflink_tensair import ConfigError, Exports
from pyflink_tensair.cli import flags
from pyflink_tensair.models.export import ModelExporter, exported_models, latest_export


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class _Model:
    def save(self, path):
        open(path, "wb").write(b"a model")


def test_exports_are_due_once_per_interval_counted_from_the_last_export(tmp_path):
    clock = _Clock()
    exporter = ModelExporter(str(tmp_path), every_s=5.0, clock=clock)
    assert not exporter.due()
    clock.now += 5.0
    assert exporter.due() and not exporter.due()  # pending: nothing more is due until it is written
    clock.now += 60.0  # a slow export
    assert not exporter.due()
    exporter.export(_Model(), version=1)
    clock.now += 4.9
    assert not exporter.due()
    clock.now += 0.1
    assert exporter.due()


def test_exports_of_a_lost_run_are_discarded_after_a_restore(tmp_path):
    exporter = ModelExporter(str(tmp_path), every_s=1.0)
    for version in (10, 20, 30):
        exporter.export(_Model(), version=version)
    assert [os.path.basename(p) for p in exporter.discard_after(20)] == ["model-v000000030.keras"]
    assert [v for v, _ in exported_models(str(tmp_path))] == [10, 20]


def test_an_unwritable_export_folder_is_refused_before_training(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match=r"cannot create the export folder .*Not a directory.*--exports-dir"):
        ModelExporter(str(blocker / "exports"), every_s=1.0).check_folder()
    ModelExporter(str(tmp_path / "new" / "exports"), every_s=1.0).check_folder()
    assert (tmp_path / "new" / "exports").is_dir()


def test_an_export_is_written_whole_under_its_version_and_replaces_the_same_version(tmp_path):
    import keras

    from pyflink_tensair.models import zoo

    exporter = ModelExporter(str(tmp_path / "exports"), every_s=1.0)
    model = zoo.quickstart_classifier(features=3, classes=2)
    exporter.export(model, version=12)
    exporter.export(model, version=3)
    model.layers[-1].set_weights([w + 1.0 for w in model.layers[-1].get_weights()])
    exporter.export(model, version=12)  # a retrained version after a restore
    assert [v for v, _ in exported_models(str(tmp_path / "exports"))] == [3, 12]
    assert sorted(os.listdir(tmp_path / "exports")) == ["model-v000000003.keras", "model-v000000012.keras"]
    loaded = keras.models.load_model(latest_export(str(tmp_path / "exports")))
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_failed_export_leaves_no_partial_file(tmp_path):
    class Failing:
        def save(self, path):
            open(path, "wb").write(b"half a zip")
            raise OSError("disk full")

    maps = {"t": {"layers": ["e"], "rows": 3, "ids": [["a", 1]]}}
    with pytest.raises(OSError, match="disk full"):
        ModelExporter(str(tmp_path), every_s=1.0).export(Failing(), version=1, id_maps=maps)
    assert os.listdir(tmp_path) == [] and latest_export(str(tmp_path)) is None
    exporter = ModelExporter(str(tmp_path), every_s=1.0)
    exporter.export(_Model(), version=2, id_maps=maps)
    assert sorted(os.listdir(tmp_path)) == ["model-v000000002.ids.json", "model-v000000002.keras"]
    with pytest.raises(OSError, match="disk full"):  # the same version again, failing: the old pair stays
        exporter.export(Failing(), version=2, id_maps={"t": {"layers": ["e"], "rows": 3, "ids": [["b", 1]]}})
    assert sorted(os.listdir(tmp_path)) == ["model-v000000002.ids.json", "model-v000000002.keras"]
    assert "a" in open(tmp_path / "model-v000000002.ids.json").read()
    exporter.export(_Model(), version=2)  # the same version again, a model without id tables: no stale maps
    assert os.listdir(tmp_path) == ["model-v000000002.keras"]


@pytest.mark.parametrize("every", [0, -1.0, True, "5"])
def test_the_interval_must_be_positive(every):
    with pytest.raises(ConfigError, match="export interval must be a number of seconds > 0"):
        ModelExporter("x", every_s=every)


def _job_args(*argv):
    parser = argparse.ArgumentParser()
    flags.add_job_arguments(parser, batches=10, batch_size=8)
    return parser.parse_args(list(argv))


def test_the_export_flags_make_the_config(tmp_path):
    config = flags.config_from_args(_job_args("--exports-every-s", "2.5", "--outdir", str(tmp_path), "--checkpoints-interval-s", "none"))
    assert config.exports == Exports(every_s=2.5, dir=os.path.join(str(tmp_path), "exports"))
    config = flags.config_from_args(_job_args("--exports-every-s", "1", "--exports-dir", "rel/dir", "--checkpoints-interval-s", "none"))
    assert config.exports.dir == os.path.abspath("rel/dir")  # the TaskManagers' working folder is another
    assert flags.config_from_args(_job_args("--checkpoints-interval-s", "none")).exports is None
    with pytest.raises(ConfigError, match="--exports-dir needs --exports-every-s"):
        flags.config_from_args(_job_args("--exports-dir", "d"))


@pytest.mark.flink
def test_every_export_predicts_what_its_replica_predicted_at_that_version(tmp_path):
    """One replica, paced: an export at version v is the model that predicted the next batch."""
    pytest.importorskip("pyflink")
    import keras

    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import TrainConfig, train
    from pyflink_tensair.datasets.teacher import teacher_classification_batch
    from pyflink_tensair.flink import types
    from pyflink_tensair.flink.sinks import write_json_lines, write_records
    from pyflink_tensair.flink.sources import batch_source

    from flink_harness import CLASSES, FEATURES, MODEL, read_results

    make_batch = functools.partial(teacher_classification_batch, batch_size=32, features=FEATURES, classes=CLASSES, seed=0)

    folder, out = tmp_path / "exports", tmp_path / "out"
    # Exports every 0.05 s: the paced source starts while the replica still loads TensorFlow, so the
    # batches may all arrive at once (40 steps in 0.45 s here): a longer interval found one export in the burst.
    config = TrainConfig(replicas=1, exports=Exports(every_s=0.05, dir=str(folder)), name="export")
    env = StreamExecutionEnvironment.get_execution_environment()
    trained = train(batch_source(env, 40, make_batch, rate=8.0, name="export"), model=MODEL, config=config)
    write_json_lines(trained.metrics, str(out), "metrics", name="export")
    write_records(trained.models, str(out), "model", name="export")
    from pyflink.common import Types

    write_json_lines(trained.predictions.map(types.prediction_json, output_type=Types.STRING()).name("json").uid("json"),
                     str(out), "predictions", name="export")
    env.execute("export job")
    result = read_results(out)

    exports = exported_models(str(folder))
    assert sorted(os.listdir(folder)) == [os.path.basename(p) for _, p in exports]  # no partial file left
    versions = [v for v, _ in exports]
    assert len(versions) >= 3 and 0 < versions[0] < 40  # while it trained, not only at the end
    assert versions[-1] == result.models[0].model_version == 40  # the final model is exported too
    by_version = {p["model_version"]: p for p in result.predictions}
    checked = 0
    for version, path in exports:
        model = keras.models.load_model(path)  # safe mode
        if version in by_version:  # the batch trained right after the export
            p = by_version[version]
            np.testing.assert_array_equal(model.predict(make_batch(p["batch_id"]).x, verbose=0),
                                          np.array(p["predictions"], np.float32))
            checked += 1
    assert checked == len(exports) - 1
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter

    final = KerasModelAdapter(keras.models.load_model(exports[-1][1])).get_weights()
    assert sorted(final) == sorted(result.models[0].weights)
    for name, value in result.models[0].weights.items():
        np.testing.assert_array_equal(final[name], value)
