"""Co-location of operators that share an in-JVM queue (the feedback loop, the credit gate, a relay).

Flink gives a task the co-location group of its chain's first operator and ignores the group of
every operator chained after it. A sink chained to the operator before it (the replicas'
feedback sink is) must therefore pin that operator, not itself. :func:`co_locate` pins the whole
chain each given operator may belong to, under one key.

Example (what ``FeedbackLoop.close`` does)::

    co_locate(f"{loop_id}-loop", source_transformation, sink_transformation)
"""

from __future__ import annotations


def chainable_upstream(transformation):
    """``transformation`` and the operators above it that may share its chain: one input each,
    the same parallelism and slot-sharing group (a co-location group must not span two), through
    forward partitions, up to (not across) another shuffle, and the source itself."""
    found = [transformation]
    while True:
        inputs = list(transformation.getInputs())
        if len(inputs) != 1:
            return found
        upstream = inputs[0]
        if "Partition" in upstream.getClass().getSimpleName():
            if "Forward" not in upstream.getPartitioner().getClass().getSimpleName():
                return found
            transformation = upstream  # virtual: walk on to the operator before it
            continue
        if (upstream.getParallelism() != found[-1].getParallelism()
                or not upstream.getSlotSharingGroup().equals(found[-1].getSlotSharingGroup())):
            return found
        found.append(upstream)
        transformation = upstream


def co_locate(key: str, *transformations) -> str:
    """Pins every operator of ``transformations`` and of the chains they may join into one
    co-location group: the group one of them already has, else ``key``. Returns the key used."""
    members = [member for t in transformations for member in chainable_upstream(t)]
    existing = {member.getCoLocationGroupKey() for member in members} - {None}
    if len(existing) > 1:
        raise ValueError(f"operators of two co-location groups cannot share a chain: {sorted(existing)}")
    key = existing.pop() if existing else key
    for member in members:
        member.setCoLocationGroupKey(key)
    return key
