"""Events for load tests of :func:`~pyflink_tensair.online.serving.serve`, made on the JVM.

A Python source costs a Python call per event, on the same cores the servers need; these events
come from Flink's ``DataGeneratorSource`` (paced by its rate limiter) and the project's Java
generator, so that a measurement of serving measures the servers. Each event is the JSON text
:func:`~pyflink_tensair.online.serving.json_event` reads, ``{"id": "<i>:<created ms>", "x": [...]}``:
its key carries the moment it was made, for event-to-prediction latency.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..validation import require_int, require_number


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

    require_int("count", count, minimum=1)
    require_int("features", features, minimum=1)
    require_number("rate", rate, above=0, optional=True, unit="events per second")
    require_int("per_checkpoint", per_checkpoint, minimum=1, optional=True)
    if per_checkpoint is not None and rate is not None:
        raise ConfigError(f"per_checkpoint paces by checkpoints, rate by the clock: give one of them. Received: "
                          f"per_checkpoint={per_checkpoint!r}, rate={rate!r}")
    require_int("ids_below", ids_below, minimum=1, optional=True)
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
