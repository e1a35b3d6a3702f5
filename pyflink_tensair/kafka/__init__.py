"""Kafka end to end: a local broker for tests and trials, the Flink connector, a producer.

- :mod:`.artifacts` fetches the broker's jars and Flink's Kafka connector from Maven Central
  into the user's cache (nothing is committed);
- :mod:`.broker` starts a single-node KRaft broker on 127.0.0.1 and stops it by PID;
- :mod:`.source` reads a topic in a Flink job (records: one JSON object per example);
- :mod:`.produce` writes records to a topic at a given rate (the command line with the
  use cases' data sets: :mod:`pyflink_tensair.cli.produce`).

    python -m pyflink_tensair.kafka.broker start --dir .kafka          # prints the bootstrap servers
    python -m pyflink_tensair.cli.produce --bootstrap-servers 127.0.0.1:19092 --topic digits --data digits
    python jobs/image_classification.py --source kafka --bootstrap-servers 127.0.0.1:19092 --topic digits
    python -m pyflink_tensair.kafka.broker stop --dir .kafka
"""
