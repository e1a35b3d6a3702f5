"""Issue 24: reading metrics as thread-mode jobs end must not crash a TaskManager.

PyFlink's thread-mode gauges called Python from Flink's metric thread; a metrics query between a
task closing its Python operators and Flink closing the task's metric group killed the
TaskManager (docs/reliability.md). The replicas' metrics are now Java gauges that the task
thread sets (:mod:`pyflink_tensair.flink.replica_metrics`). The storm on the cluster is in
``tests/test_cluster.py`` (every metric queried without pause while the replica-metrics job runs
and ends); ``python -m benchmarks.metrics_storm`` runs longer ones.
"""

import pytest

from pyflink_tensair.flink.replica_metrics import ReplicaMetrics


class _Held:
    """Stands in for Java's MetricDistribution (thread mode): a gauge holding the last value."""

    def __init__(self):
        self.updates = []

    def update(self, value):
        self.updates.append(value)


class _ThreadModeGroup:
    def __init__(self):
        self.held, self.gauges = {}, {}

    def distribution(self, name):
        return self.held.setdefault(name, _Held())

    def gauge(self, name, obj):
        self.gauges[name] = obj


def test_in_thread_mode_no_callable_is_handed_to_flink_and_values_are_set_when_they_change():
    group, value = _ThreadModeGroup(), {"v": 3}
    metrics = ReplicaMetrics(group, {"local_step": lambda: value["v"], "loss_x1e6": lambda: 5}, every_s=3600)
    assert metrics.pushed and group.gauges == {}  # nothing Flink's metric thread could call into Python with
    assert group.held["local_step"].updates == [3] and group.held["loss_x1e6"].updates == [5]
    value["v"] = 4
    metrics.publish()  # within every_s of the last: nothing read
    assert group.held["local_step"].updates == [3]
    metrics.publish(force=True)
    assert group.held["local_step"].updates == [3, 4] and group.held["loss_x1e6"].updates == [5]  # unchanged: not set


def test_process_mode_keeps_gauges_read_by_beam_in_the_python_worker():
    pytest.importorskip("apache_beam")
    from pyflink.fn_execution.metrics.process.metric_impl import GenericMetricGroup

    group = GenericMetricGroup(None, None).add_group("tensair")  # as a process-mode operator's
    metrics = ReplicaMetrics(group, {"local_step": lambda: 7})
    assert not metrics.pushed and group._flink_gauge["local_step"]() == 7
    metrics.publish()  # nothing to do


def test_a_negative_interval_is_refused():
    with pytest.raises(ValueError, match="every_s must be >= 0, got -1"):
        ReplicaMetrics(_ThreadModeGroup(), {}, every_s=-1)
