"""Replica state in Flink checkpoints: the operator that tells Python when, and where the state goes.

A Python function has no snapshot hook, so the replicas run in :class:`ReplicaOperator`
(``java/pyflinktensair/checkpoint``), PyFlink's keyed co-process operator with two injected
records for the subtask's own key (:class:`EmbeddedReplicaOperator` is the same in thread
mode): ``KIND_SNAPSHOT`` just before each checkpoint barrier, and
``KIND_OPEN`` when the Python worker is up. On the first, the function lets its trainer finish,
emits what it made and writes :meth:`~pyflink_tensair.core.replica.Replica.snapshot` into keyed
state; on the second it restores that state, if any, and re-sends what peers may have lost.

The snapshot goes into keyed state in chunks (:class:`ChunkedState`), never one value: PyFlink
ships a value as one gRPC message and RocksDB stores it as one value (2 GiB ceilings, several
copies on the way), and its caches count entries, not bytes. Each chunk is a ``ValueState`` of its
own (:class:`ValueStates`), not an entry of one ``MapState``: PyFlink commits all of a map's
changed entries in one state request, and a word2vec replica's 120 MB in one request stalled the
state channel for good (the checkpoint never completed). A chunk whose bytes did not change since
the last checkpoint is not written again.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Dict, Optional

import numpy as np

from ..config import PythonIn
from ..core import wire

CHUNK_BYTES = 1024 * 1024
_MANIFEST = "manifest"


def _chunk_key(index: int) -> str:
    return f"chunk/{index:06d}"


class ChunkedState:
    """A dict of arrays kept in keyed state as ``str -> bytes`` entries: a JSON manifest under
    ``"manifest"`` (each array's name, dtype and shape, the chunks' digests) and the arrays' raw
    bytes, one after the other in the dict's order, in ``CHUNK_BYTES`` chunks.

    The layout lives in the manifest, not in front of the bytes: an entry that comes, goes or
    changes size shifts only the chunks after it, so entries that keep their size (a replica's
    weights and slots, which it puts first) keep their chunks, and a chunk whose bytes did not
    change is not written again.

    ``store`` needs ``get``, ``put``, ``remove`` and ``contains`` (:class:`ValueStates`, or a
    dict wrapper in tests). ``write`` returns how many bytes it wrote.

    Example::

        >>> class Dict_(dict):
        ...     put, remove, contains = dict.__setitem__, dict.__delitem__, dict.__contains__
        >>> state = ChunkedState(Dict_(), chunk_bytes=64)
        >>> state.read() is None
        True
        >>> wrote = state.write({"w": np.arange(40, dtype=np.float32)})
        >>> state.read()["w"][-1], state.write({"w": np.arange(40, dtype=np.float32)})
        (np.float32(39.0), 0)
    """

    def __init__(self, store, chunk_bytes: int = CHUNK_BYTES):
        self._state = store
        self._chunk_bytes = chunk_bytes

    def _manifest(self) -> Optional[dict]:
        if not self._state.contains(_MANIFEST):
            return None
        return json.loads(bytes(self._state.get(_MANIFEST)).decode("utf-8"))

    def write(self, arrays: Dict[str, np.ndarray]) -> int:
        layout, parts = [], []
        for name, value in arrays.items():
            value = np.asarray(value)
            if value.dtype.hasobject:
                raise wire.WireFormatError(f"state entry {name!r} has dtype {value.dtype}: only plain arrays are kept")
            layout.append([name, value.dtype.str, list(value.shape)])  # before ascontiguousarray: it makes 0-d 1-d
            parts.append(np.ascontiguousarray(value).reshape(-1).view(np.uint8))
        data = memoryview(np.concatenate(parts) if parts else np.zeros(0, np.uint8))
        old = self._manifest() or {"chunks": []}
        digests, written = [], 0
        for index, start in enumerate(range(0, len(data), self._chunk_bytes)):
            chunk = data[start:start + self._chunk_bytes]
            digest = hashlib.sha1(chunk).hexdigest()
            digests.append(digest)
            if index >= len(old["chunks"]) or old["chunks"][index] != digest:
                self._state.put(_chunk_key(index), chunk.tobytes())
                written += len(chunk)
        for index in range(len(digests), len(old["chunks"])):
            self._state.remove(_chunk_key(index))
        manifest = {"layout": layout, "chunks": digests, "bytes": len(data)}
        if manifest != old:
            self._state.put(_MANIFEST, json.dumps(manifest).encode("utf-8"))
        return written

    def clear(self) -> None:
        """Removes what was written (the manifest and every chunk)."""
        manifest = self._manifest()
        if manifest is None:
            return
        for index in range(len(manifest["chunks"])):
            self._state.remove(_chunk_key(index))
        self._state.remove(_MANIFEST)

    def read(self) -> Optional[Dict[str, np.ndarray]]:
        """The arrays last written, or ``None`` if nothing was."""
        manifest = self._manifest()
        if manifest is None:
            return None
        if "layout" not in manifest:
            raise wire.WireFormatError("the replica's state was written by an older pyflink_tensair (no layout in its "
                                       "manifest): start the job without this checkpoint or savepoint")
        chunks = [bytes(self._state.get(_chunk_key(i))) for i in range(len(manifest["chunks"]))]
        data = b"".join(chunks)
        if len(data) != manifest["bytes"]:
            raise wire.WireFormatError(f"the replica's state holds {len(data)} bytes, its manifest says "
                                       f"{manifest['bytes']}: the checkpoint is damaged")
        if any(hashlib.sha1(c).hexdigest() != d for c, d in zip(chunks, manifest["chunks"])):
            raise wire.WireFormatError("a chunk of the replica's state does not match its digest: the checkpoint is damaged")
        try:
            layout = [(name, np.dtype(dtype), tuple(int(n) for n in shape)) for name, dtype, shape in manifest["layout"]]
        except (TypeError, ValueError) as err:
            raise wire.WireFormatError(f"the replica's state has a malformed layout ({err}): the checkpoint is damaged") from None
        sizes = [dtype.itemsize * int(np.prod(shape, dtype=np.int64)) for _, dtype, shape in layout]
        if sum(sizes) != len(data) or any(dtype.hasobject for _, dtype, _ in layout):
            raise wire.WireFormatError(f"the replica's state layout describes {sum(sizes)} bytes of plain arrays, its "
                                       f"chunks hold {len(data)}: the checkpoint is damaged")
        arrays, offset = {}, 0
        for (name, dtype, shape), size in zip(layout, sizes):
            arrays[name] = np.frombuffer(data, dtype, count=size // max(1, dtype.itemsize), offset=offset).reshape(shape).copy()
            offset += size
        return arrays


class ValueStates:
    """``get``/``put``/``remove``/``contains`` by name over one PyFlink ``ValueState`` of bytes per
    name (``tensair-replica/<name>``), registered on first use: each commits in its own request."""

    def __init__(self, runtime_context):
        self._context = runtime_context
        self._states = {}

    def _state(self, name: str):
        if name not in self._states:
            from pyflink.common import Types
            from pyflink.datastream.state import ValueStateDescriptor

            descriptor = ValueStateDescriptor(f"tensair-replica/{name}", Types.PRIMITIVE_ARRAY(Types.BYTE()))
            self._states[name] = _bytes_state(self._context.get_state(descriptor))
        return self._states[name]

    def get(self, name: str):
        return self._state(name).value()

    def put(self, name: str, value: bytes) -> None:
        self._state(name).update(value)

    def remove(self, name: str) -> None:
        self._state(name).clear()

    def contains(self, name: str) -> bool:
        return self._state(name).value() is not None


def _bytes_state(state):
    """``state`` itself in process mode; in thread mode the Java ``ValueState`` behind it, which
    takes and gives ``bytes`` as they are: PyFlink 2.3's embedded state converts a byte array
    through its array converter (a tuple of ints each way) and fails on an empty state."""
    java_state = getattr(state, "_state", None)
    if type(state).__module__.startswith("pyflink.fn_execution.datastream.embedded") and java_state is not None:
        return java_state
    return state


def replica_operator(connected, function, output_type, keys, python_in=PythonIn.PROCESSES, *, rescalable: bool = True):
    """``connected.process(function, output_type)`` for the keyed ``connected`` streams, with the
    replicas' own operator in place of PyFlink's: :class:`ReplicaOperator` (process mode) or
    :class:`EmbeddedReplicaOperator` (``python_in`` ``"jvm"``: inside the TaskManager's JVM), built
    by :func:`~.execution.keyed_co_process`. ``rescalable``: whether a restore with another
    replica count merges the old replicas (:mod:`~pyflink_tensair.core.rescale`) or fails."""
    from pyflink.java_gateway import get_gateway

    from .environment import add_channel_jar
    from .execution import in_jvm, keyed_co_process
    from .routing import java_ints

    add_channel_jar(connected.stream1._j_data_stream.getExecutionEnvironment())
    operators = get_gateway().jvm.pyflinktensair.checkpoint
    thread = in_jvm(python_in)
    return keyed_co_process(connected, function, output_type, python_in,
                            operators.EmbeddedReplicaOperator if thread else operators.ReplicaOperator,
                            (java_ints(keys), wire.encode_marker(wire.KIND_SNAPSHOT), wire.encode_marker(wire.KIND_OPEN),
                             wire.encode_marker(wire.KIND_ADOPT), bool(rescalable)))


def configure(env, config) -> None:
    """Checkpointing, state backend and restart strategy of ``env`` from ``config`` (a
    :class:`~pyflink_tensair.TrainConfig`); nothing when ``config.checkpoints`` is None."""
    from .environment import env_configuration

    checkpoints = config.checkpoints
    if checkpoints is None:
        return
    conf = env_configuration(env)
    conf.set_string("execution.checkpointing.interval", f"{int(checkpoints.interval_s * 1000)} ms")
    conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
    if not conf.contains_key("execution.checkpointing.min-pause"):
        # A replica stands still while its state is written: at least one interval of training
        # between two checkpoints, however long one takes (a 120 MB model takes seconds).
        conf.set_string("execution.checkpointing.min-pause", f"{int(checkpoints.interval_s * 1000)} ms")
    conf.set_string("state.backend.type", checkpoints.state_backend)
    if checkpoints.dir:
        conf.set_string("execution.checkpointing.dir", "file://" + os.path.abspath(checkpoints.dir)
                        if "://" not in checkpoints.dir else checkpoints.dir)
    if not conf.contains_key("python.fn-execution.memory.managed"):
        # Python operators sharing a slot's Python process (the default) release it through
        # Flink's SharedResources; after a failover that release can underflow Beam's reference
        # count ("Reference count must not be negative"), a fatal error that kills the whole
        # TaskManager. One process per Python operator releases its own (see docs/reliability.md).
        conf.set_string("python.fn-execution.memory.managed", "false")
    if not conf.contains_key("restart-strategy.type"):
        # Exponential, not fixed: until the JobManager has missed a dead TaskManager's heartbeats
        # it deploys onto its slots again, and each such try fails at once and counts as a restart.
        conf.set_string("restart-strategy.type", "exponential-delay")
        conf.set_string("restart-strategy.exponential-delay.initial-backoff", "1 s")
        conf.set_string("restart-strategy.exponential-delay.max-backoff", "20 s")
        conf.set_string("restart-strategy.exponential-delay.backoff-multiplier", "2.0")
        conf.set_string("restart-strategy.exponential-delay.attempts-before-reset-backoff", str(checkpoints.restart_attempts))
