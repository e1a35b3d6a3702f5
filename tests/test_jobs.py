"""The jobs in jobs/ as a person runs them: `python jobs/X.py ...` on a local mini-cluster."""

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import cluster, data  # noqa: E402
from pyflink_tensair.models import zoo  # noqa: E402

from flink_harness import read_results, sequential_reference  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.flink


def _run(script, *args, timeout=600):
    return subprocess.run([sys.executable, os.path.join(ROOT, "jobs", script), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=cluster.client_environment())


def test_quickstart_synchronous_run_matches_sequential_sgd(tmp_path):
    summary = tmp_path / "summary.json"
    result = _run("quickstart.py", "--replicas", "2", "--staleness", "0", "--batches", "24", "--batch-size", "32",
                  "--seed", "3", "--summary", str(summary), "--outdir", str(tmp_path / "out"), "--progress-every", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "batches 24/24" in result.stdout
    figures = json.loads(summary.read_text())
    for key in ("replicas", "staleness_bound", "batches", "final_loss", "final_accuracy", "wall_s", "batches_per_s",
                "gradient_messages", "gradient_bytes", "model_versions", "replica_max_weight_diff"):
        assert key in figures, key
    assert figures["replicas"] == 2 and figures["staleness_bound"] == 0 and figures["batches"] == 24
    assert figures["model_versions"] == [12, 12] and figures["replica_max_weight_diff"] <= 1e-6
    assert figures["gradient_messages"] == 2 * 12 + 2  # one per step and replica, plus two done markers
    maker = functools.partial(data.encoded_teacher_batch, batch_size=32, features=20, classes=4, seed=3)
    model = functools.partial(zoo.quickstart_classifier, features=20, classes=4)
    results = read_results(tmp_path / "out")
    reference = sequential_reference(results, maker=maker, model=model, seed=3)
    for name, value in reference.items():
        np.testing.assert_allclose(results.models[1].weights[name], value, atol=1e-6)


@pytest.mark.parametrize("args, message", [
    (["--staleness", "-2"], "--staleness must be an int >= 0 or 'none'"),
    (["--replicas", "0"], "--replicas must be >= 1"),
    (["--workers", "thread"], "invalid choice: 'thread'"),
])
def test_bad_arguments_exit_with_a_clear_message(args, message):
    result = _run("quickstart.py", *args, timeout=120)
    assert result.returncode == 2 and message in result.stderr
