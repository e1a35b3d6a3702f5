"""The Flink glue: ``train()``, the feedback loop's plumbing, operator functions, routing,
environment settings, sources and sinks, and the records' Flink types."""

from .._lazy import lazy_exports

# Loaded on first use: importing a package must not import its submodules (see pyflink_tensair._lazy).
_NAMES = {"to_batches": ".batching", "FeedbackLoop": ".loop", "keras_model": ".results", "keras_models": ".results",
          "batch_source": ".sources", "TrainOutput": ".training", "train": ".training",
          "decode_final_model": ".types", "decode_prediction": ".types"}
__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
