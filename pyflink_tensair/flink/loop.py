"""The plumbing of a training graph with a feedback loop, built once for ``train()`` and every baseline.

A :class:`FeedbackLoop` is made on the environment of a stream of encoded batches. It prepares the
environment (latency settings, Python worker mode, the Java channel jar), pins one key per model
operator subtask and names the loop; then it hands out the two keyed inputs of the training
operator and closes the loop behind it::

    batches ─► route (round-robin key, JVM) ─┐
    start markers (keyed) ───────────────────┴─► key_by (JVM) ─► input 1 ┐
                                                                          ├─► the training operator (N)
    feedback source ─► fan-out (JVM) ─► key_by (JVM) ─────────► input 2 ┘        │
          ▲ in-JVM queue, subtask i ◄─ subtask i                                  │ (side output, raw)
          └──────────── feedback sink ◄──── [an operator of the caller's, e.g. an updater] ◄──┘

The router and the fan-out are Java: a batch meets Python first in the training operator, a
message only in the subtasks it is for. Feedback sink ``i`` and source ``i`` share a co-location
group, so they always share a JVM; the source ends after relaying every sender's done marker.
Every operator gets a name ``"<config.name>: ..."`` and a uid ``"<config.name>-..."``.

Example (what ``train()`` does; ``Replicas`` stands for its KeyedCoProcessFunction)::

    loop = FeedbackLoop(batches, config)
    replicas = loop.named(loop.keyed_inputs().connect(loop.keyed_feedback(config.replicas))
                          .process(Replicas(...), output_type=...), "replicas", "replicas")
    loop.close(loop.side_output(replicas, types.feedback_tag(config.name)), config.replicas)
"""

from __future__ import annotations

import uuid

from ..config import TrainConfig
from ..errors import ConfigError
from . import checkpointing, routing, types
from .environment import add_channel_jar, env_configuration, prepare_environment
from .routing import DEFAULT_MAX_PARALLELISM, pinned_keys


class FeedbackLoop:
    """See the module docstring. ``keys[r]`` routes to subtask ``r`` of the training operator."""

    def __init__(self, batches, config: TrainConfig):
        from pyflink.datastream import DataStream, StreamExecutionEnvironment

        if not isinstance(batches, DataStream):
            raise ConfigError(f"batches must be a pyflink DataStream of encoded mini-batches. "
                              f"Received: {type(batches).__name__}")
        if config.replicas > DEFAULT_MAX_PARALLELISM:
            raise ConfigError(f"replicas must be <= {DEFAULT_MAX_PARALLELISM}. Received: replicas={config.replicas}")
        self.batches = batches
        self.config = config
        self.env = StreamExecutionEnvironment(batches._j_data_stream.getExecutionEnvironment())
        prepare_environment(self.env, config)
        checkpointing.configure(self.env, config)
        # With Python operator chaining on, execute_and_collect() keeps only the collected stream's
        # ancestors (PythonOperatorChainingOptimizer.apply(env, transformation)): the feedback
        # sink, and every other sink of the user's, are dropped, the feedback sources never end
        # and neither does the job. A loop's graph has no Python operators to chain anyway.
        env_configuration(self.env).set_string("python.operator-chaining.enabled", "false")
        add_channel_jar(self.env)
        self.keys = pinned_keys(config.replicas)
        self.loop_id = f"{config.name}-{uuid.uuid4().hex}"
        self._source = None

    @property
    def _channel(self):
        from pyflink.java_gateway import get_gateway

        return get_gateway().jvm.pyflinktensair.feedback

    def named(self, stream, what: str, description: str):
        """``stream`` named ``"<name>: <description>"`` with uid ``"<name>-<what>"``."""
        name = self.config.name
        return stream.name(f"{name}: {description}").uid(f"{name}-{what}")

    def keyed_inputs(self):
        """Input 1 of the training operator: the batches dealt round-robin on the JVM (batch ``i``
        of a single-subtask input to subtask ``i % N``), with one start marker per subtask, so
        that every subtask sets its end-of-input timer even if no batch ever reaches it."""
        name = self.config.name
        start = routing.start_markers(self.env, self.keys, name=f"{name}: start markers", uid=f"{name}-start")
        routed = self.named(routing.round_robin(self.batches, self.keys), "route", "route batches to replicas")
        parallelism = self.batches._j_data_stream.getTransformation().getParallelism()
        if parallelism > 0:
            routed = routed.set_parallelism(parallelism)  # as parallel as the batches
        return routing.keyed_by_replica(routed.union(start))

    def keyed_feedback(self, parallelism: int, *, include_sender: bool = False):
        """Input 2: the loop's messages, from a feedback source of ``parallelism`` subtasks, to
        every subtask of the training operator but the sender (``include_sender=True``: to all of
        them, for a sender that is no replica, like the Flink ML pattern's updater)."""
        from pyflink.common import WatermarkStrategy
        from pyflink.datastream.connectors import Source

        channel = self._channel
        source = self.env.from_source(Source(channel.FeedbackSource(self.loop_id)),
                                      WatermarkStrategy(channel.FeedbackSource.watermarkStrategy()),
                                      f"{self.config.name}: feedback source", type_info=types.bytes_type())
        self._source = source.uid(f"{self.config.name}-feedback-source").set_parallelism(parallelism)
        fan_out = "fan out to every replica" if include_sender else "fan out gradients"
        fanned = self.named(routing.to_peers(self._source, self.keys, include_sender=include_sender), "fan-out", fan_out)
        return routing.keyed_by_replica(fanned.set_parallelism(parallelism))

    def training_operator(self, stream):
        """``stream`` (the training operator's output) with the replicas' parallelism, and the
        max parallelism the pinned keys were chosen for."""
        return stream.set_parallelism(self.config.replicas).set_max_parallelism(DEFAULT_MAX_PARALLELISM)

    @staticmethod
    def side_output(stream, tag):
        """The side output ``tag`` of ``stream`` (a Python operator's) as a raw JVM stream:
        PyFlink's ``get_side_output`` would add an identity Python map, a Beam bundle per record.

        The tag is registered on the operator here. PyFlink registers the tags it finds behind
        the environment's sinks when the job is submitted, which misses a side output collected
        with ``execute_and_collect()`` (its sink is added after): the records would be dropped.
        """
        from pyflink.datastream import DataStream
        from pyflink.java_gateway import get_gateway

        jvm = get_gateway().jvm
        j_tag = tag.get_java_output_tag()
        factory = jvm.org.apache.flink.python.util.PythonConfigUtil.getOperatorFactory(
            stream._j_data_stream.getTransformation())
        factory.getOperator().addSideOutputTags(jvm.java.util.Collections.singletonList(j_tag))
        return DataStream(stream._j_data_stream.getSideOutput(j_tag))

    def close(self, messages, parallelism: int):
        """Sends ``messages`` (encoded, subtask ``i`` to feedback source ``i``) into the loop."""
        from pyflink.datastream.connectors import Sink

        if self._source is None:
            raise ConfigError("keyed_feedback() must be called before close(): the loop has no source")
        name = self.config.name
        sink = (messages.sink_to(Sink(self._channel.FeedbackSink(self.loop_id))).name(f"{name}: feedback sink")
                .uid(f"{name}-feedback-sink").set_parallelism(parallelism))
        co_location = f"{self.loop_id}-loop"
        self._source._j_data_stream.getTransformation().setCoLocationGroupKey(co_location)
        sink._j_data_stream_sink.getTransformation().setCoLocationGroupKey(co_location)
        return sink
