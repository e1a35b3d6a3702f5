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
    assert cluster.flink_environment(str(tmp_path))["FLINK_LIB_DIR"] == str(tmp_path / "lib")
    assert cluster.read_config(str(tmp_path))["classloader.parent-first-patterns.additional"] == "pemja."
    cluster.write_config(str(tmp_path), taskmanagers=1, slots=1, rest_port=18081, rpc_port=16123)  # again: links kept
    assert sorted(os.listdir(tmp_path / "lib")) == sorted(names)


class _FakeRest:
    """The JobManager's savepoint resources: each trigger answers with the next outcome."""

    def __init__(self, outcomes, state="RUNNING"):
        self.outcomes, self.state, self.triggers = list(outcomes), state, 0

    def post(self, url, body):
        self.triggers += 1
        return {"request-id": str(self.triggers)}

    def get(self, url):
        if url.endswith("/jobs/j"):
            return {"state": self.state}
        outcome = self.outcomes[int(url.rsplit("/", 1)[1]) - 1]
        operation = {"location": outcome} if outcome.startswith("file:") else {"failure-cause": {"stack-trace": outcome}}
        return {"status": {"id": "COMPLETED"}, "operation": operation}


def _fake(monkeypatch, rest):
    from pyflink_tensair import cluster
    from pyflink_tensair.cluster import rest as rest_api

    monkeypatch.setattr(rest_api, "rest_url", lambda folder: "http://jm")
    monkeypatch.setattr(rest_api, "rest_post", rest.post)
    monkeypatch.setattr(rest_api, "rest_get", rest.get)
    monkeypatch.setattr(rest_api.time, "sleep", lambda s: None)
    return cluster


DECLINED = "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint was declined (task is closing)\n\tat ..."


GONE = ("java.util.concurrent.CompletionException: org.apache.flink.runtime.checkpoint.CheckpointException: Task "
        "local checkpoint failure.\n\tat ...\nCaused by: CheckpointException: TaskManager received a checkpoint "
        "request for unknown task d606_fb7b_0_0. Failure reason: Task local checkpoint failure.")


def test_a_savepoint_declined_by_a_finishing_task_is_taken_again(monkeypatch):
    rest = _FakeRest([DECLINED, GONE, "file:/sp/savepoint-1"])
    cluster = _fake(monkeypatch, rest)
    assert cluster.savepoint("dir", "/sp", job_id="j") == "file:/sp/savepoint-1" and rest.triggers == 3
    rest = _FakeRest([DECLINED, "file:/sp/savepoint-2"])
    cluster = _fake(monkeypatch, rest)
    assert cluster.stop_with_savepoint("dir", "/sp", job_id="j") == "file:/sp/savepoint-2" and rest.triggers == 2


def test_a_savepoint_that_fails_otherwise_or_after_the_job_ended_says_why(monkeypatch):
    cluster = _fake(monkeypatch, _FakeRest(["java.io.IOException: disk full\n\tat ..."]))
    with pytest.raises(RuntimeError, match="savepoint of job j failed: java.io.IOException: disk full$"):
        cluster.savepoint("dir", "/sp", job_id="j")
    rest = _FakeRest([DECLINED, "file:/never"], state="FINISHED")
    cluster = _fake(monkeypatch, rest)
    with pytest.raises(RuntimeError, match="task is closing"):
        cluster.savepoint("dir", "/sp", job_id="j")
    assert rest.triggers == 1


def test_submitting_to_a_folder_without_a_running_cluster_says_how_to_start_one(tmp_path, capsys):
    from pyflink_tensair import ClusterError, cluster

    with pytest.raises(ClusterError, match="no running cluster in .*: start one with 'python -m pyflink_tensair.cluster start"):
        cluster.submit(str(tmp_path), ["jobs/quickstart.py"])
    assert cluster.main(["submit", "--dir", str(tmp_path), "jobs/quickstart.py"]) == 2
    assert "error: no running cluster in" in capsys.readouterr().err
