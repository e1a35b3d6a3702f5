"""Keys that pin replica ``r`` to subtask ``r``.

PyFlink's ``key_by`` hashes ``Row(key)`` on the JVM, so the key that lands on subtask ``r`` is
found by asking Flink's own key-group assignment, once, when the job graph is built.
"""

from __future__ import annotations

from typing import List

DEFAULT_MAX_PARALLELISM = 128


def pinned_keys(parallelism: int, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> List[int]:
    """``keys[r]`` is an int key that Flink routes to subtask ``r`` of a keyed operator.

    Example::

        >>> keys = pinned_keys(2)          # doctest: +SKIP
        >>> len(keys)                      # doctest: +SKIP
        2
    """
    if not 1 <= parallelism <= max_parallelism:
        raise ValueError(f"parallelism must be in [1, {max_parallelism}]. Received: {parallelism}")
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    assign = jvm.org.apache.flink.runtime.state.KeyGroupRangeAssignment.assignKeyToParallelOperator

    def row_of(value):
        row = jvm.org.apache.flink.types.Row(1)
        row.setField(0, value)
        return row

    keys: List[int] = [-1] * parallelism
    found, candidate = 0, 0
    while found < parallelism:
        subtask = assign(row_of(candidate), max_parallelism, parallelism)
        if keys[subtask] < 0:
            keys[subtask] = candidate
            found += 1
        candidate += 1
    return keys
