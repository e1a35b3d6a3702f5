"""Reading a Kafka topic in a training job: one JSON object per example.

A record's value is UTF-8 JSON: ``{"x": <features: a number or nested lists of numbers>, "y":
<label>}`` (``"y"`` may be left out for unlabelled streams). :func:`kafka_examples` reads the topic
with Flink's ``KafkaSource`` (its offsets are in every checkpoint, so a restored job resumes where
the checkpoint was taken); :func:`~pyflink_tensair.to_batches` with ``parse=json_example`` turns the
records into mini-batches and sets aside (as dead letters) any record that is not such JSON.

Example::

    env = StreamExecutionEnvironment.get_execution_environment()
    records = kafka_examples(env, "127.0.0.1:19092", "digits")             # what the topic holds now
    batches = text_batches(records, 16, parse=json_example, classes=10, features_shape=(8, 8, 1))
    out = train(batches, model=build_model, config=TrainConfig(replicas=2))

    >>> json_example('{"x": [0.5, 1.0], "y": 1}')
    ([0.5, 1.0], 1)
"""

from __future__ import annotations

import json
from typing import Optional

from ..errors import ConfigError, KafkaError
from ..validation import require_choice, require_int, require_text

UNTIL = ("latest", "never")
STARTS = ("earliest", "latest", "committed")


def json_example(text):
    """``(x, y)`` (or ``(x,)``) of one record's JSON value; raises ``ValueError`` or ``KeyError``
    on anything else (``to_batches`` makes it a dead letter)."""
    example = json.loads(text)
    if not isinstance(example, dict):
        raise ValueError(f"a record is a JSON object with 'x' (and 'y'), not a JSON {type(example).__name__}")
    return (example["x"],) if example.get("y") is None else (example["x"], example["y"])


def encode_example(x, y=None) -> bytes:
    """The value :func:`json_example` reads (``x``: a NumPy array or nested lists)."""
    features = x.tolist() if hasattr(x, "tolist") else x
    label = y.item() if hasattr(y, "item") else y
    return json.dumps({"x": features} if label is None else {"x": features, "y": label}, separators=(",", ":")).encode()


def topic_size(servers: str, topic: str) -> int:
    """Records the topic holds now (end minus beginning offsets, over its partitions)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError as ClientError

    # a missing broker is an error within 10 s, not kafka-python's 30 s bootstrap wait
    bootstrap = {"bootstrap_timeout_ms": 10000} if "bootstrap_timeout_ms" in KafkaConsumer.DEFAULT_CONFIG else {}
    try:
        consumer = KafkaConsumer(bootstrap_servers=servers, request_timeout_ms=10000, **bootstrap)
    except (ClientError, OSError, ValueError) as err:
        raise KafkaError(f"no Kafka answers at {servers}: {err}. Is the broker running (python -m "
                         "pyflink_tensair.kafka.broker start)?") from err
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise KafkaError(f"topic {topic!r} does not exist at {servers}: produce to it first "
                             "(python -m pyflink_tensair.cli.produce)")
        parts = [TopicPartition(topic, p) for p in partitions]
        end, begin = consumer.end_offsets(parts), consumer.beginning_offsets(parts)
        return sum(end[p] - begin[p] for p in parts)
    except ClientError as err:
        raise KafkaError(f"Kafka at {servers} did not say how many records {topic!r} holds: {err!r}") from err
    finally:
        consumer.close()


def kafka_examples(env, servers: str, topic: str, *, group_id: str = "pyflink-tensair", start: str = "earliest",
                   until: str = "latest", connector: Optional[str] = None, parallelism: int = 1,
                   name: str = "tensair"):
    """A stream of the topic's record values (JSON text), read by Flink's ``KafkaSource``.

    ``start``: where a new job begins (``earliest``, ``latest``, or the group's ``committed``
    offsets); a restored job begins at its checkpoint's offsets. ``until``: ``latest`` ends the
    stream at the offsets the topic had when the job started (a bounded run, like the other
    sources), ``never`` follows the topic for good. ``connector``: the path of Flink's Kafka
    connector jar (default: fetched once from Maven Central, :func:`~.artifacts.connector_jar`).
    """
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.common.serialization import SimpleStringSchema
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.kafka import KafkaOffsetResetStrategy, KafkaOffsetsInitializer, KafkaSource

    from ..flink.environment import add_jar
    from .artifacts import connector_jar

    require_choice("start", start, STARTS)
    require_choice("until", until, UNTIL)
    if not isinstance(servers, str) or not all(":" in server for server in servers.split(",")):
        raise ConfigError(f"servers must be HOST:PORT[,HOST:PORT...]. Received: servers={servers!r}")
    require_text("topic", topic)
    require_text("group_id", group_id)
    require_text("connector", connector, "the path of a jar", optional=True)
    require_int("parallelism", parallelism, 1)
    if not isinstance(env, StreamExecutionEnvironment):
        raise ConfigError(f"env must be a pyflink StreamExecutionEnvironment. Received: env={env!r:.100}")
    add_jar(env, connector_jar(connector))
    starting = {"earliest": KafkaOffsetsInitializer.earliest(), "latest": KafkaOffsetsInitializer.latest(),
                "committed": KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)}[start]
    builder = (KafkaSource.builder().set_bootstrap_servers(servers).set_topics(topic).set_group_id(group_id)
               .set_starting_offsets(starting).set_value_only_deserializer(SimpleStringSchema())
               .set_property("partition.discovery.interval.ms", "0" if until == "latest" else "10000"))
    if until == "latest":
        builder = builder.set_bounded(KafkaOffsetsInitializer.latest())
    stream = env.from_source(builder.build(), WatermarkStrategy.no_watermarks(), f"{name}: kafka {topic}",
                             type_info=Types.STRING())
    return stream.uid(f"{name}-kafka-source").set_parallelism(parallelism)
