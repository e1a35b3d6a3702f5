#!/usr/bin/env bash
# Installs everything the tests need and runs them: the README's test command, and what CI runs.
#   1. a virtual environment in .venv with the pinned requirements and this package;
#   2. the Java feedback channel, compiled against the installed pyflink;
#   3. a standalone Flink cluster (two TaskManagers, 127.0.0.1 only) for the `flink run -py` tests,
#      and a single-node Kafka broker (KRaft, 127.0.0.1; its jars fetched once from Maven Central);
#   4. pytest over tests/ and the package's docstring examples (tests/test_installed_wheel.py builds the
#      wheel, installs it into a fresh virtual environment and runs jobs from it outside the checkout);
#      cluster and broker are stopped by PID after; --durations shows the slowest tests.
# `bash tests/run.sh -m quick` runs the quick tier alone (see the markers in pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."

python_bin="${PYTHON:-$(command -v python3.11 || command -v python3)}"
[ -x .venv/bin/python ] || "$python_bin" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt -e .
.venv/bin/python -c "from pyflink_tensair.jvm import channel_jar; print('feedback channel:', channel_jar())"

# `-m quick` (the tier to run while developing: no JVM, cluster, broker or wheel) needs no services.
if [ "${1:-}" = "-m" ] && [ "${2:-}" = "quick" ]; then
    exec .venv/bin/python -m pytest tests pyflink_tensair benchmarks --doctest-modules -p no:cacheprovider -q \
        --durations=10 "$@"
fi

cluster_dir="$(pwd)/.flink/test-cluster"
.venv/bin/python -m pyflink_tensair.cluster start --dir "$cluster_dir" --taskmanagers 2 --slots 2 \
    --rest-port 28081 --rpc-port 26123
kafka_dir="$(pwd)/.kafka/test-broker"
trap '.venv/bin/python -m pyflink_tensair.cluster stop --dir "$cluster_dir"; .venv/bin/python -m pyflink_tensair.kafka.broker stop --dir "$kafka_dir"' EXIT
.venv/bin/python -m pyflink_tensair.kafka.broker start --dir "$kafka_dir" --port 29092

# pytest exits 5 when it collects no test: with `set -e` that fails the run, as it should.
TENSAIR_CLUSTER_DIR="$cluster_dir" TENSAIR_KAFKA_DIR="$kafka_dir" .venv/bin/python -m pytest tests pyflink_tensair benchmarks \
    --doctest-modules -p no:cacheprovider -q --durations=15 "$@"
