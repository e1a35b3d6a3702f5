"""An exact NumPy model and seeded regression data, for tests of the protocol and of pipelines.

Example::

    >>> model = LinearModel(3, seed=0)
    >>> result = model.compute_gradients(make_regression_batches(1, 3)[0])
    >>> result.predictions.shape, sorted(result.gradients)
    ((16,), ['b', 'w'])
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from ..core.guards import BatchSpec
from ..core.messages import Batch, Gradients
from ..core.model_api import StepResult


class LinearModel:
    """Linear regression ``y = x @ w + b`` with mean-squared-error loss and SGD with momentum.

    Implements :class:`~pyflink_tensair.core.model_api.TrainableModel` in float64 NumPy, so every
    update is exact and easy to compute by hand. The momentum buffers are its optimizer slots.
    """

    def __init__(self, features: int, *, learning_rate: float = 0.05, momentum: float = 0.5, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.weights = {"w": rng.normal(0.0, 0.1, size=features), "b": np.zeros(1)}
        self.velocity = {k: np.zeros_like(v) for k, v in self.weights.items()}

    def batch_spec(self) -> BatchSpec:
        """Rows of ``features`` numbers; any numeric label (a regression)."""
        return BatchSpec(inputs={None: tuple(self.weights["w"].shape)})

    def _forward(self, batch: Batch) -> np.ndarray:
        return np.asarray(batch.x, np.float64) @ self.weights["w"] + self.weights["b"][0]

    def evaluate(self, batch: Batch) -> StepResult:
        pred = self._forward(batch)
        loss = None if batch.y is None else float(np.mean((pred - batch.y) ** 2))
        return StepResult(predictions=pred, loss=loss)

    def compute_gradients(self, batch: Batch) -> StepResult:
        x = np.asarray(batch.x, np.float64)
        pred = self._forward(batch)
        err = pred - np.asarray(batch.y, np.float64)
        grads = {"w": 2.0 * x.T @ err / len(err), "b": np.array([2.0 * err.mean()])}
        return StepResult(predictions=pred, loss=float(np.mean(err ** 2)), gradients=grads)

    def apply_gradients(self, gradients: Gradients) -> None:
        for name, grad in gradients.items():
            dense = grad.to_dense() if hasattr(grad, "to_dense") else grad
            self.velocity[name] = self.momentum * self.velocity[name] + dense
            self.weights[name] = self.weights[name] - self.learning_rate * self.velocity[name]

    def apply_sgd(self, gradients: Gradients, learning_rate: float) -> None:
        """A plain step ``w -= learning_rate * g``; the momentum buffers stay as they are."""
        for name, grad in gradients.items():
            dense = grad.to_dense() if hasattr(grad, "to_dense") else grad
            self.weights[name] = self.weights[name] - learning_rate * dense

    def get_state(self) -> Dict[str, np.ndarray]:
        return {**{f"weights/{k}": v.copy() for k, v in self.weights.items()},
                **{f"velocity/{k}": v.copy() for k, v in self.velocity.items()}}

    def set_state(self, state: Dict[str, np.ndarray]) -> None:
        for key, value in state.items():
            group, name = key.split("/", 1)
            getattr(self, group)[name] = np.array(value, np.float64)

    def get_weights(self) -> Dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.weights.items()}

    def set_weights(self, weights) -> None:
        """Sets the given weights (a ``SparseGradient`` sets only its rows)."""
        for name, value in weights.items():
            if hasattr(value, "indices"):
                self.weights[name][value.indices] = value.values
            else:
                self.weights[name] = np.array(value, np.float64)


def make_regression_batches(count: int, features: int, *, batch_size: int = 16, seed: int = 0,
                            noise: float = 0.01) -> List[Batch]:
    """``count`` batches of a fixed random linear target, with ids ``0 .. count - 1``."""
    rng = np.random.default_rng(seed)
    true_w = rng.normal(size=features)
    batches = []
    for i in range(count):
        x = rng.normal(size=(batch_size, features))
        y = x @ true_w + 0.5 + noise * rng.normal(size=batch_size)
        batches.append(Batch(x=x, y=y, meta={"id": i}))
    return batches
