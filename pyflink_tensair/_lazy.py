"""Package attributes that import their module on first use (PEP 562).

A package ``__init__`` must not import its own submodules: Beam's worker threads unpickle
functions concurrently, and a thread inside ``pyflink_tensair.flink``'s ``__init__`` (importing
``.routing``) while another imports ``pyflink_tensair.flink.routing`` (which waits for the package)
is a lock cycle: Python raises ``_DeadlockError`` in the worker. Seen in a cluster test with the
top package and in a local benchmark with ``flink``.
"""

import importlib
from typing import Callable, Dict


def lazy_exports(package: str, names: Dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that resolves ``names[attr]`` (a relative module
    name) on first use.

    Example::

        >>> getattr_ = lazy_exports("pyflink_tensair", {"TrainConfig": ".config"})
        >>> getattr_("TrainConfig").__name__
        'TrainConfig'
    """

    def __getattr__(name):
        if name in names:
            return getattr(importlib.import_module(names[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
