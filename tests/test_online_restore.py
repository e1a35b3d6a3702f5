"""The online loop's serving and label join across a failure: a job with checkpoints that fails
once mid-stream restarts from its last checkpoint and, in outputs committed with the checkpoints
(Flink's exactly-once ``FileSink``, and the project's own line files, cut back to the checkpoint),
answers every event once and ends every label and every event in exactly the place the data says, as an undisturbed run would (event time: nothing here depends
on the job's speed)."""

import glob
import json
import os
import re
import types

import pytest

pytest.importorskip("pyflink")

pytestmark = pytest.mark.flink

EVENTS, TIMEOUT_MS, FEATURES = 240, 100, 20
PER_CHECKPOINT = 20  # events between two checkpoints: the stream cannot outrun them, however slowly the job starts
FAIL_AT = 100


def event_text(i: int) -> str:
    return json.dumps({"id": i, "x": [((i * 7 + j) % 11) / 10.0 for j in range(FEATURES)], "t": 10 * i})


def label_texts() -> list:
    """Labels sorted by time: ids ``i % 4 != 0`` labelled 20 ms after their event (joined); the
    rest never (timed out), except id 8, whose label comes 150 ms after it (``label_after_timeout``);
    a second label for id 1 (``second_label``); five ids that never were events (``label_without_event``)."""
    labels = [(10 * i + 20, i) for i in range(EVENTS) if i % 4]
    labels += [(10 * 8 + 150, 8), (10 * 1 + 30, 1)] + [(500 * k + 5, f"ghost-{k}") for k in range(5)]
    return [json.dumps({"id": i, "y": int(isinstance(i, int) and i % 2), "t": t}) for t, i in sorted(labels, key=lambda p: p[0])]


EXPECTED = {"served": EVENTS, "joined": EVENTS - EVENTS // 4, "timeouts": EVENTS // 4,
            "dead_letters": {"label_after_timeout": 1, "second_label": 1, "label_without_event": 5}}


class FailOnce:
    """Event ``i``'s text from the synthetic event that carries ``i``; fails the job once, at the
    first event from ``FAIL_AT`` on made after a checkpoint completed (one always has: the
    source lets only ``PER_CHECKPOINT`` events pass per checkpoint), leaving ``failed-1`` behind."""

    def __init__(self, marker_dir: str, checkpoint_dir: str):
        self._marker, self._checkpoint_dir = os.path.join(marker_dir, "failed-1"), checkpoint_dir

    def __call__(self, synthetic: str) -> str:
        i = int(json.loads(synthetic)["id"].split(":")[0])
        if i >= FAIL_AT and not os.path.exists(self._marker) \
                and glob.glob(os.path.join(self._checkpoint_dir, "*", "chk-*", "_metadata")):
            with open(self._marker, "w") as f:
                f.write(str(i))
            raise RuntimeError(f"injected failure at event {i}")
        return event_text(i)


def _committed_lines(folder) -> list:
    """The lines of the finished part files (not the in-progress ones, which start with a dot)."""
    return [line for path in sorted(glob.glob(os.path.join(str(folder), "**", "part-*"), recursive=True))
            for line in open(path, encoding="utf-8")]


def test_a_failed_online_job_serves_every_event_once_and_joins_every_label_once(tmp_path):
    from pyflink.common import Duration, Encoder, Types, WatermarkStrategy
    from pyflink.common.watermark_strategy import TimestampAssigner
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import FileSink

    from pyflink_tensair import Checkpoints, ServeConfig, join_labels, serve
    from pyflink_tensair.flink import checkpointing
    from pyflink_tensair.flink.sinks import write_json_lines, write_records
    from pyflink_tensair.models import zoo
    from pyflink_tensair.online.synthetic import synthetic_events

    class JsonTime(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp) -> int:
            return int(json.loads(value)["t"])

    env = StreamExecutionEnvironment.get_execution_environment()
    checkpoints = Checkpoints(interval_s=0.3, dir=str(tmp_path / "checkpoints"))
    checkpointing.configure(env, types.SimpleNamespace(checkpoints=checkpoints))
    times = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(JsonTime())
    events = (synthetic_events(env, EVENTS, features=1, per_checkpoint=PER_CHECKPOINT)
              .map(FailOnce(str(tmp_path), checkpoints.dir), output_type=Types.STRING()).uid("events")
              .assign_timestamps_and_watermarks(times).uid("event-times"))
    labels = (env.from_collection(label_texts(), type_info=Types.STRING())
              .assign_timestamps_and_watermarks(times).uid("label-times"))
    served = serve(events, None, model=zoo.quickstart_classifier, config=ServeConfig(batch_size=16))
    joined = join_labels(events, labels, timeout_ms=TIMEOUT_MS)

    def commit(stream, what):
        sink = FileSink.for_row_format(str(tmp_path / what), Encoder.simple_string_encoder()).build()
        stream.sink_to(sink).name(f"commit {what}").uid(f"commit-{what}").set_parallelism(1)

    commit(served.predictions, "predictions")
    commit(joined.records, "joined")
    commit(joined.timeouts, "timeouts")
    commit(joined.dead_letters.union(served.dead_letters), "dead-letters")
    write_json_lines(served.predictions, str(tmp_path), "live")  # the project's own sink: cut back on restore
    write_json_lines(joined.records, str(tmp_path), "live-joined").set_parallelism(1)
    write_records(events.map(str.encode, output_type=Types.PRIMITIVE_ARRAY(Types.BYTE())), str(tmp_path / "records"),
                  "event").set_parallelism(1)  # a file per record, numbered on from the checkpoint's count
    env.execute("online restore")

    assert (tmp_path / "failed-1").exists(), "the job never failed: no checkpoint completed before the last event"
    keys = [re.match(r"\+I\[([^,]+),", line).group(1) for line in _committed_lines(tmp_path / "predictions")]
    assert sorted(keys, key=int) == [str(i) for i in range(EVENTS)]  # every event answered, none twice
    live = [json.loads(line)["key"] for path in glob.glob(str(tmp_path / "live-*.jsonl")) if "joined" not in path
            for line in open(path, encoding="utf-8")]
    assert sorted(live, key=int) == [str(i) for i in range(EVENTS)]  # written as they came, cut back at the restore
    files = sorted(os.listdir(tmp_path / "records"))
    assert files == [f"event-0-{n:06d}.bin" for n in range(EVENTS)], files[-5:]
    assert sorted(json.loads((tmp_path / "records" / f).read_bytes())["id"] for f in files) == list(range(EVENTS))
    joined_ids = [json.loads(line)["id"] for line in _committed_lines(tmp_path / "joined")]
    assert sorted(joined_ids) == sorted(i for i in range(EVENTS) if i % 4) and len(joined_ids) == EXPECTED["joined"]
    assert sorted(json.loads(line)["id"] for line in open(tmp_path / "live-joined-0.jsonl")) == sorted(joined_ids)
    assert len(_committed_lines(tmp_path / "timeouts")) == EXPECTED["timeouts"]
    reasons = [json.loads(line)["reason"] for line in _committed_lines(tmp_path / "dead-letters")]
    assert {r: reasons.count(r) for r in set(reasons)} == EXPECTED["dead_letters"]
