"""The user's cache folder: built jars and fetched corpora are kept there between runs.

Example::

    >>> import os
    >>> os.environ["PYFLINK_TENSAIR_CACHE"] = "/tmp/tensair-cache"
    >>> cache_dir()
    '/tmp/tensair-cache'
    >>> del os.environ["PYFLINK_TENSAIR_CACHE"]
"""

from __future__ import annotations

import os


def cache_dir() -> str:
    """$PYFLINK_TENSAIR_CACHE, else ``$XDG_CACHE_HOME/pyflink_tensair``, else ``~/.cache/pyflink_tensair``."""
    return os.environ.get("PYFLINK_TENSAIR_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "pyflink_tensair")
