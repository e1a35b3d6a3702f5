"""Keys that pin replica ``r`` to subtask ``r``.

PyFlink's ``key_by`` hashes ``Row(key)`` on the JVM, so the key that lands on subtask ``r`` is
found by asking Flink's own key-group assignment (``Keying.pinnedKeys`` in the channel jar), once,
when the job graph is built; the replica operator asks the same for an old replica count when a
job resumes with another one.
"""

from __future__ import annotations

import functools
from typing import List

from ..errors import ConfigError

DEFAULT_MAX_PARALLELISM = 128


def pinned_keys(parallelism: int, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> List[int]:
    """``keys[r]`` is an int key that Flink routes to subtask ``r`` of a keyed operator. The
    channel jar must be loaded (:func:`~.environment.add_channel_jar`).

    Example (not a doctest: it needs PyFlink's JVM; the Flink tests route by these keys)::

        keys = pinned_keys(2)   # len(keys) == 2
    """
    if not 1 <= parallelism <= max_parallelism:
        raise ConfigError(f"parallelism must be in [1, {max_parallelism}]. Received: {parallelism}")
    from pyflink.java_gateway import get_gateway

    return list(get_gateway().jvm.pyflinktensair.feedback.Keying.pinnedKeys(parallelism, max_parallelism))


def keyed_by_replica(stream):
    """A PyFlink ``KeyedStream`` of a stream of ``Row(key, payload)`` rows, keyed by ``key`` on the
    JVM with no Python function: what ``key_by`` would give, without its Python key extractor."""
    from pyflink.common import Types
    from pyflink.datastream import KeyedStream
    from pyflink.java_gateway import get_gateway

    from . import types

    j_keyed = stream._j_data_stream.keyBy(get_gateway().jvm.org.apache.flink.streaming.api.functions.python.KeyByKeySelector(),
                                          Types.ROW([Types.INT()]).get_java_type_info())
    return KeyedStream(j_keyed, types.bytes_type(), stream)


def java_ints(values: List[int]):
    """A Java ``int[]`` of ``values``."""
    from pyflink.java_gateway import get_gateway

    gateway = get_gateway()
    array = gateway.new_array(gateway.jvm.int, len(values))
    for i, value in enumerate(values):
        array[i] = value
    return array


def round_robin(batches, keys: List[int]):
    """``Row(keys[i % N], batch i)`` for a stream of encoded batches, dealt on the JVM (subtask
    ``s`` of the stream starts at replica ``s``). Records of another pyflink_tensair kind fail the
    job; the feedback-channel jar must be in the job (:func:`~.environment.add_channel_jar`)."""
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    from . import types

    dealer = get_gateway().jvm.pyflinktensair.feedback.Keying.RoundRobin(java_ints(keys))
    return DataStream(batches._j_data_stream.map(dealer, types.keyed_bytes_type().get_java_type_info()))


def to_peers(messages, keys: List[int], *, include_sender: bool = False):
    """``Row(keys[r], message)`` for every replica ``r`` but the sender, on the JVM: each subtask
    ``s`` of ``messages`` must carry only replica ``s``'s messages (the feedback source does).
    ``include_sender=True``: to every replica (a sender that is no replica, like an updater)."""
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    from . import types

    keying = get_gateway().jvm.pyflinktensair.feedback.Keying
    fan_out = (keying.ToAll if include_sender else keying.ToPeers)(java_ints(keys))
    return DataStream(messages._j_data_stream.flatMap(fan_out, types.keyed_bytes_type().get_java_type_info()))


def _start_marker(replica: int, keys: List[int]):
    from pyflink.common import Row

    from ..core import wire

    return Row(keys[int(replica)], wire.encode_start(int(replica)))


def start_markers(env, keys: List[int], python_in, *, name: str, uid: str):
    """One ``Row(keys[r], start marker r)`` per replica (parallelism 1), so that every replica
    sets its end-of-input timer even if no batch ever reaches it; made where ``python_in`` says."""
    from .execution import mapped
    from .sources import number_sequence
    from . import types

    numbers = number_sequence(env, 0, len(keys) - 1, name=f"{name} numbers", uid=f"{uid}-numbers")
    return (mapped(numbers, functools.partial(_start_marker, keys=list(keys)), types.keyed_bytes_type(), python_in)
            .name(name).uid(uid).set_parallelism(1))
