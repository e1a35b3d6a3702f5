"""The Flink glue: ``train()``, the feedback loop's plumbing, operator functions, routing,
environment settings, sources and sinks, and the records' Flink types."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# Loaded on first use: importing a package must not import its submodules (see pyflink_tensair._lazy).
_NAMES = {"to_batches": ".batching", "FeedbackLoop": ".loop", "keras_model": ".results", "keras_models": ".results",
          "batch_source": ".sources", "TrainOutput": ".training", "train": ".training",
          "decode_final_model": ".types", "decode_prediction": ".types"}
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from .batching import to_batches
    from .loop import FeedbackLoop
    from .results import keras_model, keras_models
    from .sources import batch_source
    from .training import TrainOutput, train
    from .types import decode_final_model, decode_prediction

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
