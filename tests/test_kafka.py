"""Kafka end to end (issue 14): a real broker, jobs that train from a topic, offsets in checkpoints."""

import json
import os
import time

import numpy as np
import pytest

pytest.importorskip("pyflink")

from pyflink_tensair import cluster, processes  # noqa: E402
from pyflink_tensair.waiting import wait_until  # noqa: E402
from pyflink_tensair.errors import ConfigError, KafkaError  # noqa: E402
from pyflink_tensair.kafka import broker  # noqa: E402
from pyflink_tensair.core import wire  # noqa: E402
from pyflink_tensair.kafka.source import encode_example, json_example  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join(ROOT, "jobs", "image_classification.py")
WORD2VEC = os.path.join(ROOT, "jobs", "word2vec.py")
BAD_RECORDS = [b"not json at all", b'{"x": [1, 2], "y": 3}', b'{"y": 1}']  # no JSON, wrong shape, no features


def test_a_record_is_json_with_features_and_label():
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    assert json_example(encode_example(x, np.int64(3)).decode()) == ([[0.0, 1.0], [2.0, 3.0]], 3)
    assert json_example('{"x": [1]}') == ([1],)
    with pytest.raises(ValueError):
        json_example("[1, 2]")
    with pytest.raises(KeyError):
        json_example('{"y": 1}')


def test_a_chunk_becomes_one_batch_and_its_bad_records_dead_letters():
    from pyflink_tensair.core import wire
    from pyflink_tensair.flink.chunk_batchers import TextChunkBatcher

    batcher = TextChunkBatcher(4, json_example, (2,), 3, 0.0)
    chunk = ["5", "20", '{"x": [1, 2], "y": 0}', "oops", '{"x": [3, 4], "y": 7}', '{"x": [5, 6], "y": 2}']
    out = list(batcher(chunk))
    letters = [wire.decode_dead_letter(o) for o in out if wire.peek_kind(o) == wire.KIND_DEAD_LETTER]
    assert [(l.reason, l.position) for l in letters] == [("not_a_record", 21), ("label_out_of_range", 22)]
    batch = wire.decode_batch(out[-1])
    assert batch.meta["id"] == 5 and batch.x.tolist() == [[1, 2], [5, 6]] and batch.y.tolist() == [0, 2]


def image_job_args(argv):
    import importlib.util

    spec = importlib.util.spec_from_file_location("image_classification_job", IMAGES)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job.parse_args(argv)


def test_kafka_flags_say_what_is_missing():
    assert image_job_args(["--source", "kafka", "--bootstrap-servers", "h:1", "--topic", "t"]).kafka_until == "latest"
    with pytest.raises(ConfigError, match="--source kafka needs --bootstrap-servers HOST:PORT and --topic NAME"):
        image_job_args(["--source", "kafka", "--topic", "t"])
    with pytest.raises(ConfigError, match="--topic needs --source kafka"):
        image_job_args(["--topic", "t"])


def test_a_missing_connector_jar_says_how_to_get_one(tmp_path):
    from pyflink_tensair.kafka.artifacts import connector_jar

    with pytest.raises(KafkaError, match="Flink's Kafka connector jar is needed"):
        connector_jar(str(tmp_path / "nothing.jar"))


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch):
    # One random id in 64 starts with '-', which the storage tool reads as an option (a CI run failed so).
    import uuid

    draws = iter([uuid.UUID(bytes=bytes([0xF8]) + bytes(15)), uuid.UUID(bytes=bytes(16))])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))
    assert broker._cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"


def test_no_broker_at_the_address_is_a_clear_error():
    from pyflink_tensair.kafka.source import topic_size

    with pytest.raises(KafkaError, match="no Kafka answers at 127.0.0.1:1|does not exist"):
        topic_size("127.0.0.1:1", "t")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """The broker .ci/run started (TENSAIR_KAFKA_DIR), or one of our own for this session."""
    folder = os.environ.get("TENSAIR_KAFKA_DIR")
    if folder:
        yield broker.bootstrap_servers(folder)
        return
    folder = str(tmp_path_factory.mktemp("kafka"))
    servers = broker.start(folder, port=19192)
    try:
        yield servers
    finally:
        broker.stop(folder)


def _run_job(script, *args):
    """A job on the local mini-cluster, its main(argv) in this process (flink_harness.run_job_here:
    a process of its own adds about 17 s of start to each)."""
    from flink_harness import run_job_here

    return run_job_here(os.path.basename(script), *args)


def _fill(servers, topic, count, bad=()):
    from kafka import KafkaProducer

    from pyflink_tensair.cli.produce import examples
    from pyflink_tensair.kafka.produce import produce

    sent = produce(servers, topic, examples("digits", limit=count), partitions=2)
    if bad:
        producer = KafkaProducer(bootstrap_servers=servers)
        for value in bad:
            producer.send(topic, value, partition=0)
        producer.close()
    return sent


def _batch_sizes(outdir) -> dict:
    """Batch id -> examples in it, from the image job's predicted labels (a batch predicted again
    after a restore is the same batch)."""
    sizes = {}
    for path in outdir.glob("predictions-*.jsonl"):
        for line in open(path):
            row = json.loads(line)
            sizes[row["batch_id"]] = len(row["labels"])
    return sizes


def test_two_replicas_train_from_a_topic_and_set_its_bad_records_aside(kafka_broker, tmp_path):
    """The image job from a topic on a local mini-cluster (the same job from Kafka with `flink run`
    on the cluster: the recovery test below)."""
    topic = f"digits-{int(time.time())}"
    assert _fill(kafka_broker, topic, 400, BAD_RECORDS) == 400
    summary_path = tmp_path / "summary.json"
    result = _run_job(IMAGES, "--source", "kafka", "--bootstrap-servers", kafka_broker, "--topic", topic,
                      "--replicas", "2", "--batch-size", "8", "--summary", str(summary_path),
                      "--outdir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    # 400 good records among 403, batched on the JVM: full batches of 8, a bad record takes no place
    assert summary["batches"] == 50 and summary["finished_replicas"] == [0, 1]
    sizes = _batch_sizes(tmp_path / "out")
    assert sorted(sizes) == list(range(50)) and set(sizes.values()) == {8}  # every good record trained once
    assert summary["dead_letters"] == len(BAD_RECORDS)
    letters = [json.loads(line) for path in (tmp_path / "out").glob("dead-letters-*.jsonl") for line in open(path)]
    assert sorted(letter["reason"] for letter in letters) == ["not_a_record", "not_a_record", "wrong_shape"]
    # 50 steps of the digits CNN on batches of 8: held-out 0.38-0.41 in-process over seeds 0-2
    # (pyflink_tensair.simulate); a model that never applies an update: 0.09-0.12
    assert summary["holdout_accuracy"] > 0.3, summary


@pytest.mark.cluster
def test_a_lost_taskmanager_resumes_from_the_checkpointed_offsets_and_trains_every_record_once(
        kafka_broker, flink_cluster, tmp_path):
    """The fault-tolerance test on the cluster, with the Kafka source: 1,200 records in batches of 4,
    replayed at 10 batches/s so that a TaskManager dies mid-training; the restored job resumes at
    the checkpoint's offsets with the batcher's partial batch, so the final state holds 300 full
    batches, each trained once, and the synchronous replicas stay identical."""
    import threading

    from pyflink_tensair.core.events import Metrics

    from test_cluster import _checkpoint_after_step, _retrained_after_restores

    topic = f"recovery-{int(time.time())}"
    assert _fill(kafka_broker, topic, 1200) == 1200
    url = cluster.rest_url(flink_cluster)
    summary_path = tmp_path / "summary.json"
    outcome = {}
    args = [IMAGES, "--source", "kafka", "--bootstrap-servers", kafka_broker, "--topic", topic, "--replicas", "2",
            "--staleness-bound", "0", "--batch-size", "4", "--rate", "10", "--checkpoints-interval-s", "2",
            "--summary", str(summary_path), "--outdir", str(tmp_path / "out")]
    runner = threading.Thread(target=lambda: outcome.update(result=cluster.submit(flink_cluster, args, timeout=600)))
    runner.start()
    try:
        job_id = cluster.running_job(flink_cluster)
        _checkpoint_after_step(url, job_id, 20)
        victim = cluster.taskmanager_pids(flink_cluster)[0]
        killed = cluster.kill_taskmanager(flink_cluster, victim)
        # The TaskManager first, then whatever Python workers it had: with the replicas in its JVM
        # (thread mode) a TaskManager that hosts no process-mode operator has none.
        assert killed[0] == victim, killed
        wait_until(lambda: not any(processes.alive(pid) for pid in killed), 10, what=f"{killed} to die")
        cluster.await_failover(flink_cluster, job_id)
    finally:
        runner.join(600)
    result = outcome["result"]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    records = [Metrics.from_json(line) for path in sorted((tmp_path / "out").glob("metrics-*.jsonl")) for line in open(path)]
    restored = [m for m in records if m.phase == "restored"]
    assert summary["restores"] >= 2 and {m.replica for m in restored} == {0, 1}  # both resumed...
    assert min(m.model_version for m in restored) >= 20, restored  # ...from a checkpoint after step 20
    # what they trained again is exactly what they had trained after the steps they resumed at
    assert summary["retrained_batches"] == _retrained_after_restores(records), summary["retrained_batches"]
    assert summary["batches"] == 300 and summary["finished_replicas"] == [0, 1]  # no record lost, no batch twice
    assert summary["model_versions"] == [150, 150] and summary["replica_max_weight_diff"] == 0.0
    assert summary["dead_letters"] == 0 and cluster.rest_get(f"{url}/jobs/{job_id}")["state"] == "FINISHED"
    sizes = _batch_sizes(tmp_path / "out")
    assert sorted(sizes) == list(range(300)) and set(sizes.values()) == {4}  # 1,200 records, none lost


def test_the_readmes_kafka_snippet_runs_as_written(kafka_broker, tmp_path):
    """The README's "Train from Kafka" block, only the broker's address and the topic changed."""
    import re

    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    snippet = re.search(r"```python\n(.*?)```", readme[readme.index("## Train from Kafka"):], re.S).group(1)
    topic = f"readme-{int(time.time())}"
    assert _fill(kafka_broker, topic, 320) == 320  # 20 batches of 16
    assert snippet.count('"127.0.0.1:19092", "digits"') == 1, snippet
    code = snippet.replace('"127.0.0.1:19092", "digits"', f'"{kafka_broker}", "{topic}"')
    from flink_harness import run_code_here

    result = run_code_here(code, tmp_path)  # as written, in this process
    assert result.returncode == 0, result.stderr[-4000:]
    assert "replicas trained: 2" in result.stdout, result.stdout


def test_word2vec_trains_from_a_topic_of_lines(kafka_broker, tmp_path):
    """The word2vec job from a topic of text lines (one partition: chunks in a known order), a line
    that is not UTF-8 among them: the batches are those of the chunks, the bad line a dead letter,
    and the vectors learn which words go together."""
    from kafka import KafkaProducer

    from flink_harness import write_topic_corpus
    from pyflink_tensair.cli.produce import text_lines
    from pyflink_tensair.kafka.produce import produce
    from pyflink_tensair.word2vec import CorpusBatches, LineChunkBatches

    corpus, topic = write_topic_corpus(tmp_path / "corpus"), f"lines-{int(time.time())}"
    lines = list(text_lines(f"text:{corpus}", passes=3))
    assert produce(kafka_broker, topic, lines) == 4500
    producer = KafkaProducer(bootstrap_servers=kafka_broker)
    producer.send(topic, b"a line \xff\xfe that is not UTF-8")
    producer.close()
    settings = ["--vocab-size", "500", "--dim", "16", "--batch-size", "256", "--learning-rate", "32"]
    summary_path = tmp_path / "summary.json"
    result = _run_job(WORD2VEC, "--source", "kafka", "--bootstrap-servers", kafka_broker, "--topic", topic,
                      "--corpus", str(corpus), "--replicas", "2", *settings, "--lines-per-chunk", "512",
                      "--probe-words", "king", "--outdir", str(tmp_path / "out"), "--summary", str(summary_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    make = LineChunkBatches(CorpusBatches(corpus, vocab_size=500, batch_size=256))
    texts = [line.decode() for line in lines] + ["a line \ufffd\ufffd that is not UTF-8"]
    expected = sum(wire.peek_kind(made) == wire.KIND_BATCH for n in range(0, len(texts), 512)
                   for made in make([str(n // 512), str(n), *texts[n:n + 512]]))
    assert summary["batches"] == expected and summary["dead_letters"] == 1 and summary["finished_replicas"] == [0, 1]
    cosine = summary["cosine"]
    assert cosine["cooccurring_after"] > cosine["shuffled_after"] + 0.1



def test_word2vec_grows_its_vocabulary_from_a_topic_with_no_corpus(kafka_broker, tmp_path):
    """No --corpus: words get rows as the topic brings them (rows that change hands:
    test_id_tables_flink.py); the vectors learn which words go together as with the vocabulary
    given in advance, and the final model and its exports carry the map."""
    from flink_harness import write_topic_corpus
    from pyflink_tensair.cli.produce import text_lines
    from pyflink_tensair.embeddings import id_maps
    from pyflink_tensair.kafka.produce import produce
    from pyflink_tensair.models.export import exported_models

    corpus, topic = write_topic_corpus(tmp_path / "corpus"), f"stream-lines-{int(time.time())}"
    assert produce(kafka_broker, topic, list(text_lines(f"text:{corpus}", passes=3))) == 4500
    summary_path, outdir = tmp_path / "summary.json", tmp_path / "out"
    result = _run_job(WORD2VEC, "--source", "kafka", "--bootstrap-servers", kafka_broker, "--topic", topic,
                      "--judge-corpus", str(corpus), "--vocab-size", "40", "--min-count", "3", "--dim", "16",
                      "--batch-size", "256", "--learning-rate", "32", "--replicas", "2", "--lines-per-chunk", "512",
                      "--exports-every-s", "2", "--outdir", str(outdir), "--summary", str(summary_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["vocabulary"] == "stream" and summary["finished_replicas"] == [0, 1]
    assert summary["stream_vocabulary_words"] == summary["judge_words_held"] == 34  # every word of the topic
    cosine = summary["cosine"]
    assert cosine["cooccurring_after"] > cosine["shuffled_after"] + 0.1
    exports = exported_models(str(outdir / "exports"))
    assert exports and set(id_maps(exports[-1][1])["words"].ids) <= set(corpus.joinpath("topics.txt").read_text().split())


def test_the_online_loop_reads_kafka_json_tables_declared_in_sql_and_gives_a_predictions_table(kafka_broker, tmp_path):
    """Events and labels as Flink SQL tables over Kafka topics (JSON), named columns mapped to the
    model's inputs, a rowtime for the label join; the predictions come back as a Table."""
    from kafka import KafkaProducer
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    from pyflink_tensair import join_labels, serve
    from pyflink_tensair.flink.environment import add_jar
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.kafka.artifacts import connector_jar
    from pyflink_tensair.models import zoo
    from pyflink_tensair.online.sql_tables import events_from_table, labels_from_table, predictions_table

    suffix = str(int(time.time() * 1000))
    topics = {"events": f"table-events-{suffix}", "labels": f"table-labels-{suffix}"}
    for topic in topics.values():
        broker.create_topic(kafka_broker, topic)
    features = [f"f{j}" for j in range(20)]
    producer = KafkaProducer(bootstrap_servers=kafka_broker)
    for i in range(60):
        producer.send(topics["events"], json.dumps({"id": i, "ms": 1000 * i, **{f: (i + j) % 5 / 5.0 for j, f in
                                                                                  enumerate(features)}}).encode())
        if i % 2 == 0:  # every other event is clicked on or not half a second later; the rest time out
            producer.send(topics["labels"], json.dumps({"id": i, "clicked": i % 4 // 2, "ms": 1000 * i + 500}).encode())
    producer.close()

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    add_jar(env, connector_jar())
    t_env = StreamTableEnvironment.create(env)
    columns = {"events": ", ".join(f"`{f}` DOUBLE" for f in features), "labels": "`clicked` INT"}
    for name, topic in topics.items():
        t_env.execute_sql(f"""
            CREATE TABLE {name} (`id` BIGINT, {columns[name]}, `ms` BIGINT,
                                 `ts` AS TO_TIMESTAMP_LTZ(`ms`, 3), WATERMARK FOR `ts` AS `ts`)
            WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}',
                  'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset', 'format' = 'json')""")
    events = events_from_table(t_env, t_env.from_path("events"), id="id", features=features, time="ts")
    labels = labels_from_table(t_env, t_env.from_path("labels"), id="id", label="clicked", time="ts")
    served = serve(events, None, model=zoo.quickstart_classifier)
    joined = join_labels(events, labels, timeout_ms=2000)
    predictions = predictions_table(t_env, served)
    assert list(predictions.get_resolved_schema().get_column_names()) == [
        "key", "prediction", "model_version", "model_age_ms", "served_at_ms"]
    write_json_lines(t_env.to_data_stream(predictions.select(predictions.key, predictions.model_version)),
                     str(tmp_path), "predictions")
    write_json_lines(joined.records, str(tmp_path), "joined")
    write_json_lines(joined.timeouts, str(tmp_path), "timeouts")
    env.execute("online loop from tables")

    def lines(prefix):
        return [json.loads(line) for path in tmp_path.glob(f"{prefix}-*.jsonl") for line in open(path)]

    assert sorted(int(r["key"]) for r in lines("predictions")) == list(range(60))
    records = lines("joined")
    assert sorted(int(r["id"]) for r in records) == list(range(0, 60, 2))
    assert all(r["y"] == int(r["id"]) % 4 // 2 and r["x"] == [(int(r["id"]) + j) % 5 / 5.0 for j in range(20)]
               for r in records)  # the named columns, in the order given
    assert sorted(int(t["id"]) for t in lines("timeouts")) == list(range(1, 60, 2))
