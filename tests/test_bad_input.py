"""Every public entry point refuses bad input at the call (issue 49): one table of cases, each an
entry point, the arguments of the call with one bad among them, and the argument and the value the
message must name ("<name> must be <rule>. Received: <name>=<value>").

The streams' element types are known when the graph is built: those cases take streams of one
module-scoped environment (a JVM, no job run) and carry ``pytest.mark.flink``. Every other case
calls the entry point with a placeholder where a stream or an environment goes: the arguments
are checked before the streams, so those cases start no JVM (checked below). The command lines
run as subprocesses and must answer a bad flag as argparse does: the usage, one error line naming
the flag and the value, exit status 2, no traceback.
"""

import dataclasses
import math
import os
import re
import subprocess
import sys
from typing import Any, Callable

import numpy as np
import pytest

import pyflink_tensair as pt
from pyflink_tensair import ConfigError, ModelError, WireFormatError
from pyflink_tensair.kafka.source import json_example, kafka_examples
from pyflink_tensair.testing import LinearModel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STREAM = "not a stream"  # where a stream or an environment goes in the cases that need no JVM


def _builder():  # a model builder the checks accept; no case builds it
    raise AssertionError("a bad-input case built the model")


def _batch(i):
    return pt.Batch(np.zeros((2, 3), np.float32), np.zeros(2, np.int64))


@dataclasses.dataclass
class Case:
    id: str
    entry: Callable
    args: Any  # a dict of keyword arguments, or (for flink cases) a function of the streams giving one
    name: str  # the argument the message names
    received: str  # what the message says it received
    error: type = ConfigError

    @property
    def flink(self) -> bool:
        return callable(self.args)


def case(id, entry, name, received, *, error=ConfigError, **kwargs):
    return Case(id, entry, kwargs, name, received, error)


def flink_case(id, entry, name, received, args):
    return Case(id, entry, args, name, received)


TRAIN = dict(batches=STREAM, model=_builder)
SERVE = dict(events=STREAM, model=_builder)
JOIN = dict(events=STREAM, labels=STREAM, timeout_ms=1000)
SCORE = dict(predictions=STREAM, records=STREAM)
TEXT = dict(records=STREAM, batch_size=16, parse=json_example)
RECORDS = dict(records=STREAM, batch_size=16)
TABLE = dict(t_env=STREAM, table="clicks", batch_size=16, features=["f0", "f1"], label="clicked")
SOURCE = dict(env=STREAM, count=10, make_batch=_batch)
KAFKA = dict(env=STREAM, servers="127.0.0.1:9092", topic="digits")
LINEAR = dict(make_model=lambda r: LinearModel(3), batches=[])

CASES = [
    # train
    case("train-model", pt.train, "model", "42", error=ModelError, **{**TRAIN, "model": 42}),
    case("train-model-path", pt.train, "model", "'model.h5'", error=ModelError, **{**TRAIN, "model": "model.h5"}),
    case("train-config", pt.train, "config", "'jvm'", **TRAIN, config="jvm"),
    case("train-probe", pt.train, "probe", "'neighbours'", **TRAIN, probe="neighbours"),
    case("train-probe_every_s-text", pt.train, "probe_every_s", "'5'", **TRAIN, probe_every_s="5"),
    case("train-probe_every_s-nan", pt.train, "probe_every_s", "nan", **TRAIN, probe_every_s=math.nan),
    case("train-check_model", pt.train, "check_model", "'yes'", **TRAIN, check_model="yes"),
    case("train-sample", pt.train, "sample", "42", **TRAIN, sample=42),
    case("train-batches-not-a-stream", pt.train, "batches", "[b'TSNR']", batches=[b"TSNR"], model=_builder),
    # the configs
    case("TrainConfig-replicas", pt.TrainConfig, "replicas", "'2'", replicas="2"),
    case("TrainConfig-python_in", pt.TrainConfig, "python_in", "'thread'", python_in="thread"),
    case("AutoSettings-window", pt.AutoSettings, "window", "0", window=0),
    case("AutoSettings-detector", pt.AutoSettings, "detector", "'adwin'", detector="adwin"),
    case("PeerUpdates-scale", pt.PeerUpdates, "scale", "2", scale=2),
    case("Guards-bad_input", pt.Guards, "bad_input", "'drop'", bad_input="drop"),
    case("LatencySettings-bundle_size", pt.LatencySettings, "bundle_size", "0", bundle_size=0),
    case("Checkpoints-interval_s", pt.Checkpoints, "Checkpoints.interval_s", "0", interval_s=0),
    case("Exports-every_s", pt.Exports, "Exports.every_s", "-1", every_s=-1, dir="exports"),
    case("ModelUpdates-every_ms", pt.ModelUpdates, "ModelUpdates.every_ms", "nan", every_ms=math.nan),
    case("ServeConfig-parallelism", pt.ServeConfig, "ServeConfig.parallelism", "0", parallelism=0),
    case("ServeConfig-python_in", pt.ServeConfig, "python_in", "'thread'", python_in="thread"),
    # serve
    case("serve-config", pt.serve, "config", "'jvm'", **SERVE, config="jvm"),
    case("serve-parse", pt.serve, "parse", "'json'", **SERVE, parse="json"),
    case("serve-check_model", pt.serve, "check_model", "1", **SERVE, check_model=1),
    case("serve-model", pt.serve, "model", "None", error=ModelError, events=STREAM, model=None),
    case("serve-events-not-a-stream", pt.serve, "events", "['{}']", events=["{}"], model=_builder),
    # join_labels
    case("join_labels-timeout_ms", pt.join_labels, "timeout_ms", "0", **{**JOIN, "timeout_ms": 0}),
    case("join_labels-timeout_ms-text", pt.join_labels, "timeout_ms", "'60s'", **{**JOIN, "timeout_ms": "60s"}),
    case("join_labels-retention_ms", pt.join_labels, "retention_ms", "-1", **JOIN, retention_ms=-1),
    case("join_labels-time", pt.join_labels, "time", "'wall'", **JOIN, time="wall"),
    case("join_labels-default_label", pt.join_labels, "default_label", "[0]", **JOIN, default_label=[0]),
    case("join_labels-event_key", pt.join_labels, "event_key", "'id'", **JOIN, event_key="id"),
    case("join_labels-label", pt.join_labels, "label", "'y'", **JOIN, label="y"),
    case("join_labels-python_in", pt.join_labels, "python_in", "'thread'", **JOIN, python_in="thread"),
    case("join_labels-python_in-client", pt.join_labels, "python_in", "'client'", **JOIN, python_in="client"),
    case("join_labels-events-not-a-stream", pt.join_labels, "events", "'not a stream'", **JOIN),
    case("join_labels-config", pt.join_labels, "config", "'jvm'", **JOIN, config="jvm"),
    case("JoinConfig-timeout_ms", pt.JoinConfig, "timeout_ms", "-5", timeout_ms=-5),
    # score
    case("score-window", pt.score, "window", "0", **SCORE, window=0),
    case("score-report_every", pt.score, "report_every", "True", **SCORE, report_every=True),
    case("score-retention_ms", pt.score, "retention_ms", "nan", **SCORE, retention_ms=math.nan),
    case("score-label_field", pt.score, "label_field", "''", **SCORE, label_field=""),
    case("score-key", pt.score, "key", "'id'", **SCORE, key="id"),
    case("score-python_in", pt.score, "python_in", "'thread'", **SCORE, python_in="thread"),
    case("score-predictions-not-a-stream", pt.score, "predictions", "'not a stream'", **SCORE),
    case("score-config", pt.score, "config", "ServeConfig(", **SCORE, config=pt.ServeConfig()),
    case("ScoreConfig-window", pt.ScoreConfig, "window", "0", window=0),
    # text_batches
    case("text_batches-classes-text", pt.text_batches, "classes", "'10'", **TEXT, classes="10"),
    case("text_batches-classes-0", pt.text_batches, "classes", "0", **TEXT, classes=0),
    case("text_batches-features_shape", pt.text_batches, "features_shape", "8", **TEXT, features_shape=8),
    case("text_batches-features_shape-negative", pt.text_batches, "features_shape", "(8, -1)", **TEXT,
         features_shape=(8, -1)),
    case("text_batches-batch_size", pt.text_batches, "batch_size", "'16'", **{**TEXT, "batch_size": "16"}),
    case("text_batches-batch_size-0", pt.text_batches, "batch_size", "0", **{**TEXT, "batch_size": 0}),
    case("text_batches-parse", pt.text_batches, "parse", "None", **{**TEXT, "parse": None}),
    case("text_batches-rate", pt.text_batches, "rate", "nan", **TEXT, rate=math.nan),
    case("text_batches-max_wait_ms", pt.text_batches, "max_wait_ms", "0", **TEXT, max_wait_ms=0),
    case("text_batches-python_in", pt.text_batches, "python_in", "'thread'", **TEXT, python_in="thread"),
    case("text_batches-records-not-a-stream", pt.text_batches, "records", "'not a stream'", **TEXT),
    # to_batches
    case("to_batches-batch_size", pt.to_batches, "batch_size", "2.5", **{**RECORDS, "batch_size": 2.5}),
    case("to_batches-collate", pt.to_batches, "collate", "'pairs'", **RECORDS, collate="pairs"),
    case("to_batches-classes", pt.to_batches, "classes", "0", **RECORDS, classes=0),
    case("to_batches-features_shape", pt.to_batches, "features_shape", "8", **RECORDS, features_shape=8),
    case("to_batches-parse", pt.to_batches, "parse", "42", **RECORDS, parse=42),
    case("to_batches-rate", pt.to_batches, "rate", "'5'", **RECORDS, rate="5"),
    case("to_batches-max_wait_ms", pt.to_batches, "max_wait_ms", "1.5", **RECORDS, max_wait_ms=1.5),
    case("to_batches-records-not-a-stream", pt.to_batches, "records", "'not a stream'", **RECORDS),
    case("to_batches-parallelism", pt.to_batches, "parallelism", "0", **RECORDS, parallelism=0),
    # batches_from_table
    case("batches_from_table-batch_size", pt.batches_from_table, "batch_size", "0", **{**TABLE, "batch_size": 0}),
    case("batches_from_table-features-empty", pt.batches_from_table, "features", "[]", **{**TABLE, "features": []}),
    case("batches_from_table-features-int", pt.batches_from_table, "features", "3", **{**TABLE, "features": 3}),
    case("batches_from_table-label", pt.batches_from_table, "label", "1", **{**TABLE, "label": 1}),
    case("batches_from_table-classes", pt.batches_from_table, "classes", "0", **TABLE, classes=0),
    case("batches_from_table-parallelism", pt.batches_from_table, "parallelism", "0", **TABLE, parallelism=0),
    case("batches_from_table-t_env", pt.batches_from_table, "t_env", "'not a stream'", **TABLE),
    # batch_source
    case("batch_source-rate-text", pt.batch_source, "rate", "'5'", **SOURCE, rate="5"),
    case("batch_source-rate-nan", pt.batch_source, "rate", "nan", **SOURCE, rate=math.nan),
    case("batch_source-rate-negative", pt.batch_source, "rate", "-1", **SOURCE, rate=-1),
    case("batch_source-count-bool", pt.batch_source, "count", "True", **{**SOURCE, "count": True}),
    case("batch_source-count-0", pt.batch_source, "count", "0", **{**SOURCE, "count": 0}),
    case("batch_source-make_batch", pt.batch_source, "make_batch", "'digits'", **{**SOURCE, "make_batch": "digits"}),
    case("batch_source-python_in", pt.batch_source, "python_in", "'thread'", **SOURCE, python_in="thread"),
    case("batch_source-env", pt.batch_source, "env", "'not a stream'", **SOURCE),
    # kafka_examples
    case("kafka_examples-servers-int", kafka_examples, "servers", "9092", **{**KAFKA, "servers": 9092}),
    case("kafka_examples-servers-no-port", kafka_examples, "servers", "'localhost'",
         **{**KAFKA, "servers": "localhost"}),
    case("kafka_examples-topic", kafka_examples, "topic", "''", **{**KAFKA, "topic": ""}),
    case("kafka_examples-group_id", kafka_examples, "group_id", "None", **KAFKA, group_id=None),
    case("kafka_examples-start", kafka_examples, "start", "'beginning'", **KAFKA, start="beginning"),
    case("kafka_examples-until", kafka_examples, "until", "'forever'", **KAFKA, until="forever"),
    case("kafka_examples-parallelism", kafka_examples, "parallelism", "'2'", **KAFKA, parallelism="2"),
    case("kafka_examples-connector", kafka_examples, "connector", "5", **KAFKA, connector=5),
    case("kafka_examples-env", kafka_examples, "env", "'not a stream'", **KAFKA),
    # the results and the wire format
    case("keras_model-final", pt.keras_model, "final", "'model-0.bin'", final="model-0.bin", model=_builder),
    case("keras_model-model", pt.keras_model, "model", "42", error=ModelError, final=b"", model=42),
    case("keras_models-records", pt.keras_models, "records", "b'TSNR'", records=b"TSNR", model=_builder),
    case("keras_models-model", pt.keras_models, "model", "'m.h5'", error=ModelError, records=[], model="m.h5"),
    case("averaged_keras_model-records", pt.averaged_keras_model, "records", "7", records=7, model=_builder),
    case("encode_batch", pt.encode_batch, "batch", "'abc'", batch="abc"),
    case("decode_batch", pt.decode_batch, "data", "42", error=WireFormatError, data=42),
    case("decode_final_model", pt.decode_final_model, "data", "'abc'", error=WireFormatError, data="abc"),
    case("decode_dead_letter", pt.decode_dead_letter, "data", "None", error=WireFormatError, data=None),
    case("decode_prediction", pt.decode_prediction, "row", "42", row=42),
    # simulate
    case("simulate-config", pt.simulate, "config", "'sync'", **LINEAR, config="sync"),
    case("simulate-make_model", pt.simulate, "make_model", "42", **{**LINEAR, "make_model": 42}),
    case("simulate-batches", pt.simulate, "batches", "'batches'", **{**LINEAR, "batches": "batches"}),
    case("simulate-delivery_delay", pt.simulate, "delivery_delay", "True", **LINEAR, delivery_delay=True),
    case("simulate-through_wire", pt.simulate, "through_wire", "'yes'", **LINEAR, through_wire="yes"),
    # streams of the wrong element type: refused when the graph is built, not in the running job
    flink_case("train-batches-strings", pt.train, "batches", "a DataStream of String",
               lambda s: dict(batches=s.strings, model=_builder)),
    flink_case("train-batches-pickled", pt.train, "batches", "a DataStream of PickledByteArrayTypeInfo",
               lambda s: dict(batches=s.pickled, model=_builder)),
    flink_case("serve-events-bytes", pt.serve, "events", "a DataStream of byte[]",
               lambda s: dict(events=s.bytes, model=_builder, check_model=False)),
    flink_case("serve-updates-strings", pt.serve, "updates", "a DataStream of String",
               lambda s: dict(events=s.strings, updates=s.strings, model=_builder, check_model=False)),
    flink_case("serve-updates-not-a-stream", pt.serve, "updates", "'updates'",
               lambda s: dict(events=s.strings, updates="updates", model=_builder, check_model=False)),
    flink_case("join_labels-events-longs", pt.join_labels, "events", "a DataStream of Long",
               lambda s: dict(events=s.longs, labels=s.strings, timeout_ms=1000)),
    flink_case("join_labels-labels-bytes", pt.join_labels, "labels", "a DataStream of byte[]",
               lambda s: dict(events=s.strings, labels=s.bytes, timeout_ms=1000)),
    flink_case("score-predictions-strings", pt.score, "predictions", "a DataStream of String",
               lambda s: dict(predictions=s.strings, records=s.strings)),
    flink_case("score-records-longs", pt.score, "records", "a DataStream of Long",
               lambda s: dict(predictions=s.predictions, records=s.longs)),
    flink_case("to_batches-parallelism-pickled", pt.to_batches, "parallelism", "2",
               lambda s: dict(records=s.pickled, batch_size=16, parallelism=2)),
    flink_case("text_batches-records-bytes", pt.text_batches, "records", "a DataStream of byte[]",
               lambda s: dict(records=s.bytes, batch_size=16, parse=json_example)),
]


@dataclasses.dataclass
class Streams:
    """One stream of each kind the cases give, on one environment; no job runs."""

    strings: Any
    longs: Any
    bytes: Any
    pickled: Any
    predictions: Any


@pytest.fixture(scope="module")
def streams():
    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair.online.serving import prediction_type

    env = StreamExecutionEnvironment.get_execution_environment()
    strings = env.from_collection(['{"id": 1, "x": [0.5]}'], type_info=Types.STRING())

    def made(output_type=None):  # a map nothing runs: the stream's type is all that matters
        return strings.map(lambda text: text, output_type=output_type)

    return Streams(strings=strings, longs=made(Types.LONG()), bytes=made(Types.PRIMITIVE_ARRAY(Types.BYTE())),
                   pickled=made(), predictions=made(prediction_type()))


def _gateway_running() -> bool:
    try:
        from pyflink import java_gateway
    except ImportError:
        return False
    return java_gateway._gateway is not None


@pytest.mark.parametrize("bad", [pytest.param(c, id=c.id, marks=[pytest.mark.flink] if c.flink else []) for c in CASES])
def test_a_bad_argument_is_refused_at_the_call_naming_it_and_what_it_received(bad, request):
    jvm_before = _gateway_running()
    kwargs = bad.args(request.getfixturevalue("streams")) if bad.flink else bad.args
    with pytest.raises(bad.error, match=re.escape(f"{bad.name}={bad.received}")) as caught:
        bad.entry(**kwargs)
    assert type(caught.value).__module__ == "pyflink_tensair.errors"
    if bad.error is not WireFormatError:  # the data path's own error: "expected bytes, received int: data=42"
        assert f"{bad.name} must" in str(caught.value)
    assert str(caught.traceback[-1].frame.code.path).startswith(os.path.dirname(pt.__file__)), \
        f"raised outside pyflink_tensair: {caught.traceback[-1]}"
    if not bad.flink:
        assert jvm_before or not _gateway_running(), "a case without the flink marker started the JVM"


def test_every_public_entry_point_has_a_case():
    covered = {c.entry for c in CASES}
    classes_and_helpers = {"Batch", "DeadLetter", "Mode", "PythonIn", "SimulationResult", "TrainOutput", "ServeOutput",
                           "JoinOutput", "ScoreOutput", "json_event"}  # data types, enums and a parse function
    entry_points = [name for name in pt.__all__ if not name.endswith("Error") and name not in classes_and_helpers]
    assert [name for name in entry_points if getattr(pt, name) not in covered] == []
    assert kafka_examples in covered


# Command lines: (argv, what the error line must say). "--no-such-flag" at the end is a tripwire:
# a bad value that the parser let through ends there, as an unknown flag, and nothing starts (and a
# job's PyFlink client would find no Java, so no JVM could start either).
TRIPWIRE = ["--no-such-flag"]
CLUSTER = [sys.executable, "-m", "pyflink_tensair.cluster"]
COMMANDS = [
    (CLUSTER + ["start", "--rest-port", "abc"], "argument --rest-port: invalid int value: 'abc'"),
    (CLUSTER + ["start", "--rest-port", "0"], "argument --rest-port: rest_port must be an int in 1 .. 65535. "
                                              "Received: rest_port=0"),
    (CLUSTER + ["start", "--rpc-port", "65500"], "argument --rpc-port: rpc_port must be an int in 1 .. 65475. "
                                                 "Received: rpc_port=65500"),
    (CLUSTER + ["start", "--taskmanagers", "0"], "argument --taskmanagers: taskmanagers must be an int >= 1. "
                                                 "Received: taskmanagers=0"),
    (CLUSTER + ["start", "--slots", "-1"], "argument --slots: slots must be an int >= 1. Received: slots=-1"),
    (CLUSTER + ["start", "--metrics-fetcher-interval-ms", "-5"], "metrics_fetcher_interval_ms must be an int >= 0. "
                                                                 "Received: metrics_fetcher_interval_ms=-5"),
    (CLUSTER + ["kill-taskmanager", "--pid", "0"], "argument --pid: pid must be an int >= 1. Received: pid=0"),
    ([sys.executable, "jobs/quickstart.py", "--learning-rate", "-1"], "unrecognized arguments: --learning-rate -1"),
    ([sys.executable, "jobs/drift_demo.py", "--learning-rate", "-1"],
     "argument --learning-rate: learning_rate must be a number > 0. Received: learning_rate=-1.0"),
    ([sys.executable, "jobs/image_classification.py", "--learning-rate", "nan"],
     "argument --learning-rate: learning_rate must be a number > 0. Received: learning_rate=nan"),
    ([sys.executable, "jobs/word2vec.py", "--learning-rate", "0"],
     "argument --learning-rate: learning_rate must be a number > 0. Received: learning_rate=0.0"),
    ([sys.executable, "jobs/quickstart.py", "--rate", "nan"],
     "argument --rate: rate must be a number >= 0. Received: rate=nan"),
    ([sys.executable, "jobs/quickstart.py", "--exports-every-s", "-1"],
     "argument --exports-every-s: Exports.every_s must be a number of seconds > 0. Received: Exports.every_s=-1.0"),
    ([sys.executable, "jobs/clicks.py", "--updates-snapshot-every", "0"],
     "argument --updates-snapshot-every: ModelUpdates.snapshot_every must be an int >= 1. "
     "Received: ModelUpdates.snapshot_every=0"),
]
# a rule of two flags is checked once the command line is parsed: no tripwire can follow it
TWO_FLAGS = ([sys.executable, "jobs/quickstart.py", "--staleness-bound", "0", "--broadcast-every", "2"],
             "broadcast_every must be 1 when staleness_bound=0 (synchronous SGD exchanges every step). "
             "Received: broadcast_every=2")


def _command_id(command) -> str:
    argv = command[0]
    return " ".join(["cluster", *argv[3:]] if argv[1] == "-m" else [os.path.basename(argv[1]), *argv[2:]])


@pytest.mark.parametrize("argv, message", [pytest.param(*c, id=_command_id(c)) for c in COMMANDS + [TWO_FLAGS]])
def test_a_bad_flag_is_answered_with_the_usage_one_error_line_and_exit_status_2(argv, message, tmp_path):
    tail = ["--dir", str(tmp_path)] if argv[1] == "-m" else ["--outdir", str(tmp_path / "out")]
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}  # PyFlink's client would find no java
    result = subprocess.run(argv + tail + ([] if (argv, message) == TWO_FLAGS else TRIPWIRE), capture_output=True,
                            text=True, timeout=120, cwd=ROOT, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    error = result.stderr.strip().splitlines()[-1]
    assert result.stderr.startswith("usage: ") and ": error: " in error and message in error, result.stderr[-3000:]
    assert not (tmp_path / "out").exists() and not (tmp_path / "conf").exists()  # nothing written, nothing started
