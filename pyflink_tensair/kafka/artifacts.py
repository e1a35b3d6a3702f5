"""The broker's jars and Flink's Kafka connector, fetched from Maven Central into the user's cache.

The connector is one shaded jar, downloaded and checked against Maven Central's SHA-1. The broker
(``org.apache.kafka:kafka_2.13``) has some forty runtime dependencies, so Maven resolves them.

Example (not a doctest: the first call downloads; the Kafka tests make it)::

    jar = connector_jar()
    os.path.basename(jar)   # 'flink-sql-connector-kafka-5.0.0-2.2.jar'
"""

from __future__ import annotations

import glob
import hashlib
import http.client
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from typing import Optional

from ..cache import cache_dir
from ..errors import KafkaError

MAVEN_CENTRAL = os.environ.get("PYFLINK_TENSAIR_MAVEN", "https://repo.maven.apache.org/maven2")
# No build for Flink 2.3 is published; the 2.2 build runs on PyFlink 2.3 (tests/test_kafka.py).
CONNECTOR_VERSION = "5.0.0-2.2"
KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.24.3"  # the broker's own log4j; its SLF4J binding is not a dependency of kafka_2.13

_CONNECTOR_HINT = ("Flink's Kafka connector jar is needed to read a topic: pass its path with --kafka-connector "
                   "(a cluster may already have it in lib/), or let pyflink_tensair fetch it from Maven Central "
                   f"(org.apache.flink:flink-sql-connector-kafka:{CONNECTOR_VERSION}).")


def _download(url: str, target: str) -> None:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
        with urllib.request.urlopen(url + ".sha1", timeout=60) as response:
            expected = response.read().decode().split()[0].strip()
    except (urllib.error.URLError, OSError, http.client.HTTPException, IndexError, UnicodeDecodeError) as err:
        raise KafkaError(f"could not fetch {url}: {err!r}. {_CONNECTOR_HINT}") from err
    if hashlib.sha1(data).hexdigest() != expected:
        raise KafkaError(f"{url} does not match its published SHA-1 ({expected}): not saved")
    partial = target + ".part"
    with open(partial, "wb") as f:
        f.write(data)
    os.replace(partial, target)  # whole or not at all


def connector_jar(path: Optional[str] = None) -> str:
    """The Flink Kafka connector jar: ``path`` if given (checked), else the cached copy, fetched
    from Maven Central on first use."""
    if path:
        if not os.path.isfile(path) or not path.endswith(".jar"):
            raise KafkaError(f"no jar at {path}. {_CONNECTOR_HINT}")
        return os.path.abspath(path)
    name = f"flink-sql-connector-kafka-{CONNECTOR_VERSION}.jar"
    target = os.path.join(cache_dir(), "jars", name)
    if not os.path.isfile(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        _download(f"{MAVEN_CENTRAL}/org/apache/flink/flink-sql-connector-kafka/{CONNECTOR_VERSION}/{name}", target)
    return target


_BROKER_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pyflinktensair</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <repositories><repository><id>central</id><url>{central}</url></repository></repositories>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>{log4j}</version></dependency>
  </dependencies>
</project>
"""


def broker_libs(version: str = KAFKA_VERSION) -> str:
    """The folder of the broker's jars (``kafka_2.13`` and its runtime dependencies), resolved by
    Maven into the cache on first use."""
    home = os.path.join(cache_dir(), f"kafka-{version}")
    libs = os.path.join(home, "libs")
    if os.path.isfile(os.path.join(libs, ".complete")):
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaError("Maven ('mvn') is needed once to fetch the Kafka broker's jars from Maven Central: install "
                         "it (e.g. 'apt-get install maven'), or point --bootstrap-servers at a Kafka of your own")
    os.makedirs(home, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="resolving-", dir=home) as build:  # same file system: renamed whole
        with open(os.path.join(build, "pom.xml"), "w") as f:
            f.write(_BROKER_POM.format(central=MAVEN_CENTRAL, kafka=version, log4j=LOG4J_VERSION))
        staging = os.path.join(build, "libs")
        result = subprocess.run([mvn, "-q", "-B", "dependency:copy-dependencies", "-DincludeScope=runtime",
                                 f"-DoutputDirectory={staging}"], cwd=build, capture_output=True, text=True)
        if result.returncode != 0 or not glob.glob(os.path.join(staging, f"kafka_2.13-{version}.jar")):
            raise KafkaError(f"Maven could not fetch org.apache.kafka:kafka_2.13:{version}:\n"
                             f"{(result.stdout + result.stderr)[-3000:]}")
        open(os.path.join(staging, ".complete"), "w").close()
        if os.path.isdir(libs):
            shutil.rmtree(libs)  # an incomplete copy
        try:
            os.rename(staging, libs)
        except OSError:
            if not os.path.isfile(os.path.join(libs, ".complete")):  # not another process's complete copy
                raise
    return libs
