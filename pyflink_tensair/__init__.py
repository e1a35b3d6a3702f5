"""pyflink_tensair: Keras model replicas trained inside a PyFlink job, exchanging gradients (DASGD).

Example::

    from pyflink_tensair import TrainConfig, train
    out = train(batches, model=build_model, config=TrainConfig(replicas=2, staleness_bound=None))
    out.predictions   # DataStream of predictions, one record per input batch
    out.metrics       # DataStream of per-replica metrics (JSON strings)
"""

import importlib

__version__ = "0.1.0"

# Every name loads on first use. Importing this package must not import its subpackages: Beam's
# worker threads unpickle functions concurrently, and a package __init__ that imports
# `pyflink_tensair.core` while another thread imports `pyflink_tensair.core.wire` is a lock cycle
# (Python raised _DeadlockError in a cluster test). Lazy names also keep the core importable alone.
_NAMES = {
    "LatencySettings": ".config", "Mode": ".config", "TrainConfig": ".config", "WorkerMode": ".config",
    "Batch": ".core.messages", "SparseGradient": ".core.messages",
    "decode_batch": ".core.wire", "decode_tensors": ".core.wire", "encode_batch": ".core.wire",
    "encode_tensors": ".core.wire",
    "ConfigError": ".errors", "JavaToolchainError": ".errors", "ModelError": ".errors", "TensairError": ".errors",
    "WireFormatError": ".errors",
    "train": ".flink", "TrainOutput": ".flink", "to_batches": ".flink",
}


def __getattr__(name):
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name], __name__), name)
    raise AttributeError(f"module 'pyflink_tensair' has no attribute {name!r}")


__all__ = sorted(_NAMES)
