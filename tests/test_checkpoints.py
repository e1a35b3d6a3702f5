"""Replica state in Flink checkpoints: a job that fails mid-training (a Python operator raises)
restarts from its last checkpoint and ends as if undisturbed, on a local mini-cluster. Killing a
TaskManager of the standalone cluster is not tested yet."""

import functools

import numpy as np
import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import Checkpoints, PeerUpdates, TrainConfig  # noqa: E402
from pyflink_tensair.testing import max_weight_diff  # noqa: E402

from flink_harness import MODEL, fail_once, make_batch, sequential_reference  # noqa: E402

pytestmark = pytest.mark.flink

# The failure waits for the replicas to train and a checkpoint after that (FailureAfterCheckpoint),
# however long their start takes: the rate only has to leave batches to fail at after it.
BATCHES, FAIL_AT, RATE = 46, 14, 10.0


def run(tmp_path, config, maker):
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import train
    from pyflink_tensair.flink.sinks import write_json_lines, write_records
    from pyflink_tensair.flink.sources import batch_source

    from flink_harness import local_log_excerpt, read_results

    from pyflink.common import Configuration

    settings = Configuration()
    if config.python_in.value == "processes":
        # Spare slots, as a real cluster's supervisor would replace a lost TaskManager: cancelling
        # process-mode Python tasks at the failover can kill their TaskManager (Beam's "Reference
        # count must not be negative", docs/reliability.md) or hold its slot, and a restart then
        # finds none: NoResourceAvailableException after the 5-minute slot request timeout, about
        # one CI run in six. Two TaskManagers alone were not enough: the mini-cluster gave each one
        # slot (the job's parallelism split across them), so each held half the job and none spare.
        # (Not in thread mode: PEMJA loads its native library once per JVM.)
        settings.set_string("local.number-taskmanager", "2")
        settings.set_string("taskmanager.numberOfTaskSlots", "2")
    env = StreamExecutionEnvironment.get_execution_environment(settings)
    out = train(batch_source(env, BATCHES, maker, rate=RATE, name="ckpt"), model=MODEL, config=config)
    write_json_lines(out.metrics, str(tmp_path / "out"), "metrics", name=config.name)
    write_records(out.models, str(tmp_path / "out"), "model", name=config.name)
    try:
        env.execute("checkpointed job")
    except Exception as err:
        # the log first and without Py4J's chained trace: CI's report keeps a failure's head and tail
        raise AssertionError(f"the job failed\n--- mini-cluster log ---\n{local_log_excerpt()}\n"
                             f"--- error ---\n{str(err)[:1500]}") from None
    return read_results(tmp_path / "out")


class _Deal:
    """Batch ``i`` to replica ``i % 2``: the round-robin deal, checkpointed with the router."""

    @staticmethod
    def batch_ids_by_replica():
        return {r: list(range(r, BATCHES, 2)) for r in range(2)}


# (None, 1, "processes") is the first failure of (None, 2, "processes"), and (0, 1, "processes")
# the state path of (None, 2, "processes") with the synchronous rule of (0, 1, "jvm"): both dropped
# for the suite's time
@pytest.mark.parametrize("staleness,failures,python_in", [(None, 2, "processes"), (0, 1, "jvm")])
def test_a_failed_job_restarts_from_its_checkpoint_and_trains_every_batch_once(tmp_path, staleness, failures, python_in):
    """``failures=2``: the second failure hits the restarted job at its first batch, while it recovers.
    ``python_in="jvm"``: the replicas' state goes through the embedded operator's Java state."""
    # TensAIR's rule: without weights messages every model version is one gradient, counted below
    config = TrainConfig(replicas=2, staleness_bound=staleness, python_in=python_in, name="ckpt",
                         checkpoints=Checkpoints(interval_s=0.3, dir=str(tmp_path / "checkpoints")),
                         peer_updates=PeerUpdates.tensair())
    result = run(tmp_path, config, functools.partial(fail_once, at=FAIL_AT, marker_dir=str(tmp_path),
                                                     checkpoint_dir=config.checkpoints.dir,
                                                     metrics_dir=str(tmp_path / "out"), times=failures))
    assert len(list(tmp_path.glob("failed-*"))) == failures, "no checkpoint completed after training, before the last batch"
    restored = [m for m in result.metrics if m.phase == "restored"]
    # a restore the second failure interrupted may not have written its record yet
    assert all(1 <= sum(m.replica == r for m in restored) <= failures for r in (0, 1)), restored
    assert all(0 < m.local_step < BATCHES for m in restored)  # from a checkpoint, not from zero
    finals = {m.replica: m for m in result.metrics if m.phase == "final"}
    assert sorted(finals) == [0, 1] and sorted(result.models) == [0, 1]
    assert sum(f.local_step for f in finals.values()) == BATCHES  # every batch trained once by the final state
    if staleness == 0:
        assert {m.model_version for m in result.models.values()} == {BATCHES // 2}
        assert max_weight_diff([m.weights for m in result.models.values()]) == 0.0
        reference = sequential_reference(_Deal(), maker=make_batch)
        for name, value in reference.items():
            np.testing.assert_allclose(result.models[0].weights[name], value, atol=1e-5)
    else:
        for r, final in finals.items():
            peer = finals[1 - r]
            assert final.messages_applied == peer.local_step  # each peer gradient applied exactly once
            assert result.models[r].model_version == final.local_step + peer.local_step
