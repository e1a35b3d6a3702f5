"""Mode "auto" in a real Flink job: the replicas converge, serve, and train again after a drift."""

import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import AutoSettings, TrainConfig  # noqa: E402

from flink_harness import drifting_batch, run_training  # noqa: E402

pytestmark = pytest.mark.flink


def test_auto_replicas_converge_then_a_drift_sets_every_replica_training_again(tmp_path):
    # Two unbounded replicas: which batches each replica gets to first, and so where it converges
    # and detects, depend on timing; this cannot be made deterministic (auto refuses synchronous
    # SGD). Measured over 6 runs of this job (2026-12-03, issue 24 parts 4 and 5): first
    # convergences at batches 93-123 (checked: < 150, the drift), detections at 150-163 (checked:
    # >= 150; the first replica to detect needed 0-13 batches), a peer's drift notice or its own
    # detection in every replica. What does not depend on timing is checked last: a serving
    # replica's model is fixed, so only the drift can raise a serving replica's loss (before the
    # fix, 3 runs: serving phases predicted with up to 21 model versions).
    config = TrainConfig(replicas=2, staleness_bound=None, mode="auto", name="auto",
                         auto=AutoSettings(window=10, tolerance=0.05))
    result = run_training(tmp_path, 300, config, maker=drifting_batch)
    assert sorted(p["batch_id"] for p in result.predictions) == list(range(300))  # every batch predicted
    for replica in (0, 1):
        changes = sorted((c for c in result.mode_changes if c.replica == replica), key=lambda c: c.time)
        assert changes and (changes[0].training, changes[0].reason) == (False, "converged")
        assert changes[0].batch_id < 150
        assert any(c.training and c.reason in ("drift", "peer_drift") for c in changes[1:]), changes
    drifts = [c for c in result.mode_changes if c.reason == "drift"]
    assert drifts and all(c.batch_id >= 150 for c in drifts) and "t_critical" in drifts[0].statistics
    batch_records = [m for m in result.metrics if m.phase == "batch"]
    served = [m for m in batch_records if m.trained is False]
    assert served and len(batch_records) == 300
    finals = [m for m in result.metrics if m.phase == "final"]
    assert sum(f.local_step for f in finals) == 300 - len(served)
    for replica in (0, 1):  # every serving phase predicts with one model version
        mine = sorted((m for m in batch_records if m.replica == replica), key=lambda m: m.batch_id)
        assert all(a.model_version == b.model_version for a, b in zip(mine, mine[1:])
                   if a.trained is False and b.trained is False), replica
