"""A stream taken off the checkpoint barrier's path: re-emitted by a source in the same slot.

With aligned checkpoints an operator of two inputs snapshots once the barrier has come on both,
and it reads neither while it waits. A server's second input is the model updates of the
replicas, whose barrier comes after every batch queued on the training path before it (36.8 s
in one checkpoint of ``jobs/online_loop.py`` on two cores, with the served file standing still
meanwhile). Relayed, the updates reach the servers from sources, which emit their barriers when
the checkpoint is triggered::

    updates (N) ─► relay sink i ═══ in-JVM queue i ═══► relay source i (N) ─┬─► what follows
                   └──────────── one co-location group: one slot, one JVM ───┘│
    beside: a source of the writer's region ─► drop every record (JVM) ─────────┘

Flink co-locates tasks of one pipelined region only, and sink and source have no edge between
them; the edge from ``beside`` (e.g. the feedback loop's source) puts the relay's readers into
the writer's region, and carries no record and no barrier later than the checkpoint's trigger.

Nothing in the queue is in a checkpoint: a relay is for streams whose reader can miss records
(a server that misses a delta waits for the next snapshot; a restored trainer publishes one at
once). A queue holds at most 64 MiB (``FeedbackQueues.RELAY_MAX_BYTES``), the oldest records
going first, so that a relayed stream that no operator reads costs bounded memory. The source
ends once the sink's input has ended and the queue is empty; a restarted sink drops what its
earlier attempt left in the queue.

Example (what ``train()`` does with ``TrainConfig.updates``)::

    updates = relay(updates, name="tensair: model updates", uid="tensair-updates-relay",
                    beside=loop.feedback_source)
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from . import types
from .colocation import co_locate
from .environment import add_channel_jar

if TYPE_CHECKING:
    from pyflink.datastream import DataStream


def relay(stream: "DataStream", *, name: str, uid: str, beside: "DataStream") -> "DataStream":
    """``stream`` (of bytes) re-emitted by a source beside its writer, subtask ``i`` to subtask
    ``i``, at ``stream``'s parallelism, in the pipelined region of ``beside`` (a source stream of
    ``stream``'s region: see the module docstring). Operators ``"<name> (relay sink)"`` and
    ``"<name> (relay source)"``, uids ``"<uid>-sink"``, ``"<uid>-source"`` and ``"<uid>-region"``."""
    from pyflink.common import WatermarkStrategy
    from pyflink.datastream import DataStream, StreamExecutionEnvironment
    from pyflink.datastream.connectors import Sink, Source
    from pyflink.java_gateway import get_gateway

    j_env = stream._j_data_stream.getExecutionEnvironment()
    add_channel_jar(j_env)
    channel = get_gateway().jvm.pyflinktensair.feedback
    relay_id = f"{name}-{uuid.uuid4().hex}"
    parallelism = stream._j_data_stream.getTransformation().getParallelism()
    sink = stream.sink_to(Sink(channel.FeedbackSink.relay(relay_id))).name(f"{name} (relay sink)").uid(f"{uid}-sink")
    source = StreamExecutionEnvironment(j_env).from_source(
        Source(channel.FeedbackSource.relay(relay_id)), WatermarkStrategy(channel.FeedbackSource.watermarkStrategy()),
        f"{name} (relay source)", type_info=types.bytes_type()).uid(f"{uid}-source")
    if parallelism > 0:
        sink = sink.set_parallelism(parallelism)
        source = source.set_parallelism(parallelism)
    # one slot for both, with the chain the sink joins (the replicas and their feedback loop)
    co_locate(relay_id, sink._j_data_stream_sink.getTransformation(), source._j_data_stream.getTransformation())
    region = DataStream(beside._j_data_stream.filter(channel.FeedbackSource.Nothing()))
    region = region.name(f"{name} (same region as its writer)").uid(f"{uid}-region")
    beside_parallelism = beside._j_data_stream.getTransformation().getParallelism()
    if beside_parallelism > 0:
        region = region.set_parallelism(beside_parallelism)
    return source.union(region)
