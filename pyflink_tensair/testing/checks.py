"""Conformance checks: what the replicas rely on from a model, and what every protocol runner must give.

:func:`check_trainable_model` checks a model against the contract of
:class:`~pyflink_tensair.core.model_api.TrainableModel`; :func:`check_protocol` runs a training
protocol over a grid of replica counts, staleness bounds and delivery delays and checks its
invariants in every cell. Both raise ``AssertionError`` whose message starts with the name of the
broken rule, and return the names (or cells) that passed.
"""

from __future__ import annotations

import collections
import itertools
import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..config import TrainConfig
from ..core import wire
from ..core.gradients import average_gradients
from ..core.messages import Batch, GradientMessage, Gradients, SparseGradient
from ..core.model_api import StepResult, TrainableModel
from ..core.simulation import SimulationResult, max_weight_diff, simulate
from ..errors import ProtocolError

MODEL_RULES = {
    "equal_start": "two factory() calls must build models with equal weights (seed them)",
    "step_result": ("compute_gradients must return a StepResult with one prediction row per example, a finite "
                    "Python float loss and finite gradients named and shaped like get_weights()"),
    "no_side_effects": "compute_gradients and evaluate must not change the weights",
    "evaluate_loss": "evaluate's loss must equal compute_gradients' loss on the same weights",
    "wire_round_trip": "gradients must come out of the wire format (core.wire) unchanged",
    "apply_changes": "apply_gradients must change the weights",
    "deterministic_apply": "the same gradients applied to equal models must give equal weights",
    "train_step": ("a model's optional train_step(batch) must return compute_gradients' result and leave the "
                   "weights apply_gradients of that gradient leaves, bit for bit"),
    "state_round_trip": ("a model restored with set_state(other.get_state()) must train exactly like the other "
                         "(weights and optimizer slots)"),
    "set_weights": ("set_weights of a model's changed weights (a SparseGradient: only its rows) must make another "
                    "model equal to it, as the Flink ML baseline's workers do"),
}
PROTOCOL_RULES = {
    "no_deadlock": "every replica must finish",
    "every_batch_once": "the 'batch' Metrics records must name every input batch exactly once",
    "final_models": "every replica 0 .. n - 1 must return a FinalModel with finite weights",
    "staleness_bound": "no batch may be trained beyond the staleness bound unless bound_overflows > 0",
    "sync_identical": "with staleness_bound=0 the replicas must end bit-identical",
    "sync_is_sequential_sgd": ("with staleness_bound=0 the replicas must equal sequential synchronous SGD (the average "
                               "of every replica's k-th gradient at step k, summed in replica order)"),
}


def _broken(rule: str, detail: str) -> AssertionError:
    return AssertionError(f"{rule}: {MODEL_RULES.get(rule) or PROTOCOL_RULES[rule]}. Found: {detail}")


def _require(ok: bool, rule: str, detail: str) -> None:
    if not ok:
        raise _broken(rule, detail)


def _weights_diff(a: Dict[str, np.ndarray], b: Dict[str, np.ndarray]) -> Optional[str]:
    """``None`` when ``a`` and ``b`` are equal, otherwise what differs."""
    if sorted(a) != sorted(b):
        return f"weights are named {sorted(a)} and {sorted(b)}"
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.shape != y.shape:
            return f"weight {name!r} has shapes {x.shape} and {y.shape}"
        if not np.array_equal(x, y):
            return f"weight {name!r} differs by up to {max_weight_diff([{name: x}, {name: y}]):.3g}"
    return None


def _dense(gradient) -> np.ndarray:
    return gradient.to_dense() if isinstance(gradient, SparseGradient) else np.asarray(gradient)


def _labelled(batches: Sequence[Batch], caller: str) -> List[Batch]:
    batches = list(batches)
    if not batches or any(b.y is None for b in batches):
        raise ValueError(f"{caller} needs at least one batch, each with labels 'y'")
    return batches


def _check_step(result, batch: Batch, weights: Dict[str, np.ndarray]) -> None:
    _require(isinstance(result, StepResult), "step_result", f"a {type(result).__name__}")
    shape = np.shape(result.predictions)
    _require(shape[:1] == (batch.size,), "step_result", f"predictions of shape {shape} for {batch.size} examples")
    loss = result.loss
    _require(isinstance(loss, float) and math.isfinite(loss), "step_result", f"loss={loss!r}")
    grads = result.gradients if isinstance(result.gradients, dict) else {}
    _require(sorted(grads) == sorted(weights), "step_result",
             f"gradients named {sorted(grads)}, weights named {sorted(weights)}")
    for name, grad in grads.items():
        sparse = isinstance(grad, SparseGradient)
        got = tuple(grad.dense_shape) if sparse else np.shape(grad)
        _require(got == np.shape(weights[name]), "step_result",
                 f"gradient {name!r} has {'dense_shape' if sparse else 'shape'} {got}, its weight "
                 f"{np.shape(weights[name])}")
        _require(bool(np.all(np.isfinite(grad.values if sparse else grad))), "step_result",
                 f"gradient {name!r} is not finite")


def _parts(grad) -> tuple:
    if isinstance(grad, SparseGradient):
        return np.asarray(grad.indices), np.asarray(grad.values), np.asarray(grad.dense_shape)
    return (np.asarray(grad),)


def _check_wire(grads: Gradients) -> None:
    try:
        decoded = wire.decode_message(wire.encode_message(GradientMessage(0, 1, 1, grads))).gradients
    except Exception as err:  # any failure to encode is this rule's failure
        raise _broken("wire_round_trip", f"encoding raised {err!r}") from err
    _require(list(decoded) == list(grads), "wire_round_trip", f"names {list(grads)} came back as {list(decoded)}")
    for name, grad in grads.items():
        back = decoded[name]
        same_kind = isinstance(back, SparseGradient) == isinstance(grad, SparseGradient)
        same = same_kind and all(x.dtype == y.dtype and np.array_equal(x, y)
                                 for x, y in zip(_parts(grad), _parts(back)))
        _require(same, "wire_round_trip", f"gradient {name!r} changed")


def _train_step(model: TrainableModel, batch: Batch) -> Gradients:
    grads = model.compute_gradients(batch).gradients
    model.apply_gradients(grads)
    return grads


def check_trainable_model(factory: Callable[[], TrainableModel], batches: Sequence[Batch], *,
                          rtol: float = 1e-5, atol: float = 1e-6) -> List[str]:
    """Checks that the models ``factory()`` builds keep the contract the replicas rely on.

    ``batches``: a few labelled batches. Builds three models. The rules, in the order checked (the
    keys of ``MODEL_RULES``): equal weights from two ``factory()`` calls; a well-formed
    ``StepResult`` (a ``SparseGradient``'s ``dense_shape`` must match its weight); no weight changes
    from ``compute_gradients`` or ``evaluate``; equal losses from both (within ``rtol``/``atol``);
    gradients unchanged through the wire format; ``apply_gradients`` changes the weights and is
    deterministic; ``get_state``/``set_state`` round-trips, optimizer slots included; and, only
    if the model has ``set_weights``, the Flink ML baseline's weight updates. Raises
    ``AssertionError`` naming the broken rule; returns the names of the rules passed.

    Example::

        >>> from pyflink_tensair.testing import LinearModel, make_regression_batches
        >>> check_trainable_model(lambda: LinearModel(3, seed=0), make_regression_batches(2, 3))[:3]
        ['equal_start', 'step_result', 'no_side_effects']
        >>> seeds = iter(range(10))
        >>> check_trainable_model(lambda: LinearModel(3, seed=next(seeds)), make_regression_batches(2, 3))
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        AssertionError: equal_start: two factory() calls must build models with equal weights (seed them). ...
    """
    batches = _labelled(batches, "check_trainable_model")
    first, second = factory(), factory()
    weights = first.get_weights()
    differ = _weights_diff(weights, second.get_weights())
    _require(differ is None, "equal_start", f"{differ}")
    for i, batch in enumerate(batches):
        result = first.compute_gradients(batch)
        _check_step(result, batch, weights)
        evaluated = first.evaluate(batch)
        changed = _weights_diff(weights, first.get_weights())
        _require(changed is None, "no_side_effects", f"after batch {i}: {changed}")
        _require(isinstance(evaluated.loss, float) and math.isclose(evaluated.loss, result.loss, rel_tol=rtol,
                                                                    abs_tol=atol),
                 "evaluate_loss", f"batch {i}: evaluate gave {evaluated.loss!r}, compute_gradients {result.loss!r}")
        _check_wire(result.gradients)
    fused = factory() if callable(getattr(first, "train_step", None)) else None
    for i, batch in enumerate(batches):  # both models take first's gradients, step by step
        before = first.get_weights()
        grads = _train_step(first, batch)
        second.apply_gradients(grads)
        after = first.get_weights()
        _require(i > 0 or _weights_diff(before, after) is not None, "apply_changes",
                 "the weights did not move when the gradients of batch 0 were applied")
        differ = _weights_diff(after, second.get_weights())
        _require(differ is None, "deterministic_apply", f"after batch {i}: {differ}")
        if fused is not None:
            returned = fused.train_step(batch).gradients
            differ = _weights_diff(after, fused.get_weights()) or _weights_diff(
                {n: _dense(g) for n, g in grads.items()}, {n: _dense(g) for n, g in (returned or {}).items()})
            _require(differ is None, "train_step", f"after batch {i}: {differ}")
    passed = ["equal_start", "step_result", "no_side_effects", "evaluate_loss", "wire_round_trip", "apply_changes",
              "deterministic_apply"] + (["train_step"] if fused is not None else [])
    restored = factory()
    restored.set_state(first.get_state())
    differ = _weights_diff(first.get_weights(), restored.get_weights())
    _require(differ is None, "state_round_trip", f"right after set_state: {differ}")
    grads = _train_step(first, batches[0])
    _train_step(restored, batches[0])
    differ = _weights_diff(first.get_weights(), restored.get_weights())
    _require(differ is None, "state_round_trip", f"one step later: {differ} (are the optimizer slots in the state?)")
    passed.append("state_round_trip")
    if hasattr(second, "set_weights"):  # second is one step behind first
        new = first.get_weights()
        second.set_weights({name: SparseGradient(g.indices, new[name][g.indices], g.dense_shape)
                            if isinstance(g, SparseGradient) else new[name] for name, g in grads.items()})
        differ = _weights_diff(new, second.get_weights())
        _require(differ is None, "set_weights",
                 f"{differ} (wrong set_weights, or apply_gradients changed rows a SparseGradient did not touch)")
        passed.append("set_weights")
    return passed


Runner = Callable[..., SimulationResult]


def _batch_summary(got: List[int], want: List[int]) -> str:
    counts = collections.Counter(got)
    missing = sorted(set(want) - set(counts))
    repeated = sorted(i for i, c in counts.items() if c > 1)
    unknown = sorted(set(counts) - set(want))
    return f"missing {missing}, trained more than once {repeated}, unknown {unknown}"


def _sequential_sgd(make_model, by_id: Dict[int, Batch], assignment: Tuple[Tuple[int, ...], ...]):
    """Plain synchronous SGD: at step k, the average of every replica's k-th gradient, in replica order."""
    model = make_model(0)
    for step in range(max(map(len, assignment), default=0)):
        model.apply_gradients(average_gradients(
            [model.compute_gradients(by_id[ids[step]]).gradients for ids in assignment if len(ids) > step]))
    return model.get_weights()


def check_protocol(make_model: Callable[[int], TrainableModel], batches: Sequence[Batch], *,
                   run: Runner = simulate, staleness_bounds: Sequence[Optional[int]] = (0, 2, None),
                   replicas: Sequence[int] = (1, 2, 3), delays: Sequence[int] = (0, 1, 3),
                   atol: float = 1e-6) -> List[str]:
    """Runs ``run(make_model, batches, config=TrainConfig(replicas=n, staleness_bound=s), delivery_delay=d)``
    over the grid of ``replicas`` x ``staleness_bounds`` x ``delays`` and checks, in every cell, the
    rules of ``PROTOCOL_RULES``: no ``ProtocolError`` (deadlock); every batch trained exactly once;
    a finite ``FinalModel`` from every replica; no staleness above a bound ``s`` without a bound
    overflow; and for ``s = 0`` bit-identical replicas within ``atol`` of sequential synchronous SGD
    (built with ``make_model(0)``; which replica trained which batch is read from the records).

    ``batches`` need distinct ids (``meta["id"]``). ``run`` may be any runner with
    :func:`~pyflink_tensair.core.simulation.simulate`'s signature; of its result only ``metrics``
    (the ``"batch"`` records' ``replica``, ``local_step``, ``batch_id``, ``staleness`` and
    ``bound_overflows``) and ``final_models`` (replica id -> ``FinalModel``) are read. Raises
    ``AssertionError`` naming the broken rule and the cell; returns the cells checked.

    Example::

        >>> from pyflink_tensair.testing import LinearModel, make_regression_batches
        >>> cells = check_protocol(lambda r: LinearModel(3), make_regression_batches(7, 3), replicas=(1, 2))
        >>> len(cells), cells[0]
        (18, 'replicas=1, staleness_bound=0, delivery_delay=0')
    """
    batches = _labelled(batches, "check_protocol")
    by_id = {b.id: b for b in batches}
    ids = sorted(by_id)
    if len(ids) != len(batches) or -1 in by_id:
        raise ValueError("check_protocol needs batches with distinct ids (meta['id']). "
                         f"Received: ids={[b.id for b in batches]}")
    references: Dict[tuple, Dict[str, np.ndarray]] = {}
    cells = []
    for n, s, d in itertools.product(replicas, staleness_bounds, delays):
        cell = f"replicas={n}, staleness_bound={s}, delivery_delay={d}"
        try:
            result = run(make_model, batches, config=TrainConfig(replicas=n, staleness_bound=s), delivery_delay=d)
        except ProtocolError as err:
            raise _broken("no_deadlock", f"{cell}: {err}") from err
        trained = sorted((m for m in result.metrics if m.phase == "batch"), key=lambda m: (m.replica, m.local_step))
        got = sorted(m.batch_id for m in trained)
        _require(got == ids, "every_batch_once", f"{cell}: {_batch_summary(got, ids)}")
        _require(sorted(result.final_models) == list(range(n)), "final_models",
                 f"{cell}: final models of replicas {sorted(result.final_models)}")
        finals = [result.final_models[r].weights for r in range(n)]
        for r, weights in enumerate(finals):
            bad = [name for name, w in weights.items() if not np.all(np.isfinite(w))]
            _require(not bad, "final_models", f"{cell}: replica {r}'s weights {bad} are not finite")
        for m in trained:
            _require(s is None or m.staleness <= s or m.bound_overflows > 0, "staleness_bound",
                     f"{cell}: replica {m.replica} trained batch {m.batch_id} at staleness {m.staleness}")
        if s == 0:
            _require(max_weight_diff(finals) == 0.0, "sync_identical",
                     f"{cell}: replicas differ by up to {max_weight_diff(finals):.3g}")
            assignment = tuple(tuple(m.batch_id for m in trained if m.replica == r) for r in range(n))
            if assignment not in references:
                references[assignment] = _sequential_sgd(make_model, by_id, assignment)
            reference = references[assignment]
            _require(sorted(reference) == sorted(finals[0]), "sync_is_sequential_sgd",
                     f"{cell}: weights named {sorted(finals[0])}, the reference's {sorted(reference)}")
            differ = max_weight_diff([reference, finals[0]])
            _require(differ <= atol, "sync_is_sequential_sgd",
                     f"{cell}: replica 0 differs from it by up to {differ:.3g} (atol={atol})")
        cells.append(cell)
    return cells
