"""A single-node Kafka broker (KRaft: broker and controller in one process, no ZooKeeper) on
127.0.0.1, for tests and local trials. Its configuration, data, log and PID live under ``--dir``;
``stop`` kills exactly the PID recorded there.

    python -m pyflink_tensair.kafka.broker start --dir .kafka     # prints 127.0.0.1:19092
    python -m pyflink_tensair.kafka.broker topic --dir .kafka --topic digits --partitions 2
    python -m pyflink_tensair.kafka.broker stop --dir .kafka

The jars come from Maven Central on first use (:func:`~.artifacts.broker_libs`).
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import subprocess
import sys
import uuid
from typing import Optional

from ..processes import alive, command_line, terminate
from ..errors import KafkaError
from ..waiting import WaitTimeout, wait_until
from .artifacts import KAFKA_VERSION, broker_libs

LOCALHOST = "127.0.0.1"
DEFAULT_DIR = ".kafka"
DEFAULT_PORT = 19092


def _properties(folder: str, port: int, controller_port: int) -> str:
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@{LOCALHOST}:{controller_port}",
        f"listeners=PLAINTEXT://{LOCALHOST}:{port},CONTROLLER://{LOCALHOST}:{controller_port}",
        f"advertised.listeners=PLAINTEXT://{LOCALHOST}:{port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={os.path.join(folder, 'data')}",
        "num.partitions=1",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=true",
        "message.max.bytes=16777216",
    ]) + "\n"


_LOG4J = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""


def _cluster_id() -> str:
    """A random KRaft cluster id. Like Kafka's own ``Uuid.randomUuid``, never one that starts with
    '-': the storage tool's argument parser would read it as an option (1 id in 64 did, and CI failed
    with "argument --cluster-id/-t: expected one argument")."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _pid_file(folder: str) -> str:
    return os.path.join(folder, "broker.pid")


def _port_file(folder: str) -> str:
    return os.path.join(folder, "bootstrap")


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else "java"
    return java


def recorded_pid(folder: str) -> Optional[int]:
    """The PID ``folder`` recorded, if that process is still this folder's broker (a PID left by
    a crash may since have been given to another process, which must not be signalled)."""
    try:
        pid = int(open(_pid_file(folder)).read().strip())
    except (OSError, ValueError):
        return None
    words = command_line(pid)
    if words is None:
        return pid  # gone: harmless to report, alive() says whether it runs
    command, config = " ".join(words), os.path.join(os.path.abspath(folder), "server.properties")
    return pid if "kafka.Kafka" in command and config in command else None


def bootstrap_servers(folder: str) -> str:
    """The running broker's ``host:port``; a ``KafkaError`` if none runs from ``folder``."""
    pid = recorded_pid(folder)
    if pid is None or not alive(pid):
        raise KafkaError(f"no Kafka broker runs from {folder}: start one with "
                         f"'python -m pyflink_tensair.kafka.broker start --dir {folder}'")
    return open(_port_file(folder)).read().strip()


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((LOCALHOST, port)) == 0


def start(folder: str = DEFAULT_DIR, *, port: int = DEFAULT_PORT, controller_port: int = None,
          version: str = KAFKA_VERSION, timeout: float = 120.0) -> str:
    """Formats ``folder/data`` (first start only) and starts the broker; returns its bootstrap
    servers once it answers a metadata request."""
    folder = os.path.abspath(folder)
    pid = recorded_pid(folder)
    if pid is not None and alive(pid):
        raise KafkaError(f"a broker already runs from {folder} (PID {pid}); stop it first")
    if _accepts(port):
        raise KafkaError(f"port {port} on {LOCALHOST} is taken: choose another with --port")
    controller_port = controller_port or port + 1
    libs = broker_libs(version)
    os.makedirs(os.path.join(folder, "log"), exist_ok=True)
    config = os.path.join(folder, "server.properties")
    with open(config, "w") as f:
        f.write(_properties(folder, port, controller_port))
    log4j = os.path.join(folder, "log4j2.properties")
    with open(log4j, "w") as f:
        f.write(_LOG4J.format(log=os.path.join(folder, "log", "broker.log")))
    classpath = os.path.join(libs, "*")
    java_opts = ["-Xms256m", "-Xmx1g", f"-Dlog4j2.configurationFile={log4j}", "-Dkafka.logs.dir=" + os.path.join(folder, "log")]
    if not os.path.isfile(os.path.join(folder, "data", "meta.properties")):
        cluster_id = _cluster_id()
        formatted = subprocess.run([_java(), *java_opts, "-cp", classpath, "kafka.tools.StorageTool", "format",
                                    "-t", cluster_id, "-c", config], capture_output=True, text=True)
        if formatted.returncode != 0:
            raise KafkaError(f"formatting the broker's storage failed:\n{(formatted.stdout + formatted.stderr)[-3000:]}")
    out = open(os.path.join(folder, "log", "broker.out"), "ab")
    process = subprocess.Popen([_java(), *java_opts, "-cp", classpath, "kafka.Kafka", config], stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    with open(_pid_file(folder), "w") as f:
        f.write(str(process.pid))
    servers = f"{LOCALHOST}:{port}"
    with open(_port_file(folder), "w") as f:
        f.write(servers)
    def up():
        if process.poll() is not None:
            os.remove(_pid_file(folder))
            raise KafkaError(f"the broker exited ({process.returncode}); see {folder}/log/broker.log and broker.out")
        return _accepts(port) and _answers(servers)

    try:
        wait_until(up, timeout, interval_s=0.5, what="the broker")
    except WaitTimeout:
        stop(folder)
        raise KafkaError(f"the broker did not answer within {timeout:.0f} s; see {folder}/log/broker.log") from None
    return servers


def _answers(servers: str) -> bool:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError as ClientError

    try:
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=3000)
    except (ClientError, OSError, ValueError):
        return False
    try:
        admin.list_topics()
        return True
    except (ClientError, OSError):
        return False
    finally:
        admin.close()


def stop(folder: str = DEFAULT_DIR, timeout: float = 30.0) -> Optional[int]:
    """Stops the broker whose PID ``folder`` recorded (SIGTERM, then SIGKILL); returns that PID."""
    folder = os.path.abspath(folder)
    pid = recorded_pid(folder)
    if pid is None:
        if os.path.exists(_pid_file(folder)):
            os.remove(_pid_file(folder))  # a stale PID, now another process's: not signalled
        return None
    terminate([pid], timeout)  # reaps it if this process started it
    if os.path.exists(_pid_file(folder)):  # (a second stop finds it gone)
        os.remove(_pid_file(folder))
    return pid


def create_topic(servers: str, topic: str, partitions: int = 1) -> None:
    """Creates ``topic`` (replication factor 1) unless it exists."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("start", "stop", "topic"):
        p = sub.add_parser(name)
        p.add_argument("--dir", default=DEFAULT_DIR, help=f"the broker's folder (default: {DEFAULT_DIR})")
    sub.choices["start"].add_argument("--port", type=int, default=DEFAULT_PORT)
    sub.choices["topic"].add_argument("--topic", required=True)
    sub.choices["topic"].add_argument("--partitions", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            print(start(args.dir, port=args.port), flush=True)
        elif args.command == "stop":
            pid = stop(args.dir)
            print(f"stopped PID {pid}" if pid else f"no broker recorded in {args.dir}")
        else:
            create_topic(bootstrap_servers(args.dir), args.topic, args.partitions)
            print(f"topic {args.topic}: {args.partitions} partition(s)")
    except KafkaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
