"""The online loop on a local mini-cluster: the guide's serving snippet, serve() with bad events,
and jobs/online_loop.py's accounting (every event and every label ends in exactly one place)."""

import json
import os
import re

import pytest

pytest.importorskip("pyflink")

from pyflink_tensair.datasets.clicks import ClickStream  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.flink


def guide_snippet() -> str:
    page = open(os.path.join(ROOT, "docs", "guide", "online-loop.md"), encoding="utf-8").read()
    return re.search(r"```python\n(.*?)```", page, re.S).group(1)


def test_the_guides_serving_snippet_runs_and_serves_newer_versions_as_training_goes(tmp_path):
    from flink_harness import run_code_here

    result = run_code_here(guide_snippet(), tmp_path)  # as written, in this process
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.search(r"events answered: (\d+) by model versions: (\d+)", result.stdout)
    assert found, result.stdout[-2000:]
    assert int(found.group(1)) == 360 and int(found.group(2)) >= 2  # an event per trained batch, once; updates applied


BAD_EVENTS = ["not json", json.dumps({"id": "short", "x": [1.0, 2.0]}), json.dumps({"x": [0.0] * 20}), "[1, 2]",
              json.dumps({"id": "big", "x": [1e39] * 20}), json.dumps({"id": "text", "x": ["a"] * 20}),
              json.dumps({"id": "ragged", "x": [[1.0]] + [2.0] * 19}), json.dumps({"id": "e", "x": [0.0] * 20}) + " 1",
              json.dumps({"id": 1.5, "x": [0.0] * 20})]


def _serve_with_two_parsers(env, folder):
    """Good and bad events served in worker processes, parsed on the JVM (the default parser) and in Python."""
    import functools

    from pyflink.common import Types

    from pyflink_tensair import ServeConfig, json_event, serve
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.models import zoo

    good = [json.dumps({"id": f"e{i}", "x": [float(i) / 7] * 20}) for i in range(50)]
    good += [json.dumps({"id": 7, "x": [1] * 20, "t": {"a": [1]}}), '{"x": [0.5], "id": "d", "x": [%s]}' % ",".join(["0.25"] * 20)]
    events = env.from_collection(good[:25] + BAD_EVENTS + good[25:], type_info=Types.STRING())
    for name, parse in (("jvm", json_event), ("python", functools.partial(json_event))):  # only the default parses on the JVM
        served = serve(events, None, model=zoo.quickstart_classifier, parse=parse,
                       config=ServeConfig(parallelism=2, batch_size=8, python_in="processes", name=name))
        write_json_lines(served.dead_letters, folder, f"dead-{name}", name=name).set_parallelism(1)
        write_json_lines(served.predictions, folder, f"rows-{name}", name=name).set_parallelism(1)


def _serve_and_score(env, folder):
    """Events served by a frozen model, half of them labelled, scored in the job."""
    from pyflink.common import Types

    from pyflink_tensair import ServeConfig, serve
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.models import zoo
    from pyflink_tensair.online.scoring import score

    events = env.from_collection([json.dumps({"id": i, "x": [((i * 3 + j) % 7) / 7.0 for j in range(20)]})
                                  for i in range(40)], type_info=Types.STRING())
    labels = env.from_collection([json.dumps({"id": i, "y": i % 4}) for i in range(0, 40, 2)]  # every other one
                                 + [json.dumps({"id": "nobody", "y": 1})], type_info=Types.STRING())
    served = serve(events, None, model=zoo.quickstart_classifier, config=ServeConfig(batch_size=8, name="scored"))
    scores = score(served.predictions, labels, window=20, report_every=6, retention_ms=600_000, name="frozen")
    write_json_lines(served.predictions, folder, "predictions", name="scored").set_parallelism(1)  # Rows as JSON, on the JVM
    write_json_lines(scores.scored, folder, "scored", name="scored").set_parallelism(1)
    write_json_lines(scores.windows, folder, "windows", name="scored").set_parallelism(1)


@pytest.fixture(scope="module")
def serving_job(tmp_path_factory):
    """One local job of both serving pipelines above; the two tests below read its files."""
    from pyflink.datastream import StreamExecutionEnvironment

    folder = str(tmp_path_factory.mktemp("serving"))
    env = StreamExecutionEnvironment.get_execution_environment()
    _serve_with_two_parsers(env, folder)
    _serve_and_score(env, folder)
    env.execute("serve with two parsers; serve and score")
    return folder


def _lines(folder, prefix):
    return [json.loads(line) for line in open(os.path.join(folder, f"{prefix}-0.jsonl"))]


def test_serve_in_processes_answers_good_events_and_sets_bad_ones_aside_parsed_on_the_jvm_or_in_python(serving_job):
    from pyflink_tensair import DeadLetter

    rows = {name: {r["key"]: r for r in _lines(serving_job, f"rows-{name}")} for name in ("jvm", "python")}
    letters = {name: [DeadLetter.from_json(json.dumps(line)) for line in _lines(serving_job, f"dead-{name}")]
               for name in ("jvm", "python")}
    assert sorted(rows["jvm"]) == sorted([f"e{i}" for i in range(50)] + ["7", "d"])
    assert all(len(r["prediction"]) == 4 and r["model_version"] == 0 and r["model_age_ms"] == -1 for r in rows["jvm"].values())
    for key, row in rows["jvm"].items():  # the same features either way: the same answers
        assert row["prediction"] == pytest.approx(rows["python"][key]["prediction"], abs=1e-6)
    assert sorted(letter.reason for letter in letters["jvm"]) == ["not_a_record"] * len(BAD_EVENTS)
    details = " ".join(letter.detail for letter in letters["jvm"])
    for expected in ("shape (2,)", "not finite", "numbers", "rectangular", "more after", "'id' and 'x'", "not JSON",
                     "'id' is a string or an integer"):
        assert expected in details
    assert sorted(rows["python"]) == sorted(rows["jvm"]) and len(letters["python"]) == len(BAD_EVENTS)


def test_the_jvm_reads_common_events_by_hand_to_the_bit_as_jackson_does_and_leaves_it_the_rest():
    import struct

    import numpy as np
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway

    from pyflink_tensair.flink.environment import add_channel_jar

    add_channel_jar(StreamExecutionEnvironment.get_execution_environment())
    events = get_gateway().jvm.pyflinktensair.serving.JsonEvents

    def read(text, by_hand):  # (key, shape, the features' bits) or None where the text is set aside
        got = events.read(text, by_hand)
        return None if got is None else (got[0], list(got[1]), [struct.pack("<f", v) for v in got[2]])

    rng = np.random.default_rng(5)
    numbers = ["0", "-0", "-0.0", "0.1", "-7", "9007199254740991", "123456.789012",
               "0.30000000000000004", "1.0000000000000000000001"]  # the last two: more digits than a double holds
    for _ in range(3000):
        value = rng.normal() * 10.0 ** rng.integers(-9, 9)
        numbers.append("%d" % value if rng.random() < 0.1 else "%.*f" % (int(rng.integers(0, 18)), value))
    space = [" ", "\n", "\t ", "", "\r\n  "]
    texts = []
    for at in range(0, len(numbers), 3):
        gap = space[(at // 3) % len(space)]
        features = numbers[at:at + 3]
        texts.append('%s{%s"id"%s:%s"e%d é"%s,%s"x"%s:%s[%s%s]%s}%s' % (
            gap, gap, gap, gap, at, gap, gap, gap, gap, gap, ("," + gap).join(features), gap, gap)
            if at % 2 else '{"x":[%s],"id":"e%d"}' % (",".join(features), at))
    read_by_hand = 0
    for text, features in zip(texts, (numbers[at:at + 3] for at in range(0, len(numbers), 3))):
        jackson = read(text, False)
        assert jackson is not None and read(text, True) == jackson, text
        if events.readsByHand(text):
            read_by_hand += 1
        else:  # only numbers of more digits than a double holds exactly are Jackson's
            assert any(len(n.lstrip("-").replace(".", "").lstrip("0")) > 15 for n in features), text
    assert read_by_hand > 0.3 * len(texts)
    for text in ('{"id":"a","x":[1e3]}', '{"id":"a","x":[0.30000000000000004,-2.5E-7]}'):  # by hand, as Jackson
        assert events.readsByHand(text) and read(text, True) == read(text, False) is not None, text
    for text in ('{"id":"a\\u0041","x":[1]}', '{"id":7,"x":[1]}', '{"id":"a","x":[[1]]}',
                 '{"x":[0.5],"id":"d","x":[0.25]}', '{"id":"a","x":[1],"t":1}', '{"id":"a","x":[12345678901234567]}',
                 '{"id":"a","x":[]}', '{"x":[1,2],"id":7}', '{"x":[1,2],"id":"a","x":[3]}'):  # Jackson's to read
        assert not events.readsByHand(text) and read(text, True) == read(text, False) is not None, text
    for text in ("not json", '{"id":"a","x":[1e39]}', '{"id":"a","x":[01]}', '{"id":"a","x":[1.]}', '{"id":"a","x":[1,]}', '{"id":"a","x":[.5]}',
                 '{"id":"a","x":[+1]}', '{"id":"a","x":[1]} 1', '{"id":"a","x":[-]}', '{"id":"a","x":[1]',
                 '{"id":"a\tb","x":[1]}', '{"x":[1,2],"id":"a",}'):
        assert not events.readsByHand(text) and read(text, True) is None and read(text, False) is None, text


def test_score_meets_each_prediction_with_its_label_and_reports_the_window(serving_job):
    from pyflink_tensair.online.scoring import score_one

    predictions = {row["key"]: row for row in _lines(serving_job, "predictions")}
    assert sorted(predictions, key=int) == [str(i) for i in range(40)]
    assert all(len(r["prediction"]) == 4 and r["model_version"] == 0 and r["model_age_ms"] == -1
               for r in predictions.values())
    scored = _lines(serving_job, "scored")
    assert sorted((r["id"] for r in scored), key=int) == [str(i) for i in range(0, 40, 2)]  # each labelled event once
    for r in scored:
        correct, loss, _ = score_one(predictions[r["id"]]["prediction"], int(r["id"]) % 4)
        assert (r["correct"], r["loss"]) == (correct, loss)
    windows = _lines(serving_job, "windows")
    assert [w["scored"] for w in windows] == [6, 12, 18, 20] and all(w["name"] == "frozen" for w in windows)
    assert windows[-1]["accuracy"] == round(sum(r["correct"] for r in scored) / 20, 4)
    assert windows[-1]["auc"] is None  # four classes: no AUC


def test_serve_refuses_what_it_cannot_use():
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import ConfigError, ServeConfig, TrainConfig, batch_source, serve, train
    from pyflink_tensair.datasets.teacher import teacher_classification_batch
    from pyflink_tensair.models import zoo
    import functools

    env = StreamExecutionEnvironment.get_execution_environment()
    events = env.from_collection(["{}"])
    with pytest.raises(ConfigError, match="publishes no model updates"):
        make = functools.partial(teacher_classification_batch, batch_size=8, features=20, classes=4, seed=0)
        out = train(batch_source(env, 2, make), model=zoo.quickstart_classifier, config=TrainConfig())
        serve(events, out, model=zoo.quickstart_classifier)
    with pytest.raises(ConfigError, match="DataStream of event texts"):
        serve([1, 2], None, model=zoo.quickstart_classifier)
    with pytest.raises(ConfigError, match="ServeConfig.python_in"):
        ServeConfig(python_in="client")


def test_the_online_loop_job_accounts_for_every_event_and_label(tmp_path):
    summary_path = tmp_path / "summary.json"
    from flink_harness import run_job_here

    result = run_job_here("online_loop.py", "--events", "600", "--events-per-s", "100", "--warmup-s", "0",
                          "--outdir", str(tmp_path / "out"), "--summary", str(summary_path),
                          "--checkpoints-interval-s", "none", "--progress-every", "30")
    assert result.returncode == 0, result.stderr[-3000:]
    s = json.loads(summary_path.read_text())
    assert s["events_served"] == s["frozen_served"] == 600
    labels_dead = sum(1 for line in open(next((tmp_path / "out").glob("online-dead-letters-*.jsonl")))
                      if json.loads(line)["what"] == "label")
    assert s["labels_joined"] + labels_dead == s["labels_sent"]  # each label joined once or set aside
    assert s["labels_joined"] + s["label_timeouts"] == s["events"]  # each event joined or timed out
    data = ClickStream(events=600, gap_ms=600.0).outcome(timeout_ms=90_000)  # the job's defaults: 100 events/s, 60x, 90 s
    assert (s["labels_joined"], s["label_timeouts"], labels_dead) == (data["joined"], data["timeouts"], data["late_labels"])
    assert s["versions_served"] >= 2 and s["freshness_ms_p99"] is not None
    # scored in the job: every event's prediction met its record (joined, or timed out as "no click") once
    assert s["served_last_window"]["scored"] == s["frozen_last_window"]["scored"] == 600
    # how much the loop is worth (served against frozen accuracy) is a benchmark's figure, not a test's
