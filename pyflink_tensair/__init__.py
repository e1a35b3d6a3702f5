"""pyflink_tensair: Keras model replicas trained inside a PyFlink job, exchanging gradients (DASGD).

Example::

    from pyflink_tensair import TrainConfig, train
    out = train(batches, model=build_model, config=TrainConfig(replicas=2, staleness_bound=None))
    out.predictions   # DataStream of predictions, one record per input batch
    out.metrics       # DataStream of per-replica metrics (JSON strings)
"""

from ._lazy import lazy_exports

__version__ = "0.1.0"

# Every name loads on first use: importing a package must not import its subpackages (see _lazy).
_NAMES = {
    "LatencySettings": ".config", "Mode": ".config", "TrainConfig": ".config", "WorkerMode": ".config",
    "Batch": ".core.messages", "SparseGradient": ".core.messages",
    "decode_batch": ".core.wire", "decode_tensors": ".core.wire", "encode_batch": ".core.wire",
    "encode_tensors": ".core.wire",
    "ConfigError": ".errors", "JavaToolchainError": ".errors", "ModelError": ".errors", "TensairError": ".errors",
    "WireFormatError": ".errors",
    "train": ".flink.training", "TrainOutput": ".flink.training", "to_batches": ".flink.batching",
}

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
