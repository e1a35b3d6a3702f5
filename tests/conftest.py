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


def pytest_configure(config):
    config.addinivalue_line("markers", "flink: runs Flink jobs on a local mini-cluster")
    config.addinivalue_line("markers", "cluster: needs the standalone cluster that .ci/run starts")


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
