"""The plumbing of a training graph with a feedback loop, built once for ``train()`` and every baseline.

A :class:`FeedbackLoop` is made on the environment of a stream of encoded batches. It prepares the
environment (latency settings, Python worker mode, the Java channel jar), pins one key per model
operator subtask and names the loop; then it hands out the two keyed inputs of the training
operator and closes the loop behind it::

    batches ─► [credit gate] ─► route (round-robin key, JVM) ─┐
                    ▲ in-JVM     start markers (keyed) ───────┴─► key_by (JVM) ─► input 1 ┐
             credit receiver ◄─ broadcast ◄─ (side output: saturation reports) ◄─┐         │
                                                                                 │         │
                                                        the training operator (N) ◄────────┤
    feedback source ─► fan-out (JVM) ─► key_by (JVM) ──────────────────────► input 2 ┘      │
          ▲ in-JVM queue, subtask i ◄─ subtask i                                  │ (side output, raw)
          └──────────── feedback sink ◄──── [an operator of the caller's, e.g. an updater] ◄──┘

The router and the fan-out are Java: a batch meets Python first in the training operator, a
message only in the subtasks it is for. Feedback sink ``i`` and source ``i`` share a co-location
group, so they always share a JVM; the source ends after relaying every sender's done marker.
With ``TrainConfig.backpressure`` the batches pass a credit gate (Java) that holds them while a
replica reports itself saturated; the reports reach a receiver beside every gate subtask.
Every operator gets a name ``"<config.name>: ..."`` and a uid ``"<config.name>-..."``.

Example (what ``train()`` does; ``Replicas`` stands for its KeyedCoProcessFunction)::

    loop = FeedbackLoop(batches, config)
    replicas = loop.named(loop.keyed_inputs().connect(loop.keyed_feedback(config.replicas))
                          .process(Replicas(...), output_type=...), "replicas", "replicas")
    loop.close(loop.side_output(replicas, types.FEEDBACK.tag(config.name)), config.replicas)
"""

from __future__ import annotations

import time
import uuid

from ..config import TrainConfig
from ..errors import ConfigError
from . import checkpointing, routing, types
from .colocation import co_locate
from .environment import add_channel_jar, keep_every_sink, prepare_environment
from .routing import DEFAULT_MAX_PARALLELISM, pinned_keys

# the longest a gate holds one batch, and how long a saturated replica may apply nothing before the
# gate stops holding for it (Credit.java says why); replicas repeat their report more often (CreditReport)
CREDIT_MAX_WAIT_MS = 1000
CREDIT_QUIET_MS = 250
CREDIT_REPEAT_S = 0.05  # well within the gate's quiet time


class CreditReport:
    """What one replica tells the credit gate: ``"<replica>:1"`` when it becomes saturated,
    ``"<replica>:0"`` when it no longer is (a new attempt starts unsaturated). A saturated replica
    repeats its report while it applies its peers' messages: it is catching up, and the gate
    stops holding for a replica it has not heard from in ``CREDIT_QUIET_MS``.

    Example::

        >>> report = CreditReport(clock=lambda: 0.0)
        >>> report.due(0, saturated=True, applied=0), report.due(0, saturated=True, applied=0)
        ('0:1', None)
    """

    def __init__(self, clock=None):
        self._clock = clock or time.monotonic
        self._saturated = False
        self._applied = 0
        self._at = 0.0

    def due(self, replica_id: int, *, saturated: bool, applied: int):
        """The report to send now, or ``None``; ``applied``: the peer messages the replica has applied."""
        now = self._clock()
        if saturated == self._saturated and not (saturated and applied != self._applied
                                                 and now - self._at >= CREDIT_REPEAT_S):
            return None
        self._saturated, self._applied, self._at = saturated, applied, now
        return f"{replica_id}:{int(saturated)}"


class FeedbackLoop:
    """See the module docstring. ``keys[r]`` routes to subtask ``r`` of the training operator."""

    def __init__(self, batches, config: TrainConfig):
        from pyflink.datastream import StreamExecutionEnvironment

        types.require_stream("batches", batches, types.bytes_type(), types.BATCHES)
        if config.replicas > DEFAULT_MAX_PARALLELISM:
            raise ConfigError(f"replicas must be <= {DEFAULT_MAX_PARALLELISM}. Received: replicas={config.replicas}")
        self.batches = batches
        self.config = config
        self.env = StreamExecutionEnvironment(batches._j_data_stream.getExecutionEnvironment())
        prepare_environment(self.env, config)
        checkpointing.configure(self.env, config)
        keep_every_sink(self.env)  # a loop's graph has no Python operators to chain anyway
        add_channel_jar(self.env)
        self.keys = pinned_keys(config.replicas)
        self.loop_id = f"{config.name}-{uuid.uuid4().hex}"
        self._source = None
        self._credit_open = False

    @property
    def _channel(self):
        from pyflink.java_gateway import get_gateway

        return get_gateway().jvm.pyflinktensair.feedback

    def named(self, stream, what: str, description: str):
        """``stream`` named ``"<name>: <description>"`` with uid ``"<name>-<what>"``."""
        name = self.config.name
        return stream.name(f"{name}: {description}").uid(f"{name}-{what}")

    def keyed_inputs(self, *, credit: bool = False):
        """Input 1 of the training operator: the batches dealt round-robin on the JVM (batch ``i``
        of a single-subtask input to subtask ``i % N``), with one start marker per subtask, so
        that every subtask sets its end-of-input timer even if no batch ever reaches it.
        ``credit=True``: through a credit gate first; close it with :meth:`close_credit`."""
        name = self.config.name
        start = routing.start_markers(self.env, self.keys, self.config.python_in, name=f"{name}: start markers",
                                      uid=f"{name}-start")
        batches = self._credit_gate(self.batches) if credit else self.batches
        routed = self.named(routing.round_robin(batches, self.keys), "route", "route batches to replicas")
        routed = self._with_batch_parallelism(routed)  # as parallel as the batches
        return routing.keyed_by_replica(routed.union(start))

    @property
    def _batch_parallelism(self) -> int:
        return self.batches._j_data_stream.getTransformation().getParallelism()

    def _with_batch_parallelism(self, stream):
        return stream.set_parallelism(self._batch_parallelism) if self._batch_parallelism > 0 else stream

    def _credit_gate(self, batches):
        """``batches`` through the Java credit gate, chained to the operators before it.

        Co-location is decided by a chain's first operator, so the key goes on every operator
        the gate may be chained to (up to the nearest shuffle or source). The gate must not
        start a chain of its own: a network buffer before it would queue batches ahead of a
        checkpoint barrier, each held in turn while a replica waits for that barrier."""
        from pyflink.datastream import DataStream

        key = f"{self.loop_id}-credit"
        gate = DataStream(batches._j_data_stream.map(self._channel.Credit.Gate(self.loop_id, CREDIT_MAX_WAIT_MS,
                                                                               CREDIT_QUIET_MS),
                                                     types.bytes_type().get_java_type_info()))
        gate = self._with_batch_parallelism(self.named(gate, "credit-gate", "hold batches while a replica is saturated"))
        self._credit_key = co_locate(key, gate._j_data_stream.getTransformation())  # the gate and its chain
        self._credit_open = True
        return gate

    def close_credit(self, reports):
        """Sends ``reports`` (a raw side output of ``"<replica>:<0|1>"`` strings) to a receiver
        beside every subtask of the credit gate, through Flink's network: across TaskManagers."""
        from pyflink.datastream.connectors import Sink

        if not self._credit_open:
            raise ConfigError("keyed_inputs(credit=True) must be called before close_credit(): the loop has no gate")
        sink = (reports.broadcast().sink_to(Sink(self._channel.Credit.Receiver(self.loop_id)))
                .name(f"{self.config.name}: credit receiver").uid(f"{self.config.name}-credit-receiver"))
        if self._batch_parallelism > 0:
            sink = sink.set_parallelism(self._batch_parallelism)
        sink._j_data_stream_sink.getTransformation().setCoLocationGroupKey(self._credit_key)
        return sink

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

    @property
    def feedback_source(self):
        """The loop's feedback source (after :meth:`keyed_feedback`): a source of the training
        operator's pipelined region, whose checkpoint barriers come when a checkpoint is triggered."""
        if self._source is None:
            raise ConfigError("keyed_feedback() must be called first: the loop has no source yet")
        return self._source

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
        # the sink is chained to the operator that feeds it, whose chain decides where it runs
        co_locate(f"{self.loop_id}-loop", self._source._j_data_stream.getTransformation(),
                  sink._j_data_stream_sink.getTransformation())
        return sink
