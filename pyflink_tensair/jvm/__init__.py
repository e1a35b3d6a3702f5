"""The project's Java classes, one jar: shipped in the wheel, or compiled on first use; added to jobs.

Flink 2.x has no iterations, and Python cannot define sources, so the gradient loop closes through
a small Java sink/source pair sharing an in-JVM queue (``java/pyflinktensair/feedback``); beside it,
a package per concern: the JVM batchers, the JSON hand reader, serving's grouping, the file sinks,
SQL helpers and the checkpointing operators. A wheel carries the jar compiled at build time against
the Flink it pins, so a user needs only the JRE that PyFlink needs. When that jar does not match the
installed pyflink (another version) or is absent (an editable install), :func:`channel_jar`
compiles the shipped sources with ``javac`` against the installed pyflink's jars, once per source
and Flink version, into the user's cache folder. ``flink run`` ships the jar with the job.

Example (tests/run.sh calls it before the tests, so the cache holds the jar by then)::

    >>> channel_jar().endswith(".jar")
    True
"""

from __future__ import annotations

import os

from ..cache import cache_dir
from ..errors import JavaToolchainError
from . import build


def flink_home() -> str:
    import pyflink

    return os.path.dirname(os.path.abspath(pyflink.__file__))


def flink_version() -> str:
    from pyflink.version import __version__

    return __version__


def flink_classpath() -> list:
    try:
        return build.flink_classpath(flink_home())
    except build.ChannelBuildError as err:
        raise JavaToolchainError(str(err)) from None


def find_javac() -> str:
    try:
        return build.find_javac()
    except build.ChannelBuildError as err:
        raise JavaToolchainError(str(err)) from None


def channel_jar() -> str:
    """Returns the path of the feedback-channel jar: the shipped one if it fits, else one built from source."""
    shipped = build.shipped_jar(flink_version())
    if shipped is not None:
        return shipped
    sources = build.java_sources()
    fingerprint = build.sources_digest(sources) + "-flink" + flink_version()
    target = os.path.join(cache_dir(), f"tensair-feedback-{fingerprint}.jar")
    if os.path.isfile(target):
        return target
    try:
        return build.compile_jar(target, flink_classpath(), sources)
    except build.ChannelBuildError as err:
        raise JavaToolchainError(str(err)) from None
