"""``train()``: wires the replicas and their gradient loop into the batches' Flink job.

Operator graph (``N`` = ``config.replicas``; every operator named ``<name>: ...`` with a uid)::

    batches ─► route (round-robin key, JVM) ─┐
    start markers (keyed) ───────────────────┴─► key_by (JVM) ─┐
                                                               ├─► replicas (N) ─► predictions (main output)
    feedback source (N) ─► fan-out (JVM) ─► key_by (JVM) ──────┘      ├─► metrics (side output, JSON)
          ▲ in-JVM queue, subtask i ◄─ subtask i                      ├─► models (side output, final weights)
          └──────────── feedback sink (N) ◄───────────────────────────┘   ├─► probes (side output, JSON)
                                                                              feedback (side output)

The feedback sink and source, the router and the fan-out are Java (``pyflink_tensair/feedback/java``):
a batch meets Python first in its replica, a gradient only in the replicas it is for. Sink ``i``
and source ``i`` share a co-location group, so they always share a JVM. The source ends after relaying its
replica's done marker, so the job ends by itself when the batches end.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Callable, Optional

from ..config import TrainConfig
from ..errors import ConfigError
from . import routing, types
from .environment import add_channel_jar, prepare_environment
from .functions import ReplicaFunction
from .routing import DEFAULT_MAX_PARALLELISM, pinned_keys


@dataclass(frozen=True)
class TrainOutput:
    """The streams ``train`` returns.

    Attributes:
        predictions: one row per input batch (see :func:`~pyflink_tensair.flink.types.decode_prediction`).
        metrics: JSON strings, one per trained batch and one ``"final"`` per replica
            (:class:`~pyflink_tensair.core.events.Metrics`).
        models: each replica's final weights once training ended
            (:func:`~pyflink_tensair.flink.types.decode_final_model`).
        probes: JSON strings of what ``probe`` returned while training and at the end (empty
            without a probe).
        loop_id: identifies this job's feedback channel.
    """

    predictions: object
    metrics: object
    models: object
    probes: object
    loop_id: str


def _named(stream, config: TrainConfig, what: str, description: str):
    return stream.name(f"{config.name}: {description}").uid(f"{config.name}-{what}")


def train(batches, *, model, config: TrainConfig = TrainConfig(), check_model: bool = True,
          probe: Optional[Callable] = None, probe_every_s: float = 5.0) -> TrainOutput:
    """Trains ``config.replicas`` replicas of ``model`` on ``batches`` inside their Flink job.

    Args:
        batches: a PyFlink ``DataStream`` of encoded mini-batches (:func:`~pyflink_tensair.encode_batch`
            or :func:`~pyflink_tensair.to_batches`).
        model: a function returning a compiled ``keras.Model`` (it must be importable by the Python
            workers: a module-level function or a ``functools.partial`` of one), or the path of a
            saved ``.keras`` model to continue training.
        config: :class:`~pyflink_tensair.TrainConfig`.
        check_model: build the model once here, so a broken builder fails before the job starts
            (and run ``probe`` on it, so a broken probe does too).
        probe: optional ``probe(keras_model) -> JSON-able`` that replica 0 runs on its model every
            ``probe_every_s`` seconds and once on its final model (e.g. nearest neighbours of a few
            words). Shipped like ``model``. Errors it raises at run time are reported in the
            probes stream under ``"error"``; they do not stop the training.

    Returns:
        :class:`TrainOutput` with the predictions, metrics and models streams.

    Example::

        env = StreamExecutionEnvironment.get_execution_environment()
        batches = env.from_collection([encode_batch(b) for b in my_batches], type_info=types.bytes_type())
        out = train(batches, model=zoo.quickstart_classifier, config=TrainConfig(replicas=2))
        out.metrics.print()
        env.execute()
    """
    from pyflink.datastream import DataStream, StreamExecutionEnvironment
    from pyflink.datastream.connectors import Sink, Source
    from pyflink.common import WatermarkStrategy
    from pyflink.java_gateway import get_gateway

    if not isinstance(batches, DataStream):
        raise ConfigError(f"batches must be a pyflink DataStream of encoded mini-batches. Received: {type(batches).__name__}")
    if not isinstance(config, TrainConfig):
        raise ConfigError(f"config must be a TrainConfig. Received: {type(config).__name__}")
    if config.replicas > DEFAULT_MAX_PARALLELISM:
        raise ConfigError(f"replicas must be <= {DEFAULT_MAX_PARALLELISM}. Received: replicas={config.replicas}")
    from ..models.keras_adapter import check_spec, load_model

    check_spec(model)
    if probe is not None and not callable(probe):
        raise ConfigError(f"probe must be a function of the Keras model. Received: probe={probe!r}")
    if not probe_every_s > 0:
        raise ConfigError(f"probe_every_s must be > 0. Received: probe_every_s={probe_every_s!r}")
    if check_model:
        built = load_model(model, seed=config.seed)
        if probe is not None:
            try:
                json.dumps(probe(built), default=float)
            except Exception as err:
                raise ConfigError(f"the probe failed on the initial model: {err!r}") from err

    env = StreamExecutionEnvironment(batches._j_data_stream.getExecutionEnvironment())
    prepare_environment(env, config)
    add_channel_jar(env)
    n = config.replicas
    keys = pinned_keys(n)
    loop_id = f"{config.name}-{uuid.uuid4().hex}"
    jvm = get_gateway().jvm
    feedback = jvm.pyflinktensair.feedback

    start = routing.start_markers(env, keys, name=f"{config.name}: start markers", uid=f"{config.name}-start")
    # Batches are dealt and keyed on the JVM: no Python worker touches them before their replica.
    # As parallel as the batches: from a single-subtask input, batch i goes to replica i % N.
    routed = _named(routing.round_robin(batches, keys), config, "route", "route batches to replicas")
    input_parallelism = batches._j_data_stream.getTransformation().getParallelism()
    if input_parallelism > 0:
        routed = routed.set_parallelism(input_parallelism)
    source = env.from_source(Source(feedback.FeedbackSource(loop_id)),
                             WatermarkStrategy(feedback.FeedbackSource.watermarkStrategy()),
                             f"{config.name}: feedback source", type_info=types.bytes_type())
    source = source.uid(f"{config.name}-feedback-source").set_parallelism(n)
    fanned = _named(routing.to_peers(source, keys), config, "fan-out", "fan out gradients").set_parallelism(n)

    replicas = (routing.keyed_by_replica(routed.union(start))
                .connect(routing.keyed_by_replica(fanned))
                .process(ReplicaFunction(model, config, keys, probe, probe_every_s), output_type=types.prediction_type()))
    replicas = _named(replicas, config, "replicas", "replicas").set_parallelism(n).set_max_parallelism(DEFAULT_MAX_PARALLELISM)

    # get_side_output inserts an identity map of its own; name it like every other operator
    def side_output(tag, what: str, description: str):
        return _named(replicas.get_side_output(tag), config, what, description).set_parallelism(n)

    # The gradients go straight from the replicas' side output to the Java sink: PyFlink's
    # get_side_output would add an identity Python map, two more crossings of every message.
    gradients = DataStream(replicas._j_data_stream.getSideOutput(types.feedback_tag(config.name).get_java_output_tag()))
    sink = (gradients.sink_to(Sink(feedback.FeedbackSink(loop_id))).name(f"{config.name}: feedback sink")
            .uid(f"{config.name}-feedback-sink").set_parallelism(n))
    co_location = f"{loop_id}-loop"
    source._j_data_stream.getTransformation().setCoLocationGroupKey(co_location)
    sink._j_data_stream_sink.getTransformation().setCoLocationGroupKey(co_location)

    metrics = side_output(types.metrics_tag(config.name), "metrics", "metrics")
    models = side_output(types.models_tag(config.name), "models", "final models")
    probes = side_output(types.probes_tag(config.name), "probes", "probes")
    return TrainOutput(predictions=replicas, metrics=metrics, models=models, probes=probes, loop_id=loop_id)
