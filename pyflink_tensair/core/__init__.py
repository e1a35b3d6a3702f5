"""Pure training logic: the replica state machine, messages, wire format and simulation.

Nothing in this package imports pyflink (a test enforces it), so the protocol runs and is tested
without a cluster.
"""

from .events import Broadcast, FinalModel, Metrics, Prediction
from .messages import Batch, DoneMessage, GradientMessage, SparseGradient
from .model_api import StepResult, TrainableModel
from .replica import Replica
from .simulation import SimulationResult, simulate

__all__ = ["Batch", "Broadcast", "DoneMessage", "FinalModel", "GradientMessage", "Metrics",
           "Prediction", "Replica", "SimulationResult", "SparseGradient", "StepResult",
           "TrainableModel", "simulate"]
