"""A testing kit: an exact NumPy model, seeded data, the in-process :func:`simulate`, and the
conformance checks a model or a protocol runner must pass (the way River ships ``check_estimator``).

Use these to test the protocol, or your own pipeline or model around it, without Flink::

    >>> from pyflink_tensair.config import TrainConfig
    >>> from pyflink_tensair.testing import LinearModel, make_regression_batches, simulate
    >>> result = simulate(lambda r: LinearModel(4, seed=1), make_regression_batches(6, 4), TrainConfig(replicas=3))
    >>> len(result.predictions)
    6

Importing this package loads neither pyflink nor TensorFlow (a test enforces it).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# Loaded on first use: importing a package must not import its submodules (see pyflink_tensair._lazy).
_NAMES = {
    "LinearModel": ".linear_model", "make_regression_batches": ".linear_model",
    "SimulationResult": "..core.simulation", "max_weight_diff": "..core.simulation", "simulate": "..core.simulation",
    "check_protocol": ".checks", "check_trainable_model": ".checks",
}
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from ..core.simulation import SimulationResult, max_weight_diff, simulate
    from .checks import check_protocol, check_trainable_model
    from .linear_model import LinearModel, make_regression_batches

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
