"""What a replica needs from a model: the seam between the protocol and the ML framework.

The Keras adapter (:mod:`pyflink_tensair.models.keras_adapter`) implements it for real models; the
NumPy :class:`~pyflink_tensair.testing.LinearModel` implements it for fast, exact tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Protocol

import numpy as np

from .messages import Batch, Gradients


@dataclass(frozen=True)
class StepResult:
    """What one forward pass gives: the prequential loss and accuracy, predictions, gradients.

    ``loss``/``accuracy`` are ``None`` when the batch has no labels (or accuracy does not apply);
    ``gradients`` is ``None`` for a prediction-only pass. ``finite``: whether the loss and every value
    of the gradient are finite, where the model checks (``None``: it does not; the replica measures). A
    ``train_step`` that finds its gradient not finite must not apply it.
    """

    predictions: np.ndarray
    loss: Optional[float] = None
    accuracy: Optional[float] = None
    gradients: Optional[Gradients] = None
    finite: Optional[bool] = None


class TrainableModel(Protocol):
    def compute_gradients(self, batch: Batch) -> StepResult:
        """Predicts on ``batch`` with the current weights and returns the gradient of its loss."""

    def evaluate(self, batch: Batch) -> StepResult:
        """Predicts on ``batch`` (and scores it when it has labels) without computing gradients."""

    def apply_gradients(self, gradients: Gradients) -> None:
        """Applies one update through the model's own optimizer."""

    # Optional, a faster path: ``train_step(batch, return_gradients=True) -> StepResult``, which
    # is ``compute_gradients(batch)`` followed by ``apply_gradients`` of the gradient it returns,
    # in one call (``gradients`` is ``None`` with ``return_gradients=False``). A DASGD replica
    # uses it for its own steps where present. A model whose sparse rows travel as half floats
    # declares it with ``sparse_values = "float16"`` and applies the rows rounded so.

    # Optional: ``batch_spec() -> guards.BatchSpec``, the inputs, dtypes and classes the model
    # takes, so that a replica sets aside batches that do not fit instead of failing on them;
    # a model that refuses a batch inside a step raises ``BatchRejectedError`` (nothing applied).

    def get_state(self) -> Dict[str, np.ndarray]:
        """Weights and optimizer slots as plain arrays."""

    def set_state(self, state: Dict[str, np.ndarray]) -> None:
        """Restores what :meth:`get_state` returned."""

    def get_weights(self) -> Dict[str, np.ndarray]:
        """The trainable weights by name."""
