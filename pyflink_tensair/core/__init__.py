"""Pure training logic: the replica state machine, messages, wire format and simulation.

Nothing in this package imports pyflink (a test enforces it), so the protocol runs and is tested
without a cluster.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# Loaded on first use: importing a package must not import its submodules (see pyflink_tensair._lazy).
_NAMES = {
    "Broadcast": ".events", "FinalModel": ".events", "Metrics": ".events", "Prediction": ".events",
    "Batch": ".messages", "DoneMessage": ".messages", "GradientMessage": ".messages", "SparseGradient": ".messages",
    "StepResult": ".model_api", "TrainableModel": ".model_api", "Replica": ".replica",
    "SimulationResult": ".simulation", "simulate": ".simulation",
}
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from .events import Broadcast, FinalModel, Metrics, Prediction
    from .messages import Batch, DoneMessage, GradientMessage, SparseGradient
    from .model_api import StepResult, TrainableModel
    from .replica import Replica
    from .simulation import SimulationResult, simulate

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
