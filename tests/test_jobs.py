"""The jobs in jobs/ as a person runs them: `python jobs/X.py ...` on a local mini-cluster."""

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import cluster  # noqa: E402
from pyflink_tensair.datasets.teacher import encoded_teacher_batch  # noqa: E402
from pyflink_tensair.models import zoo  # noqa: E402

from flink_harness import read_results, run_job_here, sequential_reference  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.flink


def _run(script, *args, timeout=600):
    """The job as a person runs it: a process of its own."""
    return subprocess.run([sys.executable, os.path.join(ROOT, "jobs", script), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=cluster.client_environment())


def _run_here(script, *args):
    """The job's main(argv) in this process (flink_harness.run_job_here): the same job without a
    process's start. The quickstart's test runs the other way, as a process."""
    return run_job_here(script, *args)


def test_quickstart_synchronous_run_matches_sequential_sgd(tmp_path):
    summary = tmp_path / "summary.json"
    result = _run("quickstart.py", "--replicas", "2", "--staleness-bound", "0", "--batches", "24", "--batch-size", "32",
                  "--seed", "3", "--summary", str(summary), "--outdir", str(tmp_path / "out"), "--progress-every", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "batches 24/24" in result.stdout
    figures = json.loads(summary.read_text())
    for key in ("replicas", "staleness_bound", "batches", "final_loss", "final_accuracy", "wall_s", "batches_per_s",
                "gradient_messages", "gradient_bytes", "model_versions", "replica_max_weight_diff"):
        assert key in figures, key
    assert figures["replicas"] == 2 and figures["staleness_bound"] == 0 and figures["batches"] == 24
    assert figures["model_versions"] == [12, 12] and figures["replica_max_weight_diff"] <= 1e-6
    assert figures["gradient_messages"] == 2 * 12  # one per step and replica (done markers not counted)
    maker = functools.partial(encoded_teacher_batch, batch_size=32, features=20, classes=4, seed=3)
    model = functools.partial(zoo.quickstart_classifier, features=20, classes=4)
    results = read_results(tmp_path / "out")
    reference = sequential_reference(results, maker=maker, model=model, seed=3)
    for name, value in reference.items():
        np.testing.assert_allclose(results.models[1].weights[name], value, atol=1e-6)


def _tensorboard_scalars(folder):
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    return {tag: [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]
            for tag in events.Tags()["tensors"]}


def _json_lines(folder, prefix):
    lines = []
    for path in sorted(folder.glob(f"{prefix}-*.jsonl")):
        lines += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return lines


def test_image_classification_on_digits_then_continued_from_the_saved_model(tmp_path):
    from pyflink_tensair.core.events import weights_digest
    from pyflink_tensair.datasets.images import ImageStream
    from pyflink_tensair.flink.types import decode_final_model
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    saved, summary_path = tmp_path / "digits.keras", tmp_path / "summary.json"
    result = _run_here("image_classification.py", "--replicas", "2", "--staleness-bound", "0", "--passes", "2",
                  "--batch-size", "64", "--outdir", str(tmp_path / "out"), "--summary", str(summary_path),
                  "--logdir", str(tmp_path / "tb"), "--save", str(saved), "--progress-every", "1",
                  "--exports-every-s", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "batches 46/46" in result.stdout and " acc " in result.stdout
    summary = json.loads(summary_path.read_text())
    assert summary["batches"] == 46 and summary["batches_per_pass"] == 23 and summary["synthetic_data"] is False
    assert len(summary["pass_accuracy"]) == 2 and summary["pass_accuracy"][1] > summary["pass_accuracy"][0] + 0.1
    assert summary["holdout_accuracy"] > 0.5 and summary["replica_max_weight_diff"] <= 1e-6
    assert summary["messages_per_s"] > 0 and summary["mean_gradient_message_bytes"] > 0
    assert len(summary["accuracy_curve"]) == 46 and summary["accuracy_curve"][-1][1] == pytest.approx(summary["window_accuracy"], abs=1e-5)

    # the prediction stream: every batch once, predicted labels that score the reported accuracy
    predictions = _json_lines(tmp_path / "out", "predictions")
    assert sorted(p["batch_id"] for p in predictions) == list(range(46))
    stream = ImageStream("digits", batch_size=64)
    for p in predictions[::5]:
        truth = stream(p["batch_id"]).y
        assert len(p["labels"]) == 64
        assert np.mean(np.array(p["labels"]) == truth) == pytest.approx(p["accuracy"], abs=1e-6)

    scalars = _tensorboard_scalars(tmp_path / "tb" / "replica-0")
    assert {"loss", "accuracy", "batches_per_s", "staleness"} <= set(scalars)
    assert [step for step, _ in scalars["loss"]] == list(range(1, 24))
    job_scalars = _tensorboard_scalars(tmp_path / "tb" / "job")
    assert job_scalars["window_accuracy"][-1] == (46, pytest.approx(summary["window_accuracy"], abs=1e-6))

    # --save wrote replica 0's final weights, and so did the last --exports-every-s export (into
    # <outdir>/exports); --model continues from exactly those, with another replica count
    from pyflink_tensair.models.export import exported_models

    final = decode_final_model((tmp_path / "out" / "model-0-000000.bin").read_bytes())
    saved_weights = KerasModelAdapter(load_model(str(saved))).get_weights()
    assert weights_digest(saved_weights) == weights_digest(final.weights)
    exports = exported_models(str(tmp_path / "out" / "exports"))
    assert exports[-1][0] == final.model_version == 23 and summary["latest_export"] == exports[-1][1]
    export_weights = KerasModelAdapter(load_model(exports[-1][1])).get_weights()
    assert weights_digest(export_weights) == weights_digest(final.weights)
    result = _run_here("image_classification.py", "--replicas", "1", "--passes", "1", "--batch-size", "64",
                  "--model", exports[-1][1], "--outdir", str(tmp_path / "again"), "--summary", str(tmp_path / "again.json"))
    assert result.returncode == 0, result.stderr[-3000:]
    again = decode_final_model((tmp_path / "again" / "model-0-000000.bin").read_bytes())
    assert again.initial_digest == weights_digest(saved_weights)
    continued = json.loads((tmp_path / "again.json").read_text())
    assert continued["pass_accuracy"][0] > summary["pass_accuracy"][0] + 0.1  # a pre-trained start


def test_image_classification_reads_cifar10_binary_batches(tmp_path):
    from pyflink_tensair.datasets import images

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(96, 32, 32, 3)).astype(np.float32) / 255
    y = rng.integers(0, 10, size=96)
    folder = tmp_path / "cifar"
    folder.mkdir()
    images.write_cifar10(str(folder / "data_batch_1.bin"), x[:64], y[:64])
    images.write_cifar10(str(folder / "test_batch.bin"), x[64:], y[64:])
    summary_path = tmp_path / "summary.json"
    result = _run_here("image_classification.py", "--data", f"cifar10:{folder}", "--replicas", "2", "--batch-size", "16",
                  "--passes", "2", "--outdir", str(tmp_path / "out"), "--summary", str(summary_path))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["batches"] == 8 and summary["model"] == "cifar10_cnn" and summary["holdout_batches"] == 1
    assert summary["gradient_messages"] == 8  # one per trained batch
    assert summary["mean_gradient_message_bytes"] == 122_570 * 4  # a dense message carries every parameter


def test_image_classification_refuses_a_model_of_another_input_shape(tmp_path):
    model = zoo.quickstart_classifier()
    model.save(str(tmp_path / "mlp.keras"))
    result = _run_here("image_classification.py", "--model", str(tmp_path / "mlp.keras"))
    assert result.returncode == 2
    assert "takes inputs of shape (20,), but digits images are (8, 8, 1)" in result.stderr, result.stderr[-2000:]


# word2vec.py runs with `flink run -py` on the cluster: test_cluster.py.


def test_drift_demo_with_two_replicas_detects_the_permutation_and_nothing_before_it(tmp_path):
    # two replicas with TensAIR's rule (no bound), the demo's defaults. Before issue 24 part 5 a
    # replica that converged ahead of its lagging peer served while applying the peer's stale
    # gradients; its loss rose and OPTWIN fired before the drift in 2 of 5 runs of this command.
    # A serving replica's model is now fixed (core/replica.py), and a loss spike at the end of the
    # convergence test's window is not a level (drift/policy.py), so the drift is the only rise in
    # its loss. Timing still decides where each replica converges (docs/use_cases.md): first
    # convergence at batches 122-176 over 8 runs before that test, 128-226 over 9 after it, so the
    # drift is at 300 (it was at 240); auto trained 49-92% of the batches (checked: < 100%, i.e. it
    # served). OPTWIN tests from 30 values on, primed with
    # the last 15 training losses: a replica that began serving shortly before the drift needs
    # more batches to find it.
    every = 300
    # Auto mode alone: the demo's default second job, mode "train" on the same stream, is its
    # reference curve, not part of what auto does (that "train" never serves nor detects:
    # test_auto_mode.py, in-process).
    result = _run_here("drift_demo.py", "--modes", "auto", "--every", str(every), "--drifts", "1", "--auto-window", "15",
                  "--auto-tolerance", "0.05", "--outdir", str(tmp_path), "--checkpoints-interval-s", "none")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.load(open(tmp_path / "drift_demo.json"))
    auto = summary["modes"]["auto"]
    assert summary["drift_points"] == [every] and auto["batches"] == 2 * every and list(summary["modes"]) == ["auto"]
    assert auto["trained_share"] < 1.0 and auto["converged_at"], auto
    first = min(auto["converged_at"])
    assert first < every, auto  # serving before the drift, so the drift is there to detect
    assert [d for d in auto["detections"] if d < every] == [], auto  # no false alarm from a fixed model
    delay = auto["detection_delays"][0]
    assert delay is not None and delay < (10 if every - first >= 40 else 40), auto
    assert os.path.getsize(tmp_path / "drift_demo.png") > 10_000
    # what makes it so, whatever the timing: every serving phase predicts with one model version
    batches = [m for m in _json_lines(tmp_path / "auto", "metrics") if m["phase"] == "batch"]
    for replica in (0, 1):
        mine = sorted((m for m in batches if m["replica"] == replica), key=lambda m: m["batch_id"])
        assert all(a["model_version"] == b["model_version"] for a, b in zip(mine, mine[1:])
                   if a["trained"] is False and b["trained"] is False), replica


def test_clicks_learns_from_ids_the_stream_brings_in_tables_smaller_than_its_ids(tmp_path):
    # 40,000 events bring about 20,080 user and 5,400 item ids into tables of 1,000 rows: rows
    # change hands all along, and the held-out AUC (ids through the final model's maps) must beat
    # chance clearly (the in-process benchmark reaches 0.75 over 500,000 events).
    summary_path, saved = tmp_path / "summary.json", str(tmp_path / "clicks.keras")
    result = _run_here("clicks.py", "--events", "40000", "--capacity", "1000", "--replicas", "2", "--staleness-bound", "0",
                  "--holdout", "4000", "--outdir", str(tmp_path / "out"), "--summary", str(summary_path),
                  "--checkpoints-interval-s", "none", "--save", saved)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["batches"] == 40000 // 256 + 1 and summary["holdout_events"] == 4000
    assert summary["table_ids"] == {"user": 1000, "item": 1000}  # full tables: evictions happened
    assert summary["holdout_auc"] > 0.6, summary["holdout_auc"]
    assert 0.1 < summary["holdout_ids_with_a_row"]["user"] < 1.0
    assert "held out: AUC" in result.stdout
    # the saved model has its maps beside it, and a server started from it looks ids up through them
    from pyflink_tensair import ServeConfig, json_event
    from pyflink_tensair.embeddings import id_maps
    from pyflink_tensair.models.keras_adapter import load_model
    from pyflink_tensair.online.serving import FrozenServer

    maps = id_maps(saved)
    assert {name: len(m) for name, m in maps.items()} == {"user": 1000, "item": 1000}
    user, item = next(iter(maps["user"].ids)), next(iter(maps["item"].ids))
    server = FrozenServer(saved, json_event, ServeConfig(python_in="jvm"))
    server.open(type("Context", (), {"get_index_of_this_subtask": lambda self: 0})())
    event = json.dumps({"id": "e", "x": {"user": user, "item": item}})
    (answer,) = server._answer(["0", "0", event])
    expected = load_model(saved).predict_on_batch({"user": np.array([maps["user"].ids[user]], np.int32),
                                                   "item": np.array([maps["item"].ids[item]], np.int32)})
    assert np.frombuffer(answer[-8:], "<f8")[0] == pytest.approx(float(expected[0, 0]), rel=1e-5)


@pytest.mark.parametrize("script, args, message", [
    ("quickstart.py", ["--staleness-bound", "-2"], "argument --staleness-bound: staleness_bound must be an int >= 0"),
    ("quickstart.py", ["--replicas", "0"], "argument --replicas: replicas must be an int >= 1. Received: replicas=0"),
    ("quickstart.py", ["--python-in", "thread"], "python_in must be one of 'jvm', 'processes', 'client'"),
    ("quickstart.py", ["--mode", "always"], "mode must be one of 'train', 'serve', 'auto'. Received: mode='always'"),
    ("quickstart.py", ["--replica-execution", "thread"], "unrecognized arguments: --replica-execution thread"),
    ("image_classification.py", ["--data", "mnist"], "argument --data: data must be 'digits', 'cifar10:FOLDER' or 'synthetic'"),
    ("image_classification.py", ["--data", "cifar10:/no/such/folder"], "does not exist"),
    ("image_classification.py", ["--save", "model.h5"], "argument --save: save must name a .keras file"),
    ("image_classification.py", ["--rate", "-1"], "argument --rate: rate must be a number >= 0"),
    ("image_classification.py", ["--passes", "0"], "argument --passes: passes must be an int >= 1"),
    ("drift_demo.py", ["--modes", "sometimes"], "modes must be a comma-separated list of auto, train, serve"),
    ("drift_demo.py", ["--every", "0"], "argument --every: every must be an int >= 1"),
    ("word2vec.py", ["--corpus", "/no/such/corpus"], "is neither a file nor a folder"),
    ("word2vec.py", ["--negatives", "0"], "argument --negatives: negatives must be an int >= 1"),
    ("word2vec.py", ["--dim", "0"], "argument --dim: dim must be an int >= 1"),
    ("clicks.py", ["--capacity", "0"], "argument --capacity: capacity must be an int >= 1"),
    ("clicks.py", ["--topic", "clicks"], "--topic needs --source kafka"),
    ("quickstart.py", ["--peer-updates-scale", "2"], "argument --peer-updates-scale: PeerUpdates.scale must be a number in (0, 1]"),
    ("quickstart.py", ["--peer-updates-rule", "sgd"], "PeerUpdates(rule='sgd') needs sgd_learning_rate"),
    ("image_classification.py", ["--peer-updates-average-every", "0"], "PeerUpdates.average_every must be an int >= 1 or None"),
])
def test_bad_arguments_exit_with_a_clear_message(script, args, message):
    result = _run(script, *args, timeout=120)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]
