"""The relay that takes model updates off the checkpoint barrier's path (pyflink_tensair.flink.relay),
and the co-location of the loop's in-JVM queues it joins."""

import functools

import pytest

from pyflink_tensair import ModelUpdates, TrainConfig, batch_source, serve, train
from pyflink_tensair.core.model_updates import decode_update
from pyflink_tensair.datasets.teacher import teacher_classification_batch
from pyflink_tensair.flink.sources import number_sequence
from pyflink_tensair.models import zoo

MAKE = functools.partial(teacher_classification_batch, batch_size=16, features=20, classes=4, seed=0)


def _job_vertices(env):
    """``{vertex name: co-location group id or None}`` of the job graph ``env`` would submit."""
    from pyflink.java_gateway import get_gateway

    graph = env._j_stream_execution_environment.getStreamGraph(False)
    job = get_gateway().jvm.org.apache.flink.streaming.api.graph.StreamingJobGraphGenerator.createJobGraph(graph)
    vertices = {}
    for vertex in list(job.getVerticesAsArray()):
        group = vertex.getCoLocationGroup()
        vertices[vertex.getName()] = None if group is None else group.getId().toString()
    return vertices


def _group_of(vertices, part):
    found = [group for name, group in vertices.items() if part in name]
    assert len(found) == 1, (part, vertices)
    return found[0]


@pytest.mark.flink
def test_the_relay_source_shares_the_slot_of_the_replicas_and_their_feedback_queues():
    from pyflink.common import Types
    from pyflink.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    out = train(batch_source(env, 4, MAKE), model=zoo.quickstart_classifier,
                config=TrainConfig(replicas=2, updates=ModelUpdates(every_ms=50)))
    events = number_sequence(env, 0, 3, name="events", uid="events").map(str, output_type=Types.STRING())
    serve(events, out, model=zoo.quickstart_classifier, check_model=False).predictions.print()
    vertices = _job_vertices(env)
    # Flink takes a task's co-location group from its chain's first operator: the feedback sink
    # and the relay sink are chained to the replicas, so the replicas carry the group
    replicas = _group_of(vertices, "replicas ->")
    assert "feedback sink" in next(n for n in vertices if "replicas ->" in n)
    assert "relay sink" in next(n for n in vertices if "replicas ->" in n)
    assert replicas is not None
    assert _group_of(vertices, "feedback source") == replicas
    assert _group_of(vertices, "relay source") == replicas


@pytest.mark.flink
def test_a_job_without_updates_has_no_relay():
    from pyflink.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    out = train(batch_source(env, 4, MAKE), model=zoo.quickstart_classifier, config=TrainConfig(replicas=2))
    out.metrics.print()
    assert not any("relay" in name for name in _job_vertices(env))


@pytest.mark.flink
def test_relayed_updates_arrive_in_order_and_the_stream_ends_with_training():
    from pyflink.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    out = train(batch_source(env, 60, MAKE, rate=60), model=zoo.quickstart_classifier,
                config=TrainConfig(replicas=2, updates=ModelUpdates(every_ms=1, every_steps=5, snapshot_every=4)))
    with out.updates.execute_and_collect() as records:  # ends: the relay source ends with its sink's input
        updates = [decode_update(record) for record in records]
    assert updates and updates[0].snapshot
    versions = [u.version for u in updates]
    assert versions == sorted(set(versions)), versions
    # a reader that keeps up misses nothing: every delta applies onto the version before it
    assert all(u.snapshot or u.base == before.version for before, u in zip(updates, updates[1:]))
    assert sum(u.snapshot for u in updates) >= len(updates) // 4
