"""Replica snapshots written by the release before issue 51 (commit c19940a), and the script that
wrote them: ``tests/test_replica.py`` restores them with this release and checks that the replicas
resume exactly (a savepoint taken before the replica was split into parts resumes after it).

    PYTHONPATH=<a checkout of c19940a> python tests/data/replica_snapshots.py   # rewrites the files

Each file holds both replicas' snapshots (``<replica>/<entry>``) and the messages that were in
flight (``inflight/<i>/<destination>``, encoded), after :func:`first_half`.
"""

from __future__ import annotations

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BOUNDS = {"sync": 0, "bound2": 2, "unbounded": None}


def make(bound):
    from pyflink_tensair.core.replica import Replica
    from pyflink_tensair.testing import LinearModel

    return [Replica(r, LinearModel(3), replicas=2, staleness_bound=bound, broadcast_every=1 if bound == 0 else 2,
                    buffer_capacity=50) for r in range(2)]


def halves():
    """The script's two halves: ``(kind, target, payload)`` steps (tests/test_replica.py's ``_drive``)."""
    from pyflink_tensair.testing import make_regression_batches

    batches = make_regression_batches(14, 3, seed=7)
    first = [("batch", i % 2, b) for i, b in enumerate(batches[:7])] + [("deliver", None, None), ("batch", 0, batches[0])]
    second = [("batch", i % 2, b) for i, b in enumerate(batches[7:])] + [("end", 0, None), ("end", 1, None)]
    return first, second + [("deliver", None, None)]


def path(name: str) -> str:
    return os.path.join(HERE, f"replica-snapshots-c19940a-{name}.npz")


def load(name: str):
    """``(snapshots by replica, in-flight (destination, encoded message) pairs)`` of one file."""
    with np.load(path(name)) as data:
        entries = {key: data[key] for key in data.files}
    snapshots = {r: {k[len(f"{r}/"):]: v for k, v in entries.items() if k.startswith(f"{r}/")} for r in (0, 1)}
    inflight = sorted((k for k in entries if k.startswith("inflight/")), key=lambda k: int(k.split("/")[1]))
    return snapshots, [(int(k.split("/")[2]), entries[k].tobytes()) for k in inflight]


def write() -> None:
    from pyflink_tensair.core import wire
    from pyflink_tensair.core.events import Broadcast

    for name, bound in BOUNDS.items():
        replicas, queue = make(bound), []

        def handle(events):
            queue.extend((r.id, e.message) for e in events if isinstance(e, Broadcast)
                         for r in replicas if r.id != e.message.sender)

        for kind, target, payload in halves()[0]:
            if kind == "batch":
                handle(replicas[target].on_batch(payload))
            else:
                while queue:
                    dest, message = queue.pop(0)
                    handle(replicas[dest].on_gradient(message))
        entries = {f"{r.id}/{k}": np.asarray(v) for r in replicas for k, v in r.snapshot().items()}
        entries.update((f"inflight/{i}/{dest}", np.frombuffer(wire.encode_message(m), np.uint8))
                       for i, (dest, m) in enumerate(queue))
        np.savez_compressed(path(name), **entries)


if __name__ == "__main__":
    write()
