"""Runs small training jobs on a local mini-cluster and reads back what they wrote."""

from __future__ import annotations

import functools
import glob
import json
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import numpy as np
from pyflink.datastream import ProcessFunction

from pyflink_tensair import TrainConfig, train
from pyflink_tensair.core.events import FinalModel, Metrics, ModeChange
from pyflink_tensair.core.messages import DeadLetter
from pyflink_tensair.datasets.teacher import encoded_teacher_batch
from pyflink_tensair.flink import types
from pyflink_tensair.flink.sinks import write_json_lines, write_records
from pyflink_tensair.flink.sources import number_sequence
from pyflink_tensair.models import zoo

FEATURES, CLASSES = 20, 4
MODEL = functools.partial(zoo.quickstart_classifier, features=FEATURES, classes=CLASSES)
make_batch = functools.partial(encoded_teacher_batch, batch_size=32, features=FEATURES, classes=CLASSES, seed=0)


def drifting_batch(index, *, at: int = 150):
    """Teacher batches whose teacher changes at batch ``at`` (a concept drift)."""
    return encoded_teacher_batch(index, batch_size=32, features=FEATURES, classes=CLASSES, seed=0 if index < at else 1)


def garbage_after_three(index):
    return make_batch(index) if index < 3 else b"definitely not a batch"


def bad_batches_among_good(index):
    """Batches 0-9, with bytes that are no record after batch 2, a batch of the wrong shape
    (id 100), one with NaN (101) and an empty one (102) after batch 5."""
    from pyflink_tensair.core import wire
    from pyflink_tensair.core.messages import Batch

    bad = {3: b"definitely not a batch",
           7: wire.encode_batch(Batch(np.zeros((4, FEATURES + 2), np.float32), np.zeros(4, np.int64), {"id": 100})),
           8: wire.encode_batch(Batch(np.full((4, FEATURES), np.nan, np.float32), np.zeros(4, np.int64), {"id": 101})),
           9: wire.encode_batch(Batch(np.zeros((0, FEATURES), np.float32), np.zeros(0, np.int64), {"id": 102}))}
    if index in bad:
        return bad[index]
    return make_batch(index - sum(1 for i in bad if i < index))


def done_marker_after_three(index):
    from pyflink_tensair.core import wire
    from pyflink_tensair.core.messages import DoneMessage

    return make_batch(index) if index < 3 else wire.encode_message(DoneMessage(0, 1))


def local_log_excerpt(lines: int = 60) -> str:
    """What a failed job's assertion shows of the local mini-cluster's log (PyFlink's ``log/``
    folder), since CI keeps no log files: the first errors and every line about a TaskExecutor
    (a TaskManager that left is what 'NoResourceAvailableException' follows), then the last
    warnings and state changes."""
    import pyflink

    fatal = ("FATAL", "ERROR", "Fatal", "Reference count", "OutOfMemory", "exit code")
    wanted = ("WARN", "ERROR", "NoResourceAvailable", "switched from", "Caused by")
    errors, taskexecutors, last = [], [], []
    for path in glob.glob(os.path.join(os.path.dirname(pyflink.__file__), "log", "*.log")):
        with open(path, errors="replace") as f:
            for line in f:
                if any(c in line for c in fatal) and len(errors) < 30:
                    errors.append(line.rstrip()[:400])
                if "TaskExecutor" in line:  # the last ones: a TaskManager that left precedes NoResourceAvailable
                    taskexecutors.append(line.rstrip()[:400])
                if any(w in line for w in wanted):
                    last.append(line.rstrip()[:400])
    text = "\n".join(["--- first errors ---", *errors, "--- last TaskExecutor lines ---", *taskexecutors[-20:],
                      "--- last warnings ---", *last[-lines:]])
    return text if errors or taskexecutors or last else "(no mini-cluster log found)"


class FailureAfterCheckpoint:
    """When a job fails on purpose: once every replica trained (a ``"batch"`` line of each in the
    metrics files under ``metrics_dir``), and then a checkpoint triggered after that completed in
    ``checkpoint_dir`` (a ``chk-N/_metadata`` whose N is above every ``chk-*`` folder there was when
    the training was seen: Flink makes a checkpoint's folder when it triggers it). A restore from
    it resumes every replica beyond step 0, which a test can then assert (a job that restarted from
    scratch would end the same, on the same data). Each failure leaves ``marker_dir/failed-<k>``.

    :meth:`due` waits for that state while a batch is held; in the checkpoint phase for at most
    ``hold_s`` at a time, since the holding task takes its checkpoint barrier only between two
    records. The functions it runs in are re-made at each restart: the markers are its memory."""

    def __init__(self, marker_dir: str, checkpoint_dir: str, metrics_dir: str, replicas: int = 2, times: int = 1,
                 hold_s: float = 1.0, patience_s: float = 300.0):
        self.marker_dir, self.checkpoint_dir, self.metrics_dir = marker_dir, checkpoint_dir, metrics_dir
        self.replicas, self.times, self.hold_s, self.patience_s = replicas, times, hold_s, patience_s
        self._after = None  # the highest checkpoint number there was once every replica had trained
        self._gave_up = False  # they never trained within patience_s: the test fails on the missing marker

    def failed(self) -> int:
        return len(glob.glob(os.path.join(self.marker_dir, "failed-*")))

    def _trained(self) -> bool:
        seen = set()
        for path in glob.glob(os.path.join(self.metrics_dir, "metrics-*.jsonl")):
            with open(path) as f:  # whole lines only: the sink may be writing one
                seen |= {json.loads(line)["replica"] for line in f if line.endswith("\n") and '"phase":"batch"' in line}
        return len(seen) >= self.replicas

    def _checkpoints(self, completed: bool) -> List[int]:
        pattern = os.path.join(self.checkpoint_dir, "*", "chk-*", "_metadata" if completed else "")
        return [int(path.rstrip(os.sep).split(os.sep)[-2 if completed else -1][len("chk-"):])
                for path in glob.glob(pattern)]

    def _checkpointed(self) -> bool:
        if self._after is None:
            if not self._trained():
                return False
            self._after = max(self._checkpoints(completed=False), default=0)
        return any(n > self._after for n in self._checkpoints(completed=True))

    def due(self) -> bool:
        """Whether to fail now: the first time once the state above is reached (waited for here),
        and for ``times=2`` once more at the first record the restarted job makes."""
        from pyflink_tensair.waiting import WaitTimeout, wait_until

        failed = self.failed()
        if failed >= self.times or self._gave_up:
            return False
        if failed:
            return True
        try:  # the replicas train on what came before: hold this record until they have
            wait_until(self._trained, self.patience_s, interval_s=0.05, what="every replica to train")
        except WaitTimeout:
            self._gave_up = True
            return False
        try:
            return bool(wait_until(self._checkpointed, self.hold_s, interval_s=0.05, what="a checkpoint"))
        except WaitTimeout:
            return False

    def fail(self, where: str):
        k = self.failed() + 1
        with open(os.path.join(self.marker_dir, f"failed-{k}"), "w") as f:
            f.write(where)
        raise RuntimeError(f"injected failure {k} at {where}")


def fail_once(index, *, at: int, marker_dir: str, checkpoint_dir: str, metrics_dir: str, times: int = 1):
    """Batch ``index`` (a ``Batch``, for ``batch_source``), except that the job fails at the first
    batch from ``at`` on that :class:`FailureAfterCheckpoint` finds due (with ``times=2`` once more,
    at the first batch the restarted job makes, during its recovery)."""
    from pyflink_tensair.datasets.teacher import teacher_classification_batch

    if index >= at:
        failure = _failures.setdefault((marker_dir, times), FailureAfterCheckpoint(
            marker_dir, checkpoint_dir, metrics_dir, times=times))
        if failure.due():
            failure.fail(f"batch {index}")
    return teacher_classification_batch(index, batch_size=32, features=FEATURES, classes=CLASSES, seed=0)


_failures: Dict[tuple, "FailureAfterCheckpoint"] = {}  # per process: what a failure has seen so far


def worker_pid(_):
    """The process a Python function runs in."""
    return os.getpid()


def worker_executable(_):
    """A map: the executable of the process it runs in, as JSON."""
    return json.dumps({"worker": os.readlink(f"/proc/{os.getpid()}/exe")})


class ExecutableOf(ProcessFunction):
    """Adds the executable of its own process to what ``worker_executable`` found."""

    def process_element(self, value, ctx):
        yield json.dumps({**json.loads(value), "operator": os.readlink(f"/proc/{os.getpid()}/exe")})


def batch_made_where(index):
    """A ``make_batch`` whose batch says in which process's executable it was made."""
    from pyflink_tensair.core.messages import Batch

    return Batch(np.full((2, FEATURES), index, np.float32), np.zeros(2, np.int64),
                 {"made_in": os.readlink(f"/proc/{os.getpid()}/exe")})


def batch_meta(data: bytes) -> str:
    """A map: an encoded batch's metadata as JSON."""
    from pyflink_tensair.core import wire

    return json.dumps(wire.decode_batch(data).meta)


def process_executable(_model):
    """A probe: the process the replica runs in, and its executable."""
    return {"pid": os.getpid(), "executable": os.readlink(f"/proc/{os.getpid()}/exe")}


def _record(index):
    rng = np.random.default_rng(index)
    return rng.normal(size=FEATURES).tolist(), int(rng.integers(0, CLASSES))


# record n of the mixed stream: a bad record where BAD_RECORDS says, else the next good one
BAD_RECORDS = {
    2: ("wrong_shape", lambda: ([0.5] * (FEATURES + 1), 1)),
    5: ("non_finite", lambda: ([float("nan")] + [0.0] * (FEATURES - 1), 0)),
    9: ("missing_field", lambda: ([0.0] * FEATURES,)),
    12: ("label_out_of_range", lambda: ([0.0] * FEATURES, CLASSES)),
    17: ("wrong_dtype", lambda: (["a"] * FEATURES, 0)),
    20: ("missing_field", lambda: "a line of text"),  # (Flink carries no null records)
    23: ("non_finite", lambda: ([0.0] * FEATURES, float("inf"))),
    31: ("wrong_shape", lambda: ([[0.0], [1.0, 2.0]], 0)),
}


def _mixed_record(index):
    if index in BAD_RECORDS:
        return BAD_RECORDS[index][1]()
    return _record(index - sum(1 for bad in BAD_RECORDS if bad < index))


# A bad record in JSON text: its reason where the text reads otherwise than the Python object does
JSON_REASONS = {20: "not_a_record"}  # '"a line of text"' is JSON, but not an object with "x"


def _json_record(index, mixed=False):
    record = _mixed_record(index) if mixed else _record(index)
    if isinstance(record, str):
        return json.dumps(record)
    return json.dumps({"x": record[0]} if len(record) == 1 else {"x": record[0], "y": record[1]})


def table_batches(env, count: int, batch_size: int, name: str):
    """``batches_from_table`` of a table of the first ``count`` good records, one column per feature."""
    from pyflink.table import StreamTableEnvironment

    from pyflink_tensair import batches_from_table

    t_env = StreamTableEnvironment.create(env)
    columns = [f"f{i}" for i in range(FEATURES)]
    table = t_env.from_elements([(*_record(i)[0], _record(i)[1]) for i in range(count)], columns + ["label"])
    # one batcher: the rows in the table's order (a parallel one batches the rows that reach each subtask)
    return batches_from_table(t_env, table, batch_size, features=columns, label="label", classes=CLASSES,
                              parallelism=1, name=name)


def single_records(env, count: int, *, mixed: bool = False, name: str = "records", kind: str = "pickled"):
    """A stream of ``(features, label)`` records, one per number; ``mixed``: the same good
    records with BAD_RECORDS among them (``count`` good ones either way). ``name`` makes the uids.
    ``kind``: Python objects (``"pickled"``), Java tuples of doubles and a long (``"typed"``, not
    mixed), or JSON text (``"json"``)."""
    from pyflink.common import Types

    total = count + (len(BAD_RECORDS) if mixed else 0)
    numbers = number_sequence(env, 0, total - 1, name=f"{name} numbers", uid=f"{name}-numbers")
    if kind == "typed":
        assert not mixed, "a typed stream cannot carry most bad records"
        made = numbers.map(_record, output_type=Types.TUPLE([Types.PRIMITIVE_ARRAY(Types.DOUBLE()), Types.LONG()]))
    elif kind == "json":
        made = numbers.map(functools.partial(_json_record, mixed=mixed), output_type=Types.STRING())
    else:
        made = numbers.map(_mixed_record if mixed else _record, output_type=Types.PICKLED_BYTE_ARRAY())
    return made.name(name).uid(name).set_parallelism(1)  # in order: a record's position is its number


@dataclass
class JobResult:
    metrics: List[Metrics]
    models: Dict[int, FinalModel]
    predictions: List[dict]
    mode_changes: List[ModeChange]
    dead_letters: List[DeadLetter]

    def batch_ids_by_replica(self) -> Dict[int, List[int]]:
        """The batches each replica trained, in the order of its local steps."""
        out: Dict[int, List[int]] = {}
        for m in sorted((m for m in self.metrics if m.phase == "batch"), key=lambda m: (m.replica, m.local_step)):
            out.setdefault(m.replica, []).append(m.batch_id)
        return out


def numbered_batches(env, count: int, maker=make_batch, name: str = "test"):
    numbers = number_sequence(env, 0, max(count, 1) - 1, name=f"{name} numbers", uid=f"{name}-numbers")
    if count == 0:
        numbers = numbers.filter(lambda i: False).name("no batches").uid(f"{name}-empty").set_parallelism(1)
    return numbers.map(maker, output_type=types.bytes_type()).name(f"{name} batches").uid(f"{name}-batches").set_parallelism(1)


@dataclass
class Scenario:
    """One training pipeline of a test job: ``config.name`` names its operators and its folder, so
    several scenarios can share one job (and its start: most of a small local job's cost)."""

    config: TrainConfig
    batches: int = 0
    maker: Callable = make_batch
    model: Callable = MODEL
    stream: Optional[Callable] = None  # env -> a stream of batches, instead of ``batches`` from ``maker``
    probe: Optional[Callable] = None  # train()'s probe; its results go to ``probes-*.jsonl``

    @property
    def name(self) -> str:
        return self.config.name

    def build(self, env, outdir: str) -> None:
        from pyflink.common import Types

        name = self.config.name
        batch_stream = self.stream(env) if self.stream is not None else numbered_batches(env, self.batches, self.maker, name)
        out = train(batch_stream, model=self.model, config=self.config, probe=self.probe)
        if self.probe is not None:
            write_json_lines(out.probes, outdir, "probes", name=name)
        write_json_lines(out.metrics, outdir, "metrics", name=name)
        write_records(out.models, outdir, "model", name=name)
        write_json_lines(out.mode_changes, outdir, "mode-changes", name=name)
        write_json_lines(out.dead_letters, outdir, "dead-letters", name=name)
        predictions = out.predictions.map(types.prediction_json, output_type=Types.STRING()).name("json").uid(f"{name}-json")
        write_json_lines(predictions, outdir, "predictions", name=name)


SHARED_NETWORK_MB_PER_SCENARIO = 96  # the library's local mini-cluster has 256 MB for one pipeline


@dataclass
class Pipeline:
    """A pipeline of a shared test job that is not a training scenario: ``build(env, outdir)``
    adds its operators (uids starting with ``name``) and sinks into ``outdir``."""

    name: str
    build: Callable


def run_scenarios(outdir, scenarios: list) -> Dict[str, str]:
    """Runs the scenarios (and pipelines) as one job; returns each one's folder by name
    (``outdir/<name>``; :func:`read_results` reads a scenario's)."""
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink.common import Configuration

    names = [s.name for s in scenarios]
    assert len(set(names)) == len(names), f"scenario names must differ: {names}"
    settings = Configuration()
    for key in ("taskmanager.memory.network.min", "taskmanager.memory.network.max"):
        settings.set_string(key, f"{SHARED_NETWORK_MB_PER_SCENARIO * len(scenarios)}mb")  # 1 MB buffers, for every channel
    env = StreamExecutionEnvironment.get_execution_environment(settings)
    folders = {name: os.path.join(str(outdir), name) for name in names}
    for scenario in scenarios:
        scenario.build(env, folders[scenario.name])
    env.execute(f"test job: {', '.join(names)}")
    return folders


def run_training(outdir, batches: int, config: TrainConfig, *, maker=make_batch, model=MODEL, stream=None) -> JobResult:
    """One scenario as a job of its own (one that must fail, or that times itself)."""
    from pyflink.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    Scenario(config, batches, maker, model, stream).build(env, str(outdir))
    env.execute("test job")
    return read_results(outdir)


def read_results(outdir) -> JobResult:
    def lines(prefix):
        return [line for path in sorted(glob.glob(os.path.join(str(outdir), f"{prefix}-*.jsonl"))) for line in open(path)]

    models = [types.decode_final_model(open(p, "rb").read()) for p in sorted(glob.glob(os.path.join(str(outdir), "model-*.bin")))]
    return JobResult(metrics=[Metrics.from_json(line) for line in lines("metrics")],
                     models={m.replica: m for m in models},
                     predictions=[json.loads(line) for line in lines("predictions")],
                     mode_changes=[ModeChange.from_json(line) for line in lines("mode-changes")],
                     dead_letters=[DeadLetter.from_json(line) for line in lines("dead-letters")])


def sequential_reference(result: JobResult, maker=make_batch, model=MODEL, seed: int = 0) -> Dict[str, np.ndarray]:
    """Plain synchronous SGD on the same batches: at step k, the average of every replica's k-th gradient."""
    from pyflink_tensair.core import wire
    from pyflink_tensair.core.gradients import average_gradients
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    reference = KerasModelAdapter(load_model(model, seed=seed))
    ids = result.batch_ids_by_replica()
    for step in range(max(len(v) for v in ids.values())):
        grads = [reference.compute_gradients(wire.decode_batch(maker(ids[r][step]))).gradients
                 for r in sorted(ids) if len(ids[r]) > step]
        reference.apply_gradients(average_gradients(grads))
    return reference.get_weights()


TOPICS = [["king", "queen", "crown", "throne", "prince", "duke"], ["sea", "ship", "wave", "storm", "sail", "shore"],
          ["love", "heart", "kiss", "sweet", "dear", "fair"], ["sword", "blood", "war", "fight", "death", "battle"]]
FILLERS = ["the", "and", "of", "to", "a", "in", "my", "is", "that", "with"]


def write_topic_corpus(folder, lines=1500, seed=0):
    """Lines about one of four topics: topic words co-occur, fillers are everywhere."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    text = []
    for _ in range(lines):
        topic = TOPICS[rng.integers(len(TOPICS))]
        text.append(" ".join(topic[rng.integers(6)] if rng.random() < 0.6 else FILLERS[rng.integers(10)]
                             for _ in range(8)))
    (folder / "topics.txt").write_text("\n".join(text))
    return folder


def _as_a_process(run, argv: list, cwd: str):
    """``run()`` in folder ``cwd`` with its output captured, reported as a process's would be: status
    0; a SystemExit's code; 2 and ``error: ...`` for a TensairError (as a job's ``main_guard`` gives
    it); 1 and the traceback for anything else."""
    import contextlib
    import io
    import subprocess
    import sys
    import traceback

    from pyflink_tensair.errors import TensairError

    out, err, status, here = io.StringIO(), io.StringIO(), 0, os.getcwd()
    os.chdir(str(cwd))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                run()
            except SystemExit as exit_:
                code = exit_.code
                status = code if isinstance(code, int) else (0 if code is None else 1)
                if not isinstance(code, (int, type(None))):
                    print(code, file=sys.stderr)
            except TensairError as error:
                print(f"error: {error}", file=sys.stderr)
                status = 2
            except Exception:
                traceback.print_exc()
                status = 1
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


def run_job_here(script: str, *args: str):
    """``python jobs/<script> <args>`` from the checkout's root, run in this process: the job's own
    ``main(argv)``, reported as its process would be (:func:`_as_a_process`). What does not come
    from the job itself, Flink's JVM and the TensorFlow its replicas import, is already up in this
    process after its first job: a job then costs its batches, where a process of its own pays
    about 17 s to start (tests/test_jobs.py's quickstart still runs as a person runs it, as a process)."""
    import importlib.util
    import sys

    import cloudpickle

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    name = f"tensair_job_{os.path.splitext(script)[0]}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(root, "jobs", script))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module  # the job's own functions go to the replicas by value, as from a script
        cloudpickle.register_pickle_by_value(module)
    return _as_a_process(lambda: sys.modules[name].main(list(args)), [script, *args], root)


def run_code_here(code: str, cwd):
    """``python -c <code>`` run in this process, in folder ``cwd``, as :func:`run_job_here` runs a
    job: a snippet of the docs as written (its functions are ``__main__``'s, which go to the
    replicas by value, as from ``python -c``)."""
    return _as_a_process(lambda: exec(compile(code, "<snippet>", "exec"), {"__name__": "__main__"}),
                         ["python", "-c", code], cwd)
