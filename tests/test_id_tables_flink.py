"""An id table in Flink state (issue 28): a job whose words get rows as the stream brings them
fails mid-run and restarts from its checkpoint; the table comes back with it, so the batches,
the rows that change hands and the replicas' maps are those of an undisturbed run."""

import functools
import time

import numpy as np
import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import Checkpoints, TrainConfig  # noqa: E402
from pyflink_tensair.core import wire  # noqa: E402
from pyflink_tensair.testing import max_weight_diff  # noqa: E402
from pyflink_tensair.word2vec.growing import GrowingVocabulary  # noqa: E402

pytestmark = pytest.mark.flink

LINES, CHUNK, FAIL_AT, RATE, CAPACITY = 360, 24, 200, 40.0, 40


def _line(number: int) -> str:
    """Line ``number`` of a stream whose words drift: more distinct words than the table has rows."""
    rng = np.random.default_rng([7, number])
    return " ".join("abcdefghijklmnopqrstuvwxyz"[w % 26] * (1 + w // 26)
                    for w in (rng.zipf(1.4, 10) + number // 8) if w < 300)


def _vocabulary():
    return GrowingVocabulary(CAPACITY, min_count=2, batch_size=64, subsample=0, seed=0, notice_window=2)


class _Lines:
    """Line numbers -> lines at ``RATE`` a second; fails once, at the first line from ``FAIL_AT`` on
    that :class:`flink_harness.FailureAfterCheckpoint` finds due (both replicas trained, and a
    checkpoint after that completed)."""

    def __init__(self, failure):
        self.failure, self.start = failure, None

    def __call__(self, number):
        number = int(number)
        self.start = self.start or time.time() - number / RATE
        time.sleep(max(0.0, self.start + number / RATE - time.time()))  # the source's pace, not a wait
        if number >= FAIL_AT and self.failure.due():
            self.failure.fail(f"line {number}")
        return _line(number)


def test_a_restored_job_brings_its_id_table_back_and_the_replicas_agree_on_the_map(tmp_path):
    from pyflink.common import Types
    from pyflink.datastream import ProcessFunction, StreamExecutionEnvironment

    from pyflink_tensair import train
    from pyflink_tensair.core.simulation import simulate
    from pyflink_tensair.flink.execution import process
    from pyflink_tensair.flink.id_tables import stateful_chunk_batches
    from pyflink_tensair.flink.sinks import write_json_lines, write_records
    from pyflink_tensair.flink.sources import number_sequence
    from pyflink_tensair.models import zoo

    from flink_harness import FailureAfterCheckpoint, read_results
    from test_embeddings import _word2vec

    config = TrainConfig(replicas=2, staleness_bound=0, name="ids",
                         checkpoints=Checkpoints(interval_s=0.3, dir=str(tmp_path / "checkpoints")))
    make_line = _Lines(FailureAfterCheckpoint(str(tmp_path), config.checkpoints.dir, str(tmp_path / "out")))

    class LineProcess(ProcessFunction):
        def process_element(self, value, ctx):
            yield make_line(value)

    env = StreamExecutionEnvironment.get_execution_environment()
    numbers = number_sequence(env, 0, LINES - 1, name="line numbers", uid="ids-line-numbers")
    lines = process(numbers, LineProcess(), Types.STRING(), config.python_in).uid("ids-lines").set_parallelism(1)
    batches = stateful_chunk_batches(lines, CHUNK, _vocabulary(), python_in=config.python_in, name="ids")
    out = train(batches, model=functools.partial(zoo.word2vec, vocabulary=CAPACITY + 1, dim=8, learning_rate=16.0),
                config=config)
    write_json_lines(out.metrics, str(tmp_path / "out"), "metrics", name="ids")
    write_records(out.models, str(tmp_path / "out"), "model", name="ids")
    env.execute("id table restored")
    result = read_results(tmp_path / "out")

    assert len(list(tmp_path.glob("failed-*"))) == 1, "the job never failed: no checkpoint after training, before the last line"
    # both replicas came back from that checkpoint, beyond their first step: a job that restarted
    # from scratch (or whose replicas dropped their state) ends the same on this data, but not here
    restored = [m for m in result.metrics if m.phase == "restored"]
    assert sorted({m.replica for m in restored}) == [0, 1] and all(m.local_step > 0 for m in restored), restored
    # the undisturbed run, in this process: the same chunks through the same table
    vocabulary, expected = _vocabulary(), []
    for n in range(0, LINES, CHUNK):
        expected += [wire.decode_batch(b) for b in vocabulary([str(n // CHUNK), str(n), *map(_line, range(n, min(n + CHUNK, LINES)))])]
    assert vocabulary.table.statistics.evicted > 20  # rows changed hands all along
    finals = {m.replica: m for m in result.metrics if m.phase == "final"}
    assert sum(f.local_step for f in finals.values()) == len(expected)  # every batch trained once
    models = result.models
    assert sorted(models) == [0, 1]
    assert models[0].id_maps == models[1].id_maps
    assert {i: row for i, row in models[0].id_maps["words"]["ids"]} == vocabulary.table.mapping()
    assert max_weight_diff([m.weights for m in models.values()]) == 0.0  # synchronous: bit-identical
    reference = simulate(lambda r: _word2vec(CAPACITY + 1), expected, TrainConfig(replicas=2, staleness_bound=0))
    for name, value in reference.replicas[0].model.get_weights().items():
        np.testing.assert_allclose(models[0].weights[name], value, atol=1e-5)
