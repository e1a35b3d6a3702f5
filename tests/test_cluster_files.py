"""The standalone cluster's folder, without starting it."""

import os

import pytest


def test_a_cluster_folder_puts_flink_python_on_the_taskmanagers_classpath(tmp_path):
    """Thread-mode replicas need PEMJA loaded once per TaskManager, not once per job."""
    pytest.importorskip("pyflink")
    from pyflink_tensair import cluster

    cluster.write_config(str(tmp_path), taskmanagers=1, slots=1, rest_port=18081, rpc_port=16123)
    names = os.listdir(tmp_path / "lib")
    assert any(n.startswith("flink-python") for n in names) and any(n.startswith("flink-dist") for n in names)
    assert all(os.path.exists(tmp_path / "lib" / n) for n in names)
    assert cluster._environment(str(tmp_path))["FLINK_LIB_DIR"] == str(tmp_path / "lib")
    assert 'classloader.parent-first-patterns.additional: "pemja."' in (tmp_path / "conf" / "config.yaml").read_text()
    cluster.write_config(str(tmp_path), taskmanagers=1, slots=1, rest_port=18081, rpc_port=16123)  # again: links kept
    assert sorted(os.listdir(tmp_path / "lib")) == sorted(names)
