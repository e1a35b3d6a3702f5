"""Writes records to a Kafka topic at a given rate (the jobs' JSON examples, :mod:`.source`).

The command line, with the use cases' data sets, is :mod:`pyflink_tensair.cli.produce`::

    python -m pyflink_tensair.cli.produce --bootstrap-servers 127.0.0.1:19092 --topic digits --data digits --rate 200
"""

from __future__ import annotations

import sys
import time

from ..errors import KafkaError


def produce(servers: str, topic: str, records, *, rate: float = 0.0, partitions: int = 1,
            progress_every: float = 3.0, out=sys.stdout) -> int:
    """Sends ``records`` to ``topic``, paced at ``rate`` per second (0: unpaced); returns how many
    the broker acknowledged. A record is ``(x, y)`` (sent as :func:`~.source.encode_example`'s
    JSON) or ``bytes`` (sent as they are: e.g. a line of text for the word2vec job)."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as ClientError

    from .broker import create_topic
    from .source import encode_example

    try:
        create_topic(servers, topic, partitions)
        producer = KafkaProducer(bootstrap_servers=servers, linger_ms=5, max_request_size=16 << 20)
    except (ClientError, OSError, ValueError) as err:
        raise KafkaError(f"no Kafka answers at {servers}: {err}") from err
    began = last = time.time()
    sent = 0
    try:
        for record in records:
            if rate > 0:
                wait = began + sent / rate - time.time()
                if wait > 0:
                    time.sleep(wait)
            value = bytes(record) if isinstance(record, (bytes, bytearray)) else encode_example(*record)
            producer.send(topic, value, partition=sent % partitions)
            sent += 1
            if time.time() - last >= progress_every:
                last = time.time()
                print(f"[{last - began:7.1f}s] {sent} records to {topic} ({sent / (last - began):.0f}/s)", file=out, flush=True)
        producer.flush()
    finally:
        producer.close()
    print(f"{sent} records to {topic} in {time.time() - began:.1f} s", file=out, flush=True)
    return sent
