"""The Flink glue: operator functions, routing, environment settings and ``train()``."""

from .._lazy import lazy_exports

# Loaded on first use: importing a package must not import its submodules (see pyflink_tensair._lazy).
_NAMES = {"to_batches": ".batching", "TrainOutput": ".training", "train": ".training",
          "decode_final_model": ".types", "decode_prediction": ".types"}
__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
