"""The conformance kit: every model and every protocol runner we ship passes it, and each check can fail."""

import dataclasses
import functools

import numpy as np
import pytest

from benchmarks.throughput.flinkml_protocol import simulate_flinkml
from pyflink_tensair import ConfigError, TrainConfig
from pyflink_tensair.core import Batch, SparseGradient, StepResult
from pyflink_tensair.errors import ProtocolError
from pyflink_tensair.testing import LinearModel, check_protocol, check_trainable_model, make_regression_batches, simulate

BATCHES = make_regression_batches(7, 3, seed=3)
linear = lambda r=0: LinearModel(3, seed=0)  # noqa: E731


# ---------------------------------------------------------------- what we ship passes

def test_linear_model_keeps_the_model_contract():
    assert check_trainable_model(linear, BATCHES[:3])[-1] == "set_weights"


def test_dasgd_replicas_keep_the_protocol_over_the_whole_grid():
    assert len(check_protocol(linear, BATCHES)) == 27


@pytest.mark.parametrize("broadcast", ["changed", "model"])
def test_flinkml_baseline_keeps_the_protocol(broadcast):
    run = functools.partial(simulate_flinkml, broadcast=broadcast)
    assert len(check_protocol(linear, BATCHES, run=run, staleness_bounds=(0,))) == 9


@pytest.fixture(scope="module")
def keras_setup():
    pytest.importorskip("tensorflow")
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    rng = np.random.default_rng(0)
    batches = [Batch(rng.normal(size=(8, 20)).astype(np.float32), rng.integers(0, 4, 8), {"id": i}) for i in range(4)]
    embedding = functools.partial(zoo.embedding_classifier, vocabulary=300, dim=8, length=6)
    tokens = [Batch(rng.integers(0, 300, size=(8, 6)).astype(np.int32), rng.integers(0, 2, 8)) for _ in range(2)]
    return {"dense": lambda r=0: KerasModelAdapter(load_model(zoo.quickstart_classifier, seed=0)),
            "embedding": lambda: KerasModelAdapter(load_model(embedding, seed=0)),
            "batches": batches, "tokens": tokens}


def test_keras_adapter_keeps_the_model_contract_dense_and_sparse(keras_setup):
    for make, batches in ((keras_setup["dense"], keras_setup["batches"][:2]), (keras_setup["embedding"], keras_setup["tokens"])):
        passed = check_trainable_model(make, batches)
        assert "set_weights" in passed and "train_step" in passed  # the fused step equals compute then apply


def test_keras_replicas_and_flinkml_baseline_keep_the_protocol(keras_setup):
    make, batches = keras_setup["dense"], keras_setup["batches"]
    assert len(check_protocol(make, batches, replicas=(2,), delays=(1,))) == 3
    assert len(check_protocol(make, batches, run=simulate_flinkml, staleness_bounds=(0,), replicas=(2,),
                              delays=(1,))) == 1


def test_runners_take_the_train_config():
    result = simulate(linear, BATCHES[:2], TrainConfig(replicas=2))
    assert result.replicas[0].buffer_capacity == TrainConfig().buffer_capacity == 256
    for run in (simulate, simulate_flinkml):
        with pytest.raises(ConfigError, match="config must be a TrainConfig"):
            run(linear, BATCHES, 2)
    with pytest.raises(ConfigError, match="staleness_bound must be 0. Received: staleness_bound=2"):
        simulate_flinkml(linear, BATCHES, TrainConfig(replicas=2, staleness_bound=2))


# ---------------------------------------------------------------- each model check can fail

class _MutatingEvaluate(LinearModel):
    def evaluate(self, batch):
        self.weights["b"] = self.weights["b"] + 1.0
        return super().evaluate(batch)


class _MissingGradient(LinearModel):
    def compute_gradients(self, batch):
        result = super().compute_gradients(batch)
        return dataclasses.replace(result, gradients={"w": result.gradients["w"]})


class _WrongSparseShape(LinearModel):
    def compute_gradients(self, batch):
        result = super().compute_gradients(batch)
        w = result.gradients["w"]
        sparse = SparseGradient(np.arange(3), w.reshape(3, 1), (4, 1))
        return dataclasses.replace(result, gradients={**result.gradients, "w": sparse})


class _Float32Loss(LinearModel):
    def compute_gradients(self, batch):
        return dataclasses.replace(super().compute_gradients(batch), loss=np.float32(1.0))


class _RegularisedEvaluate(LinearModel):
    def evaluate(self, batch):
        result = super().evaluate(batch)
        return StepResult(result.predictions, result.loss + 0.1)


class _ComplexGradients(LinearModel):
    def compute_gradients(self, batch):
        result = super().compute_gradients(batch)
        return dataclasses.replace(result, gradients={k: v.astype(np.complex64) for k, v in result.gradients.items()})


class _IgnoresGradients(LinearModel):
    def apply_gradients(self, gradients):
        pass


class _NoisyApply(LinearModel):
    def apply_gradients(self, gradients):
        super().apply_gradients({k: v + np.random.normal(scale=1e-3, size=v.shape) for k, v in gradients.items()})


class _TrainStepAppliesTwice(LinearModel):
    def train_step(self, batch, return_gradients=True):
        result = self.compute_gradients(batch)
        self.apply_gradients(result.gradients)
        self.apply_gradients(result.gradients)
        return result


class _StateWithoutSlots(LinearModel):
    def get_state(self):
        return {k: v for k, v in super().get_state().items() if k.startswith("weights/")}


class _StaleSetWeights(LinearModel):
    def set_weights(self, weights):
        super().set_weights({k: v for k, v in weights.items() if k != "b"})


def _unseeded():
    seeds = iter(range(100))
    return lambda: LinearModel(3, seed=next(seeds))


@pytest.mark.parametrize("factory, rule, detail", [
    (_unseeded(), "equal_start", "weight 'w' differs"),
    (lambda: _MissingGradient(3), "step_result", "gradients named ['w'], weights named ['b', 'w']"),
    (lambda: _WrongSparseShape(3), "step_result", "gradient 'w' has dense_shape (4, 1), its weight (3,)"),
    (lambda: _Float32Loss(3), "step_result", "loss=np.float32(1.0)"),
    (lambda: _MutatingEvaluate(3), "no_side_effects", "weight 'b' differs by up to 1"),
    (lambda: _RegularisedEvaluate(3), "evaluate_loss", "batch 0: evaluate gave"),
    (lambda: _ComplexGradients(3), "wire_round_trip", "unsupported dtype complex64"),
    (lambda: _IgnoresGradients(3), "apply_changes", "did not move"),
    (lambda: _NoisyApply(3), "deterministic_apply", "after batch 0"),
    (lambda: _TrainStepAppliesTwice(3), "train_step", "after batch 0: weight"),
    (lambda: _StateWithoutSlots(3), "state_round_trip", "are the optimizer slots in the state?"),
    (lambda: _StaleSetWeights(3), "set_weights", "weight 'b' differs"),
])
def test_each_model_rule_can_fail(factory, rule, detail):
    with pytest.raises(AssertionError) as failure:
        check_trainable_model(factory, BATCHES[:2])
    message = str(failure.value)
    assert message.startswith(f"{rule}: ") and detail in message, message


# ---------------------------------------------------------------- each protocol check can fail

def _drops_last_batch(make_model, batches, config, **kwargs):
    return simulate(make_model, batches[:-1], config, **kwargs)


def _loses_last_final_model(make_model, batches, config, **kwargs):
    result = simulate(make_model, batches, config, **kwargs)
    result.final_models.pop(config.replicas - 1)
    return result


def _corrupts_a_final_model(make_model, batches, config, **kwargs):
    """(A diverging model no longer makes non-finite weights: replicas skip non-finite steps.)"""
    result = simulate(make_model, batches, config, **kwargs)
    final = result.final_models[0]
    result.final_models[0] = dataclasses.replace(final, weights={k: np.full_like(v, np.nan) for k, v in final.weights.items()})
    return result


def _reports_staleness_above_the_bound(make_model, batches, config, **kwargs):
    result = simulate(make_model, batches, config, **kwargs)
    result.metrics = [dataclasses.replace(m, staleness=m.staleness + 5) for m in result.metrics]
    return result


def _asynchronous_at_zero(make_model, batches, config, **kwargs):
    return simulate(make_model, batches, dataclasses.replace(config, staleness_bound=None), **kwargs)


def _deadlocks(make_model, batches, config, **kwargs):
    raise ProtocolError("replicas [1] never finished: the protocol deadlocked")


@pytest.mark.parametrize("make_model, run, rule, detail", [
    (linear, _drops_last_batch, "every_batch_once", "missing [6], trained more than once [], unknown []"),
    (linear, _loses_last_final_model, "final_models", "final models of replicas [0]"),
    (linear, _corrupts_a_final_model, "final_models", "are not finite"),
    (linear, _reports_staleness_above_the_bound, "staleness_bound", "at staleness 5"),
    (lambda r: LinearModel(3, seed=r), simulate, "sync_identical", "replicas differ by up to"),
    (linear, _asynchronous_at_zero, "sync_is_sequential_sgd", "replica 0 differs from it by up to"),
    (linear, _deadlocks, "no_deadlock", "replicas [1] never finished"),
])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the diverging model overflows
def test_each_protocol_rule_can_fail(make_model, run, rule, detail):
    with pytest.raises(AssertionError) as failure:
        check_protocol(make_model, BATCHES, run=run, staleness_bounds=(0,), replicas=(2,), delays=(0,))
    message = str(failure.value)
    assert message.startswith(f"{rule}: ") and "replicas=2, staleness_bound=0, delivery_delay=0" in message, message
    assert detail in message, message


def test_protocol_check_needs_distinct_batch_ids():
    batches = [Batch(b.x, b.y) for b in BATCHES]
    with pytest.raises(ValueError, match="distinct ids"):
        check_protocol(linear, batches)
