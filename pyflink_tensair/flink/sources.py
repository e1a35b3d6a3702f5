"""Bounded sources built from Flink's own connectors (PyFlink 2.3 has no ``from_sequence``)."""

from __future__ import annotations


def number_sequence(env, start: int, end: int, *, name: str, uid: str):
    """A parallelism-1 stream of the longs ``start .. end`` (inclusive), ending by itself."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    stream = env.from_source(NumberSequenceSource(start, end), WatermarkStrategy.no_watermarks(), name,
                             type_info=Types.LONG())
    return stream.uid(uid).set_parallelism(1)
