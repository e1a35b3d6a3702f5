"""Events for load tests of :func:`~pyflink_tensair.online.serving.serve`, made on the JVM.

A Python source costs a Python call per event, on the same cores the servers need; these events
come from Flink's ``DataGeneratorSource`` (paced by its rate limiter) and the project's Java
generator, so that a measurement of serving measures the servers. Each event is the JSON text
:func:`~pyflink_tensair.online.serving.json_event` reads, ``{"id": "<i>:<created ms>", "x": [...]}``:
its key carries the moment it was made, for event-to-prediction latency.
"""

from __future__ import annotations

from ..errors import ConfigError


def synthetic_events(env, count: int, *, features: int, rate: "float | None" = None, seed: int = 0,
                     per_checkpoint: "int | None" = None, ids_below: "int | None" = None,
                     name: str = "synthetic events"):
    """A stream of ``count`` JSON event texts with ``features`` standard-normal features each,
    ``rate`` per second (``None``: as fast as they are taken), parallelism 1, ending by itself.
    ``per_checkpoint`` (instead of ``rate``): at most that many events between two completed
    checkpoints (Flink's gated rate limiter), so that a test's stream cannot end before its
    checkpoints, however slowly its job starts. ``ids_below``: the features are ids drawn
    uniformly below it (for a model that embeds them) instead of normal draws.

    Example::

        events = synthetic_events(env, 100_000, features=20, rate=5_000)
        served = serve(events, model=build)
    """
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors import Source
    from pyflink.java_gateway import get_gateway

    from ..flink.environment import add_channel_jar

    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"count must be a whole number of events >= 1. Received: count={count!r}")
    if isinstance(features, bool) or not isinstance(features, int) or features < 1:
        raise ConfigError(f"features must be a whole number >= 1. Received: features={features!r}")
    if rate is not None and not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0):
        raise ConfigError(f"rate must be events per second > 0, or None for as fast as taken. Received: rate={rate!r}")
    if per_checkpoint is not None and (rate is not None or isinstance(per_checkpoint, bool)
                                       or not isinstance(per_checkpoint, int) or per_checkpoint < 1):
        raise ConfigError(f"per_checkpoint must be a whole number >= 1, and rate None with it. Received: "
                          f"per_checkpoint={per_checkpoint!r}, rate={rate!r}")
    if ids_below is not None and (isinstance(ids_below, bool) or not isinstance(ids_below, int) or ids_below < 1):
        raise ConfigError(f"ids_below must be a whole number >= 1. Received: ids_below={ids_below!r}")
    add_channel_jar(env)
    jvm = get_gateway().jvm
    limits = jvm.org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy
    source = jvm.org.apache.flink.connector.datagen.source.DataGeneratorSource(
        jvm.pyflinktensair.serving.SyntheticEvents(features, seed, ids_below or 0), count,
        limits.perCheckpoint(per_checkpoint) if per_checkpoint is not None
        else limits.noOp() if rate is None else limits.perSecond(float(rate)), Types.STRING().get_java_type_info())
    uid = name.replace(" ", "-")
    return env.from_source(Source(source), WatermarkStrategy.no_watermarks(), name,
                           type_info=Types.STRING()).uid(uid).set_parallelism(1)
