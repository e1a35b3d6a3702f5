"""The model as a replica drives it: its own steps (computed then applied, or fused into one call),
predictions, peers' weights mixed in, id-table rows reset; every call timed, and a batch the model
refuses returned as a dead letter instead of raised.

Example::

    >>> from pyflink_tensair.testing import LinearModel, make_regression_batches
    >>> steps = ModelSteps(LinearModel(3, seed=0), sparse_values="float32")
    >>> result, letter = steps.own_step(make_regression_batches(1, 3)[0], fused=False, with_gradients=True)
    >>> sorted(result.gradients), letter, steps.busy_s > 0
    (['b', 'w'], None, True)
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Optional, Tuple

import numpy as np

from ..errors import BatchRejectedError, ModelError
from .gradients import round_sparse_values
from .guards import BatchSpec, variable_shapes
from .messages import Batch, DeadLetter, batch_letter
from .model_api import StepResult, TrainableModel
from .peer_gradients import move_towards

Outcome = Tuple[Optional[StepResult], Optional[DeadLetter]]


class ModelSteps:
    """One replica's model (``model``, a :class:`~.model_api.TrainableModel`) and what it knows of
    it: the shapes a peer's message must fit, the batches it takes (``spec``), whether its own
    ``train_step`` may stand for compute then apply (``fusable``), its time inside the model."""

    def __init__(self, model: TrainableModel, *, sparse_values: str):
        self.model = model
        self.sparse_values = sparse_values  # how the replica's messages carry sparse rows
        spec = getattr(model, "batch_spec", None)
        self.spec: Optional[BatchSpec] = spec() if callable(spec) else None
        self.shapes = variable_shapes(model.get_weights())
        # the model's own train_step applies the gradient it returns, so it may stand for compute
        # then apply only where it rounds sparse rows as the peers decode them
        self.fusable = callable(getattr(model, "train_step", None)) and (
            sparse_values == "float32" or getattr(model, "sparse_values", None) == sparse_values)
        self.busy_s = 0.0  # seconds inside the model (gradients, updates, predictions)

    def timed(self, method, argument):
        """``method(argument)``, its time counted in ``busy_s``."""
        started = time.perf_counter()
        try:
            return method(argument)
        finally:
            self.busy_s += time.perf_counter() - started

    def guarded(self, method, batch: Batch) -> Outcome:
        """``(method(batch), None)``, or ``(None, dead letter)`` when the model refused the batch."""
        try:
            return self.timed(method, batch), None
        except BatchRejectedError as err:
            return None, batch_letter("rejected_by_model", str(err), batch)

    def own_step(self, batch: Batch, *, fused: bool, with_gradients: bool) -> Outcome:
        """The replica's own step on ``batch``: fused (computed and applied in one call; the gradient
        comes back only ``with_gradients``, for peers) or computed only, its sparse rows rounded as
        the peers will decode them."""
        if fused:
            return self.guarded(functools.partial(self.model.train_step, return_gradients=with_gradients), batch)
        result, letter = self.guarded(self.model.compute_gradients, batch)
        if result is not None and self.sparse_values != "float32" and with_gradients:
            result = dataclasses.replace(result, gradients=round_sparse_values(result.gradients,
                                                                               np.dtype(self.sparse_values)))
        return result, letter

    def evaluate(self, batch: Batch) -> Outcome:
        return self.guarded(self.model.evaluate, batch)

    def move_towards(self, weights, share: float) -> None:
        """Periodic averaging: ``share`` of the way towards a peer's ``weights``."""
        self.timed(functools.partial(move_towards, self.model, share=share), weights)

    def row_reset(self, replica_id: int, tables):
        """The model's ``reset_rows`` (id tables ``tables`` changed hands), or a ModelError."""
        reset = getattr(self.model, "reset_rows", None)
        if reset is None:
            raise ModelError(f"replica {replica_id} received row notices of id tables {sorted(tables)}, but its model "
                             "has no reset_rows (a TrainableModel over a Keras model with Embedding layers has)")
        return reset
