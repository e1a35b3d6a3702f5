import os
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))  # tests import flink_harness


def _ship_harness_by_value():
    """Python workers cannot import the tests folder: send the harness' functions by value."""
    try:
        import cloudpickle
        import flink_harness
    except ImportError:  # no pyflink installed: the Flink tests skip themselves
        return
    cloudpickle.register_pickle_by_value(flink_harness)


_ship_harness_by_value()


# The markers of the tests that start something costly (registered in pyproject.toml, where
# --strict-markers refuses any other): every other test is "quick", and `-m quick` runs those alone.
COSTLY = ("flink", "cluster", "kafka", "wheel")


def pytest_collection_modifyitems(config, items):
    for item in items:
        # a test that takes the cluster or the broker needs it, whatever its module says
        for fixture, marker in (("flink_cluster", "cluster"), ("kafka_broker", "kafka")):
            if fixture in getattr(item, "fixturenames", ()) and not item.get_closest_marker(marker):
                item.add_marker(getattr(pytest.mark, marker))
        if not any(item.get_closest_marker(name) for name in COSTLY):
            item.add_marker(pytest.mark.quick)


@pytest.fixture(autouse=True)
def _quick_tests_start_no_jvm(request, monkeypatch):
    """A quick test that would launch PyFlink's JVM (a Flink job, or just the gateway) fails, naming
    the markers it lacks: the quick tier stays free of Flink by construction, not by a list. (In a
    full run a costly test may have launched the JVM before: the guard bites in `-m quick` runs.)"""
    if request.node.get_closest_marker("quick") is None:
        return
    try:
        from pyflink import java_gateway
    except ImportError:
        return

    def refuse(*args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} launches PyFlink's JVM but carries none of the markers "
                             f"{', '.join(COSTLY)} (pyproject.toml): mark it")

    monkeypatch.setattr(java_gateway, "launch_gateway", refuse)


@pytest.fixture(scope="session")
def _session_cluster(tmp_path_factory):
    """The cluster .ci/run started (TENSAIR_CLUSTER_DIR), or one of our own for this session."""
    folder = os.environ.get("TENSAIR_CLUSTER_DIR")
    if folder:
        yield os.path.abspath(folder)
        return
    from pyflink_tensair import cluster

    folder = str(tmp_path_factory.mktemp("flink-cluster"))
    cluster.start(folder, taskmanagers=2, slots=2, rest_port=18181, rpc_port=16223)
    try:
        yield folder
    finally:
        cluster.stop(folder)


@pytest.fixture
def flink_cluster(_session_cluster):
    """The session's standalone cluster, as each test expects it: two live TaskManagers, both
    listed by the JobManager, every slot free (a test that killed one, or a TaskManager that died
    with a failed-over job, leaves it otherwise for a while)."""
    from pyflink_tensair import cluster

    cluster.await_ready(_session_cluster, 2)
    return _session_cluster
