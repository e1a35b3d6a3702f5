"""train() inside real Flink jobs on a local mini-cluster, in loopback and in process mode."""

import glob
import os

import numpy as np
import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import PeerUpdates, TrainConfig  # noqa: E402
from pyflink_tensair.testing import max_weight_diff  # noqa: E402

from flink_harness import (CLASSES, Pipeline, Scenario, done_marker_after_three, garbage_after_three,  # noqa: E402
                           read_results, run_scenarios, run_training, sequential_reference, single_records,
                           table_batches)

pytestmark = pytest.mark.flink


# Most tests here read one scenario of a job they share with others (flink_harness.Scenario): a
# small local job's start costs more than its batches. Jobs that must fail, time themselves or
# change the environment for the whole job stay jobs of their own, further down.
MODES = [("processes", True), ("processes", False), ("jvm", True)]


def _mode_scenarios(python_in, trainer_thread):
    tag = f"{python_in}-{int(trainer_thread)}"
    return [Scenario(TrainConfig(replicas=2, staleness_bound=0, python_in=python_in, trainer_thread=trainer_thread,
                                 name=f"sync-{tag}"), 12),
            Scenario(TrainConfig(replicas=2, staleness_bound=None, python_in=python_in, trainer_thread=trainer_thread,
                                 name=f"dasgd-{tag}", peer_updates=PeerUpdates.tensair()), 12)]


def _records(name, count, batch_size, **kwargs):
    """``to_batches`` of ``count`` single records (``mixed=`` and ``kind=`` as ``single_records`` takes them)."""
    from pyflink_tensair import to_batches
    from pyflink_tensair.kafka.source import json_example

    extra = {"classes": CLASSES} if "mixed" in kwargs else {}
    if kwargs.get("kind") == "json":
        extra["parse"] = json_example
    return lambda env: to_batches(single_records(env, count, name=f"{name} records", **kwargs),
                                  batch_size=batch_size, name=name, **extra)


def _thread_mode_operator_among_workers(env, outdir):
    from pyflink.common import Types

    from pyflink_tensair.flink.execution import process
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.flink.sources import number_sequence

    from flink_harness import ExecutableOf, worker_executable

    numbers = number_sequence(env, 0, 2, name="mixed numbers", uid="mixed-numbers")
    in_worker = numbers.map(worker_executable, output_type=Types.STRING()).uid("mixed-in-worker")
    in_jvm = process(in_worker, ExecutableOf(), Types.STRING(), "jvm").uid("mixed-in-jvm")
    write_json_lines(in_jvm, outdir, "where", name="mixed")


def _batches_made_where(python_in):
    name = f"made-{python_in}"

    def build(env, outdir):
        from pyflink.common import Types

        from pyflink_tensair.flink.sinks import write_json_lines
        from pyflink_tensair.flink.sources import batch_source

        from flink_harness import batch_made_where, batch_meta

        batches = batch_source(env, 6, batch_made_where, rate=50.0, name=name, python_in=python_in)
        meta = batches.map(batch_meta, output_type=Types.STRING()).uid(f"{name}-meta")
        write_json_lines(meta, outdir, "meta", name=name)
    return Pipeline(name, build)


def _shared_scenarios():
    from flink_harness import bad_batches_among_good, process_executable

    return [*(s for mode in MODES for s in _mode_scenarios(*mode)),
            Scenario(TrainConfig(replicas=2, staleness_bound=1, peer_updates=PeerUpdates(average_every=2),
                                 name="averaging"), 16),
            Scenario(TrainConfig(replicas=3, staleness_bound=1, broadcast_every=2, name="pinned"), 9),
            Scenario(TrainConfig(replicas=2, name="empty"), 0),
            Scenario(TrainConfig(replicas=3, staleness_bound=0, name="few"), 2),
            Scenario(TrainConfig(replicas=2, name="badbatches"), 14, maker=bad_batches_among_good),
            Scenario(TrainConfig(replicas=2, staleness_bound=0, name="clean"), stream=_records("clean", 96, 8, mixed=False)),
            Scenario(TrainConfig(replicas=2, staleness_bound=0, name="mixed"), stream=_records("mixed", 96, 8, mixed=True)),
            Scenario(TrainConfig(replicas=2, staleness_bound=0, name="mixed-json"),
                     stream=_records("mixed-json", 96, 8, mixed=True, kind="json")),
            Scenario(TrainConfig(replicas=2, staleness_bound=0, name="typed"), stream=_records("typed", 96, 8, kind="typed")),
            Scenario(TrainConfig(replicas=2, staleness_bound=0, name="table"),
                     stream=lambda env: table_batches(env, 96, 8, name="table")),
            Scenario(TrainConfig(replicas=1, name="records"), stream=_records("records", 50, 16)),
            *(Scenario(TrainConfig(replicas=2, staleness_bound=0, python_in=python_in, name=f"where-{python_in}"), 4,
                       probe=process_executable) for python_in in ("processes", "jvm")),
            Pipeline("mixed-modes", _thread_mode_operator_among_workers),
            *(_batches_made_where(python_in) for python_in in ("processes", "jvm"))]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One job of every scenario whose Python runs in worker processes or in the JVM."""
    return run_scenarios(tmp_path_factory.mktemp("shared"), _shared_scenarios())


@pytest.fixture(scope="module")
def in_client(tmp_path_factory):
    """One job of the scenarios whose Python runs in this client (a setting of the whole job)."""
    return run_scenarios(tmp_path_factory.mktemp("client"), _mode_scenarios("client", True))


@pytest.fixture
def result(shared):
    """A scenario's results from the shared job, by its name."""
    return lambda name: read_results(shared[name])


@pytest.mark.parametrize("python_in,trainer_thread", [("client", True), *MODES])
class TestTrainingModes:
    @staticmethod
    def _result(request, name, python_in):
        return read_results(request.getfixturevalue("in_client" if python_in == "client" else "shared")[name])

    def test_synchronous_replicas_stay_identical_and_match_sequential_sgd(self, request, python_in, trainer_thread):
        result = self._result(request, f"sync-{python_in}-{int(trainer_thread)}", python_in)
        assert sorted(p["batch_id"] for p in result.predictions) == list(range(12))
        assert sorted(result.models) == [0, 1]
        assert len({m.initial_digest for m in result.models.values()}) == 1
        assert max_weight_diff([m.weights for m in result.models.values()]) <= 1e-6
        reference = sequential_reference(result)
        for name, value in reference.items():
            np.testing.assert_allclose(result.models[0].weights[name], value, atol=1e-6)
        assert {m.model_version for m in result.models.values()} == {6}

    def test_dasgd_replicas_train_every_batch_and_apply_every_peer_message(self, request, python_in, trainer_thread):
        result = self._result(request, f"dasgd-{python_in}-{int(trainer_thread)}", python_in)
        assert sorted(p["batch_id"] for p in result.predictions) == list(range(12))
        finals = {m.replica: m for m in result.metrics if m.phase == "final"}
        assert sorted(finals) == [0, 1]
        for r, final in finals.items():
            peer = finals[1 - r]
            assert final.model_version == final.local_step + peer.messages_sent - 1  # minus the done marker
            assert result.models[r].model_version == final.model_version
        assert sum(f.local_step for f in finals.values()) == 12


def test_weights_messages_travel_the_loop_and_every_one_is_mixed_in_once(result):
    result = result("averaging")
    finals = {m.replica: m for m in result.metrics if m.phase == "final"}
    assert sorted(finals) == [0, 1] and sum(f.local_step for f in finals.values()) == 16
    for r, final in finals.items():
        peer = finals[1 - r]
        assert final.messages_applied == peer.local_step  # every gradient once
        # and every weights message once: one version per gradient and one per mixed-in model
        assert final.model_version == final.local_step + peer.local_step + peer.local_step // 2
    assert max_weight_diff([m.weights for m in result.models.values()]) < 0.05


def _json_lines(folder, prefix):
    import json

    return [json.loads(line) for path in sorted(glob.glob(os.path.join(folder, f"{prefix}-*.jsonl"))) for line in open(path)]


@pytest.mark.parametrize("python_in", ["processes", "jvm"])
def test_python_in_decides_whether_replicas_run_in_a_python_worker_or_in_the_jvm(shared, python_in):
    """The probe runs inside replica 0: its process is a Java one only with python_in="jvm"."""
    probes = _json_lines(shared[f"where-{python_in}"], "probes")
    assert probes and all("error" not in p for p in probes), probes
    executables = {p["result"]["executable"] for p in probes}
    assert len(executables) == 1 and {p["result"]["pid"] for p in probes} != {os.getpid()}
    assert os.path.basename(executables.pop()).startswith("java") == (python_in == "jvm")


def test_an_operator_built_in_thread_mode_runs_in_the_jvm_and_the_rest_of_the_job_in_workers(shared):
    seen = _json_lines(shared["mixed-modes"], "where")
    assert len(seen) == 3
    assert all(os.path.basename(s["worker"]).startswith("python") for s in seen)
    assert all(os.path.basename(s["operator"]).startswith("java") for s in seen)


@pytest.mark.parametrize("python_in", ["processes", "jvm"])
def test_batch_source_makes_every_batch_once_where_the_config_it_feeds_runs_python(shared, python_in):
    seen = sorted(_json_lines(shared[f"made-{python_in}"], "meta"), key=lambda m: m["id"])
    assert [m["id"] for m in seen] == list(range(6))
    due = [m["scheduled_at"] for m in seen]
    assert all(abs(b - a - 1 / 50.0) < 1e-6 for a, b in zip(due, due[1:]))
    assert {os.path.basename(m["made_in"]).startswith("java") for m in seen} == {python_in == "jvm"}


def test_replica_r_runs_on_subtask_r_with_round_robin_batches(result):
    result = result("pinned")
    assert result.batch_ids_by_replica() == {0: [0, 3, 6], 1: [1, 4, 7], 2: [2, 5, 8]}
    assert max(m.staleness for m in result.metrics if m.phase == "batch") <= 1


def test_job_ends_by_itself_when_the_input_is_empty(result):
    result = result("empty")
    assert result.predictions == [] and sorted(result.models) == [0, 1]
    assert all(m.model_version == 0 for m in result.models.values())


def test_more_replicas_than_batches(result):
    result = result("few")
    assert sorted(result.models) == [0, 1, 2]
    assert max_weight_diff([m.weights for m in result.models.values()]) == 0.0


def test_bad_batches_are_set_aside_counted_and_the_job_goes_on(result):
    result = result("badbatches")
    letters = sorted((l.reason, l.position) for l in result.dead_letters)
    assert [reason for reason, _ in letters] == ["empty", "non_finite", "not_a_record", "wrong_shape"], letters
    assert sorted(p for r, p in letters if r != "not_a_record") == [100, 101, 102]
    trained = sorted(m.batch_id for m in result.metrics if m.phase == "batch" and m.trained)
    assert trained == list(range(10))  # every good batch, once
    finals = [m for m in result.metrics if m.phase == "final"]
    assert sum(m.dead_letters for m in finals) == 4


def test_bad_batch_bytes_fail_the_job_with_a_clear_error_when_the_policy_says_so(tmp_path):
    from pyflink_tensair import Guards

    with pytest.raises(Exception) as err:
        run_training(tmp_path, 6, TrainConfig(replicas=1, guards=Guards(bad_input="fail"), name="garbage"),
                     maker=garbage_after_three)
    text = str(err.value)
    assert "BadInputError" in text and "not a pyflink_tensair record" in text, text[-3000:]


def test_a_message_in_the_batch_stream_fails_the_job_where_batches_are_routed(tmp_path):
    with pytest.raises(Exception) as err:
        run_training(tmp_path, 6, TrainConfig(replicas=2, name="misrouted"), maker=done_marker_after_three)
    text = str(err.value)
    assert "the batch stream carried a pyflink_tensair record of kind 3, not a mini-batch" in text, text[-3000:]


@pytest.mark.parametrize("mixed", ["mixed", "mixed-json"])
def test_bad_records_are_set_aside_and_the_synchronous_model_equals_the_clean_run(result, mixed):
    """Issue 13: the good records are batched and dealt exactly as without the bad ones, whether
    they come as Python objects (read in Python a chunk at a time) or as JSON text (read on the JVM)."""
    from flink_harness import BAD_RECORDS, JSON_REASONS

    clean, mixed_run = result("clean"), result(mixed)
    assert clean.dead_letters == []
    reasons = {n: JSON_REASONS.get(n, reason) if mixed == "mixed-json" else reason for n, (reason, _) in BAD_RECORDS.items()}
    letters = sorted((l.position, l.reason, l.what, l.stage) for l in mixed_run.dead_letters)
    assert letters == [(n, reason, "record", "to_batches") for n, reason in sorted(reasons.items())]
    assert sum(m.dead_letters for m in mixed_run.metrics if m.phase == "final") == len(BAD_RECORDS)
    assert mixed_run.batch_ids_by_replica() == clean.batch_ids_by_replica() == {0: list(range(0, 12, 2)), 1: list(range(1, 12, 2))}
    for r in (0, 1):
        for name, value in clean.models[r].weights.items():
            np.testing.assert_array_equal(mixed_run.models[r].weights[name], value)


@pytest.mark.parametrize("rows", ["typed", "table"])
def test_java_tuples_and_table_rows_are_batched_on_the_jvm_as_python_objects_are_in_python(result, rows):
    """The same records as Java tuples of doubles and a long, and as a SQL table's rows (a column a
    feature): the same batches, the same model."""
    clean, typed = result("clean"), result(rows)
    assert typed.dead_letters == [] and typed.batch_ids_by_replica() == clean.batch_ids_by_replica()
    for r in (0, 1):
        for name, value in clean.models[r].weights.items():
            np.testing.assert_array_equal(typed.models[r].weights[name], value)


# The credit gate that holds an unpaced source back for saturated replicas: test_cluster.py, where
# one replica shares the gate's JVM (as both do here) and the other reports through Flink's network.


def test_to_batches_groups_single_records_into_mini_batches(result):
    result = result("records")
    assert sorted(p["batch_id"] for p in result.predictions) == [0, 1, 2, 3]  # 16 + 16 + 16 + 2
    assert [len(p["predictions"]) for p in sorted(result.predictions, key=lambda p: p["batch_id"])] == [16, 16, 16, 2]


@pytest.mark.parametrize("python_in", ["processes", "client", "processes"])
def test_python_in_client_runs_python_functions_in_the_client_and_the_others_do_not(tmp_path, python_in):
    """PyFlink picks loopback when an environment is created (each time one is made around the job);
    train() must still get its way."""
    import glob
    import json
    import os

    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair.flink.environment import prepare_environment
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.flink.sources import number_sequence

    from flink_harness import worker_pid

    env = StreamExecutionEnvironment.get_execution_environment()
    numbers = number_sequence(env, 0, 3, name="numbers", uid="numbers")
    pids = numbers.map(worker_pid, output_type=Types.LONG()).map(json.dumps, output_type=Types.STRING())
    write_json_lines(pids, str(tmp_path), "pids", name="pids")
    prepare_environment(env, TrainConfig(python_in=python_in))
    StreamExecutionEnvironment(env._j_stream_execution_environment)  # made later, as train()'s relay does
    env.execute("worker pids")
    seen = {json.loads(line) for path in glob.glob(str(tmp_path / "pids-*.jsonl")) for line in open(path)}
    if python_in == "client":
        assert seen == {os.getpid()}
    else:
        assert seen and os.getpid() not in seen


@pytest.mark.parametrize("output", ["metrics", "predictions"])
def test_execute_and_collect_returns_an_output_and_runs_the_other_sinks(tmp_path, output):
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import decode_prediction, train
    from pyflink_tensair.core.events import Metrics
    from pyflink_tensair.flink.sinks import write_records

    from flink_harness import MODEL, numbered_batches, read_results

    env = StreamExecutionEnvironment.get_execution_environment()
    out = train(numbered_batches(env, 6), model=MODEL, config=TrainConfig(replicas=2, name="collect"))
    write_records(out.models, str(tmp_path), "model", name="collect")  # a sink of the user's, beside the collect
    with getattr(out, output).execute_and_collect() as collected:
        records = list(collected)
    if output == "metrics":
        metrics = [Metrics.from_json(r) for r in records]
        assert sorted(m.batch_id for m in metrics if m.phase == "batch") == list(range(6))
        assert sorted(m.replica for m in metrics if m.phase == "final") == [0, 1]
    else:
        rows = [decode_prediction(r) for r in records]
        assert sorted(r["batch_id"] for r in rows) == list(range(6))
        assert all(r["predictions"].shape == (32, 4) for r in rows)
    assert sorted(read_results(tmp_path).models) == [0, 1]  # the job ran its other sinks and ended


def test_file_sinks_write_one_file_per_subtask_and_refuse_other_record_types(tmp_path):
    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair.errors import ConfigError
    from pyflink_tensair.flink.environment import use_this_interpreter
    from pyflink_tensair.flink.sinks import write_json_lines, write_records
    from pyflink_tensair.flink.sources import number_sequence

    env = StreamExecutionEnvironment.get_execution_environment()
    use_this_interpreter(env)
    numbers = number_sequence(env, 0, 4, name="numbers", uid="numbers")
    with pytest.raises(ConfigError, match=r"stream of Types.STRING\(\)"):
        write_json_lines(numbers, str(tmp_path), "numbers")  # longs, not strings
    with pytest.raises(ConfigError, match="prefix"):
        write_records(numbers, str(tmp_path), "a/b")
    with pytest.raises(ConfigError, match="delivery must be one of 'exactly_once', 'at_least_once'"):
        write_json_lines(numbers.map(str, output_type=Types.STRING()), str(tmp_path), "n", delivery="once")
    lines = numbers.map(lambda n: f'{{"n": {n}}}', output_type=Types.STRING()).set_parallelism(1)
    records = numbers.map(lambda n: bytes([n]) * 3, output_type=Types.PRIMITIVE_ARRAY(Types.BYTE())).set_parallelism(1)
    write_json_lines(lines, str(tmp_path / "out"), "lines").set_parallelism(1)
    write_records(records, str(tmp_path / "out"), "record").set_parallelism(1)
    env.execute("file sinks")
    assert (tmp_path / "out" / "lines-0.jsonl").read_text().splitlines() == [f'{{"n": {n}}}' for n in range(5)]
    written = sorted(p.name for p in (tmp_path / "out").glob("record-*"))
    assert written == [f"record-0-{n:06d}.bin" for n in range(5)]
    assert [(tmp_path / "out" / name).read_bytes() for name in written] == [bytes([n]) * 3 for n in range(5)]


def _python_operators(env):
    """``{operator name: operator class}`` of every Python operator in ``env``'s job graph."""
    graph = env._j_stream_execution_environment.getStreamGraph(False)  # False: keep the graph buildable
    found = {}
    for node in graph.getStreamNodes().toArray():
        factory = node.getOperatorFactory()
        kind = factory.getClass().getName()
        kind = factory.getOperator().getClass().getName() if "SimpleOperatorFactory" in kind else kind
        if "python" in kind or "Replica" in kind:
            found[node.getOperatorName()] = kind
    return found


@pytest.mark.parametrize("python_in", ["jvm", "processes"])
def test_where_the_replicas_python_runs_every_python_operator_of_train_runs(python_in):
    """With the replicas in the TaskManagers' JVMs no operator of train() starts a Python worker
    process (a start-markers map did: a Beam worker in every job)."""
    import functools

    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import batch_source, train
    from pyflink_tensair.datasets.teacher import teacher_classification_batch
    from pyflink_tensair.models import zoo

    env = StreamExecutionEnvironment.get_execution_environment()
    config = TrainConfig(replicas=2, python_in=python_in, name=f"where-{python_in}")
    make = functools.partial(teacher_classification_batch, batch_size=8, features=20, classes=4, seed=0)
    out = train(batch_source(env, 4, make, python_in=config.python_in), model=zoo.quickstart_classifier, config=config,
                check_model=False)
    out.metrics.print()
    operators = _python_operators(env)
    assert {f"where-{python_in}: start markers", f"where-{python_in}: replicas", "tensair: make batches"} <= set(operators)
    in_jvm = {name for name, kind in operators.items() if ".embedded." in kind or "EmbeddedReplica" in kind}
    assert in_jvm == (set(operators) if python_in == "jvm" else set()), operators
