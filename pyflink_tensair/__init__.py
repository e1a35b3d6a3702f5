"""pyflink_tensair: Keras model replicas trained inside a PyFlink job, exchanging gradients (DASGD).

Example::

    from pyflink_tensair import TrainConfig, train
    out = train(batches, model=build_model, config=TrainConfig(replicas=2, staleness_bound=None))
    out.predictions   # DataStream of predictions, one record per input batch
    out.metrics       # DataStream of per-replica metrics (JSON strings)
"""

from .config import LatencySettings, Mode, TrainConfig, WorkerMode
from .core.messages import Batch, SparseGradient
from .core.wire import decode_batch, decode_tensors, encode_batch, encode_tensors
from .errors import ConfigError, JavaToolchainError, ModelError, TensairError, WireFormatError

__version__ = "0.1.0"


def __getattr__(name):
    # The Flink glue imports pyflink; load it only when asked for, so the core stays importable alone.
    if name in ("train", "TrainOutput", "to_batches"):
        from . import flink
        return getattr(flink, name)
    raise AttributeError(f"module 'pyflink_tensair' has no attribute {name!r}")


__all__ = ["Batch", "ConfigError", "JavaToolchainError", "LatencySettings", "Mode", "ModelError",
           "SparseGradient", "TensairError", "TrainConfig", "TrainOutput", "WireFormatError",
           "WorkerMode", "decode_batch", "decode_tensors", "encode_batch", "encode_tensors",
           "to_batches", "train"]
