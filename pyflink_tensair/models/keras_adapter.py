"""Adapts a compiled Keras 3 model (TensorFlow backend) to the replica's model interface.

``compute_gradients`` and ``apply_gradients`` are separate compiled ``tf.function`` s: the replica
decides when and what to apply; ``model.fit`` is never called. ``train_step`` is both in one
compiled call (a DASGD replica applies its own gradient at once): the gradient never crosses into
NumPy and back before it is applied, and leaves TensorFlow only when peers need it. Gradients of
embedding lookups (``tf.IndexedSlices``) stay sparse: the touched rows are made unique (in
ascending order) and their values summed inside the compiled step, so only those rows ever
leave TensorFlow.

Example::

    >>> from pyflink_tensair.models.zoo import quickstart_classifier
    >>> model = KerasModelAdapter(load_model(quickstart_classifier, seed=0))
    >>> from pyflink_tensair.core.messages import Batch
    >>> batch = Batch(np.zeros((8, 20), np.float32), np.zeros(8, np.int64))
    >>> result = model.compute_gradients(batch)
    >>> result.predictions.shape, sorted(result.gradients)[0]
    ((8, 4), '000')
    >>> model.train_step(batch, return_gradients=False).gradients is None  # applied, nothing to send
    True
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import zlib
from typing import Callable, Dict, Mapping, Optional, Union

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from ..core.messages import Batch, Gradients, SparseGradient  # noqa: E402
from ..core.model_api import StepResult  # noqa: E402
from ..core.row_resets import fresh_rows  # noqa: E402
from ..config import SPARSE_VALUES  # noqa: E402
from ..core.guards import BatchSpec  # noqa: E402
from ..errors import BatchRejectedError, ModelError  # noqa: E402
from . import check_model_argument  # noqa: E402,F401 (re-exported: it was defined here)

FUSED_STEP_VARIABLE = "PYFLINK_TENSAIR_FUSED_STEP"
"""Set to ``0`` in the job's environment, adapters offer no ``train_step`` and replicas compute,
then apply in two calls (``benchmarks.replica_path``'s candidate ``unfused``, to compare with)."""
ModelArgument = Union[Callable[[], "keras.Model"], str, os.PathLike]
"""What ``train(model=...)`` takes: a function returning a compiled model, or a saved ``.keras`` path."""
_BUILD_LOCK = threading.Lock()  # seeding is process-global; replicas may share a process (loopback)


def describe_model(model: ModelArgument) -> str:
    return getattr(model, "__qualname__", None) or repr(model)


def load_model(model: ModelArgument, *, seed: int = 0) -> "keras.Model":
    """Builds (seeded, so every replica starts equal) or loads the model, and checks it is compiled."""
    check_model_argument(model)
    with _BUILD_LOCK, _private_python_random(seed):
        keras.utils.set_random_seed(seed)
        try:
            built = keras.models.load_model(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else model()
        except Exception as err:  # the user's code: report what failed and why
            raise ModelError(f"building the model with {describe_model(model)} failed: {err!r}") from err
    if not isinstance(built, keras.Model):
        raise ModelError(f"the model builder must return a keras.Model. Received: {type(built).__name__}")
    if getattr(built, "optimizer", None) is None or getattr(built, "loss", None) is None:
        raise ModelError(
            "the model must be compiled with an optimizer and a loss: call "
            "model.compile(optimizer=..., loss=...) in the builder (or save a compiled model)")
    if not built.built:
        raise ModelError("the model must be built: give its first layer an input shape (keras.Input)")
    return built


@contextlib.contextmanager
def _private_python_random(seed: int):
    """Gives Keras' initializer seeds a private, seeded ``random.Random`` while a model is built.

    Unseeded Keras initializers draw their seeds from Python's global ``random``, which other
    threads of a PyFlink worker (Beam's harness) also draw from: replicas built in separate workers
    then started from different weights. A private generator makes the build depend on ``seed`` only.
    """
    module = getattr(getattr(getattr(keras, "src", None), "random", None), "seed_generator", None)
    original = getattr(module, "python_random", None)
    if original is None:
        yield
        return
    module.python_random = random.Random(seed)
    try:
        yield
    finally:
        module.python_random = original


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the platform tells it, and no
    more than a cgroup (v2) CPU quota allows (a container's ``cpu.max``).

        >>> usable_cores() >= 1
        True
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota here
    return cores


def shared_inter_op_threads(models: int) -> int:
    """Inter-op threads for one TensorFlow that ``models`` train in at once (replicas sharing a
    TaskManager's JVM): one each, or their steps run one after the other, and one per usable
    core, so that fewer models than cores run their steps' independent ops side by side.

        >>> shared_inter_op_threads(64) == 64 and shared_inter_op_threads(1) == usable_cores()
        True
    """
    return max(models, usable_cores())


def configure_tensorflow_threads(intra_op: Optional[int], inter_op: Optional[int] = None) -> None:
    """Sets TensorFlow's thread budget; must run before the process's first TensorFlow op.
    ``inter_op``: threads running independent ops (default: ``intra_op``); models that train at
    once in one process need one each."""
    if intra_op is None:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op)
        tf.config.threading.set_inter_op_parallelism_threads(max(1, intra_op, inter_op or 0))
    except RuntimeError:
        pass  # TensorFlow already initialised in this process (loopback mode): keep its budget


class KerasModelAdapter:
    """A compiled Keras model seen through :class:`~pyflink_tensair.core.model_api.TrainableModel`.

    ``accuracy``: ``"auto"`` compares the arg-max of a multi-class output with integer (or
    one-hot) labels, and thresholds a single output at 0.5 (a probability); ``None`` turns it off.
    """

    def __init__(self, model: "keras.Model", *, accuracy: Optional[str] = "auto", sparse_values: str = "float32"):
        if accuracy not in ("auto", None):
            raise ModelError(f"accuracy must be 'auto' or None. Received: accuracy={accuracy!r}")
        if sparse_values not in SPARSE_VALUES:
            raise ModelError(f"sparse_values must be 'float32' or 'float16'. Received: sparse_values={sparse_values!r}")
        # TrainConfig.sparse_values: embedding rows leave the compiled step already as half floats
        # (a cast in TensorFlow; NumPy's float16 conversions cost tens of ms per word2vec message)
        self._sparse_dtype = tf.float16 if sparse_values == "float16" else None
        self.sparse_values = sparse_values
        if os.environ.get(FUSED_STEP_VARIABLE, "1") == "0":  # before/after measurements of the fused step
            self.train_step = None
        self.model = model
        self._accuracy_enabled = accuracy is not None
        self._variables = list(model.trainable_variables)
        # Positional names: Keras numbers layers per process (dense, dense_1, ...), so paths differ
        # between replicas that share a process; the i-th variable is the same in every replica.
        self.names = [f"{i:03d}" for i in range(len(self._variables))]
        self.paths = [v.path for v in self._variables]
        self._shapes = [tuple(v.shape) for v in self._variables]
        model.optimizer.build(self._variables)
        self._step_fn = tf.function(self._step, reduce_retracing=True)
        self._eval_fn = tf.function(self._eval, reduce_retracing=True)
        self._apply_fn = tf.function(self._apply, reduce_retracing=True)
        self._train_fn = tf.function(self._train, reduce_retracing=True)
        self._sgd_fn = tf.function(self._sgd, reduce_retracing=True)
        self._reset_plans: Dict[tuple, tuple] = {}

    # ---------------------------------------------------------------- compiled functions

    def _accuracy(self, y, y_pred):
        if not self._accuracy_enabled or y is None:
            return tf.constant(np.nan, tf.float32)
        if y_pred.shape.rank and y_pred.shape[-1] is not None and y_pred.shape[-1] > 1:
            predicted = tf.argmax(y_pred, axis=-1)
            truth = tf.argmax(y, axis=-1) if y.shape.rank == y_pred.shape.rank else tf.reshape(y, tf.shape(predicted))
            return tf.reduce_mean(tf.cast(tf.equal(predicted, tf.cast(truth, predicted.dtype)), tf.float32))
        predicted = tf.cast(tf.reshape(y_pred, [-1]) > 0.5, tf.float32)
        return tf.reduce_mean(tf.cast(tf.equal(predicted, tf.cast(tf.reshape(y, [-1]), tf.float32)), tf.float32))

    def _step(self, x, y):
        with tf.GradientTape() as tape:
            y_pred = self.model(x, training=True)
            loss = self.model.compute_loss(x=x, y=y, y_pred=y_pred, training=True)
        grads = tape.gradient(loss, self._variables)
        out = []
        for grad, var in zip(grads, self._variables):
            if grad is None:
                out.append(tf.zeros_like(var))
            elif isinstance(grad, tf.IndexedSlices):
                rows, position = _ascending_unique(grad.indices)
                values = tf.math.unsorted_segment_sum(grad.values, position, tf.shape(rows)[0])
                out.append((rows, values if self._sparse_dtype is None else tf.cast(values, self._sparse_dtype)))
            else:
                out.append(grad)
        return loss, y_pred, self._accuracy(y, y_pred), out, tf.logical_and(tf.math.is_finite(loss), _all_finite(out))

    def _eval(self, x, y):
        y_pred = self.model(x, training=False)
        if y is None:
            return tf.constant(np.nan, tf.float32), y_pred, tf.constant(np.nan, tf.float32)
        loss = self.model.compute_loss(x=x, y=y, y_pred=y_pred, training=False)
        return loss, y_pred, self._accuracy(y, y_pred)

    def _apply(self, grads):
        grads = [tf.IndexedSlices(tf.cast(g.values, v.dtype), g.indices, g.dense_shape)
                 if isinstance(g, tf.IndexedSlices) and g.values.dtype != v.dtype else g
                 for g, v in zip(grads, self._variables)]  # half-float rows, widened here
        self.model.optimizer.apply_gradients(zip(grads, self._variables))

    def _sgd(self, grads, learning_rate):
        for grad, variable in zip(grads, self._variables):
            if isinstance(grad, tf.IndexedSlices):
                variable.value.scatter_sub(tf.IndexedSlices(learning_rate * tf.cast(grad.values, variable.dtype),
                                                            grad.indices, grad.dense_shape))
            else:
                variable.assign_sub(learning_rate * grad)

    def _train(self, x, y):
        """``_step`` then ``_apply`` of its gradient, as a peer would decode it (the same rows,
        the same half floats), in one graph: bit for bit what the two calls do. A gradient that
        is not finite, or whose loss is not, is not applied (the optimizer's slots and step count
        stay as they were: an infinite loss's huge gradient would overflow Adam's moments)."""
        loss, y_pred, accuracy, grads, finite = self._step(x, y)

        def apply():
            self._apply([tf.IndexedSlices(g[1], g[0], tf.constant(shape, tf.int64)) if isinstance(g, tuple) else g
                         for g, shape in zip(grads, self._shapes)])
            return tf.constant(True)

        tf.cond(finite, apply, lambda: tf.constant(False))
        return loss, y_pred, accuracy, grads, finite

    # ---------------------------------------------------------------- TrainableModel

    @staticmethod
    def _inputs(batch: Batch):
        x = dict(batch.x) if isinstance(batch.x, dict) else batch.x
        return x, batch.y

    def compute_gradients(self, batch: Batch) -> StepResult:
        return self._result(self._step_fn, batch, True)

    def train_step(self, batch: Batch, return_gradients: bool = True) -> StepResult:
        """``compute_gradients`` and ``apply_gradients`` of its gradient in one compiled call;
        ``return_gradients=False`` (a replica without peers): the gradient stays in TensorFlow."""
        return self._result(self._train_fn, batch, return_gradients)

    def _result(self, function, batch: Batch, return_gradients: bool) -> StepResult:
        if batch.y is None:
            raise ModelError("a batch to train on needs labels 'y'")
        with _refusals():
            loss, y_pred, acc, grads, finite = function(*self._inputs(batch))
        gradients: Optional[Gradients] = None
        if return_gradients:
            gradients = {}
            for name, shape, grad in zip(self.names, self._shapes, grads):
                if isinstance(grad, tuple):
                    gradients[name] = SparseGradient(grad[0].numpy(), grad[1].numpy(), shape)
                else:
                    gradients[name] = grad.numpy()
        return StepResult(predictions=y_pred.numpy(), loss=float(loss), accuracy=_maybe(acc), gradients=gradients,
                          finite=bool(finite))

    def batch_spec(self) -> BatchSpec:
        """The inputs the model takes (shape after the batch axis, integer or not) and, for a
        sparse categorical loss, its number of classes: what a replica checks batches against."""
        struct = getattr(self.model, "_inputs_struct", None)
        named = struct.items() if isinstance(struct, dict) else [(None, t) for t in self.model.inputs[:1]]
        if not isinstance(struct, dict) and len(self.model.inputs) != 1:
            named = [(t.name, t) for t in self.model.inputs]
        inputs = {name: tuple(t.shape[1:]) for name, t in named}
        integer = frozenset(name for name, t in named if np.dtype(t.dtype).kind in "iu")
        loss = self.model.loss
        loss_name = getattr(getattr(loss, "fn", None), "__name__", None) or getattr(loss, "name", None) or str(loss)
        outputs = self.model.outputs
        classes = (int(outputs[0].shape[-1]) if "sparse_categorical" in str(loss_name) and len(outputs) == 1
                   and outputs[0].shape[-1] else None)
        return BatchSpec(inputs=inputs, integer_inputs=integer, classes=classes)

    def predict_function(self) -> Callable[[np.ndarray], np.ndarray]:
        """``features -> the model's output`` as a NumPy array, what ``predict_on_batch`` returns.
        For a model of one unnamed input of known shape and one output, its forward pass
        (``training=False``) is traced once for micro-batches of any size and called directly:
        Keras's ``predict_on_batch`` spends about 0.2 ms a call matching its arguments to a
        trace (0.52 against 0.33 ms for 64 events of the quickstart classifier,
        docs/measurements.md). Other models go through ``predict_on_batch``.

            >>> import keras
            >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
            >>> model.compile(optimizer="sgd", loss="mse")
            >>> x = np.ones((4, 3), np.float32)
            >>> np.allclose(KerasModelAdapter(model).predict_function()(x), model.predict_on_batch(x))
            True
        """
        model = self.model
        inputs, outputs = getattr(model, "inputs", None) or [], getattr(model, "outputs", None) or []
        named = isinstance(getattr(model, "_inputs_struct", None), dict)
        if named or len(inputs) != 1 or len(outputs) != 1 or any(n is None for n in inputs[0].shape[1:]):
            return lambda x: np.asarray(model.predict_on_batch(x))
        dtype = inputs[0].dtype
        spec = tf.TensorSpec([None, *inputs[0].shape[1:]], tf.float32)
        forward = tf.function(lambda x: model(tf.cast(x, dtype), training=False),
                              input_signature=[spec]).get_concrete_function()
        return lambda x: forward(tf.constant(x, tf.float32)).numpy()

    def evaluate(self, batch: Batch) -> StepResult:
        with _refusals():
            loss, y_pred, acc = self._eval_fn(*self._inputs(batch))
        return StepResult(predictions=y_pred.numpy(), loss=_maybe(loss), accuracy=_maybe(acc))

    def apply_gradients(self, gradients: Gradients) -> None:
        self._apply_fn(self._tensors(gradients))

    def apply_sgd(self, gradients: Gradients, learning_rate: float) -> None:
        """A plain step ``w -= learning_rate * g`` that leaves the optimizer's slots alone
        (:class:`~pyflink_tensair.config.PeerUpdates` ``rule="sgd"``)."""
        self._sgd_fn(self._tensors(gradients), tf.constant(learning_rate, tf.float32))

    def _tensors(self, gradients: Gradients) -> list:
        grads = []
        for name, shape in zip(self.names, self._shapes):
            grad = gradients.get(name)
            if grad is None or tuple(grad.dense_shape if isinstance(grad, SparseGradient) else grad.shape) != shape:
                raise ModelError(f"gradient {name!r} does not fit variable {shape}: the replicas' models differ")
            if isinstance(grad, SparseGradient):
                grads.append(tf.IndexedSlices(tf.convert_to_tensor(grad.values), tf.convert_to_tensor(grad.indices),
                                              dense_shape=tf.constant(shape, tf.int64)))
            else:
                grads.append(tf.convert_to_tensor(grad))
        return grads

    def get_weights(self) -> Dict[str, np.ndarray]:
        return {name: v.numpy() for name, v in zip(self.names, self._variables)}

    def set_weights(self, weights: Mapping[str, Union[np.ndarray, SparseGradient]]) -> None:
        """Sets the trainable weights from what :meth:`get_weights` (or a ``FinalModel``) holds.

        Variables missing from ``weights`` keep their values; a ``SparseGradient`` value sets only
        its rows (``indices``) to its ``values``.
        """
        unknown = set(weights) - set(self.names)
        if unknown:
            raise ModelError(f"weights {sorted(unknown)} are not variables of this model ({len(self.names)} variables)")
        for name, variable in zip(self.names, self._variables):
            value = weights.get(name)
            if isinstance(value, SparseGradient):
                variable.value.scatter_update(tf.IndexedSlices(tf.convert_to_tensor(value.values),
                                                               tf.convert_to_tensor(value.indices)))
            elif value is not None:
                variable.assign(value)

    def reset_rows(self, table: str, layers, rows: np.ndarray, generations: np.ndarray) -> None:
        """Rows ``rows`` of the embedding ``layers`` (by name) start afresh: weights drawn anew as
        the layer's initializer draws them (the same numbers in every replica for the same
        table, layer, row and generation: :func:`~pyflink_tensair.core.row_resets.fresh_rows`),
        the optimizer's slots for them zero (:mod:`pyflink_tensair.core.row_resets`)."""
        plan, slot_lists = self._reset_plan(table, tuple(layers))
        for name, variable, _, _ in plan:
            if int(variable.shape[0]) <= int(rows.max(initial=0)):
                raise ModelError(f"id table {table!r} resets row {int(rows.max())} of layer {name!r}, which has "
                                 f"{int(variable.shape[0])} rows: give the layer the table's rows")
        indices = tf.convert_to_tensor(rows)
        for (_, variable, initializer, salt), slots in zip(plan, slot_lists):
            fresh = fresh_rows(initializer, rows, generations, int(variable.shape[1]), salt, np.dtype(variable.dtype))
            variable.value.scatter_update(tf.IndexedSlices(tf.convert_to_tensor(fresh), indices))
            for slot in slots:
                zeros = np.zeros((len(rows), *slot.shape[1:]), np.dtype(slot.dtype))
                slot.value.scatter_update(tf.IndexedSlices(tf.convert_to_tensor(zeros), indices))

    def _reset_plan(self, table: str, layers: tuple):
        """Per (table, layers), once: each layer's variable, initializer and salt, and its
        optimizer slots. (Eager scatters: 0.045 ms each; the same scatters in one compiled
        function cost 0.48 ms a call.)"""
        key = (table, layers)
        if key not in self._reset_plans:
            plan, slots = [], []
            for name in layers:
                try:
                    layer = self.model.get_layer(name)
                except ValueError:
                    raise ModelError(f"id table {table!r} indexes layer {name!r}, which the model does not have") from None
                variable = getattr(layer, "embeddings", None)
                if variable is None:
                    raise ModelError(f"id table {table!r} indexes layer {name!r}, which is not an Embedding layer")
                plan.append((name, variable, keras.initializers.serialize(layer.embeddings_initializer),
                             [zlib.crc32(f"{table}/{name}".encode("utf-8"))]))
                prefix = variable.path.replace("/", "_") + "_"
                slots.append([slot for slot in self.model.optimizer.variables
                              if slot.name.startswith(prefix) and tuple(slot.shape) == tuple(variable.shape)])
            self._reset_plans[key] = (plan, slots)
        return self._reset_plans[key]

    def get_state(self) -> Dict[str, np.ndarray]:
        state = {f"weights/{i:04d}/{v.path}": np.array(v.numpy()) for i, v in enumerate(self.model.weights)}
        for i, v in enumerate(self.model.optimizer.variables):
            state[f"optimizer/{i:04d}/{v.path}"] = np.array(v.numpy())
        return state

    def set_state(self, state: Dict[str, np.ndarray]) -> None:
        groups = {"weights": list(self.model.weights), "optimizer": list(self.model.optimizer.variables)}
        for key, value in state.items():
            group, index, _ = key.split("/", 2)
            variables = groups.get(group)
            if variables is None or int(index) >= len(variables):
                raise ModelError(f"state entry {key!r} does not fit this model")
            variables[int(index)].assign(value)


def _ascending_unique(indices: tf.Tensor):
    """``tf.unique`` with the rows in ascending order (and each lookup's position among them):
    a scatter into a table over sorted rows walks it forwards, 0.89 of the time in
    ``tf.unique``'s order of first lookup for 5,008 rows of 300 floats into 50,000
    (docs/measurements.md, "2026-12-07 (later)"). The values are summed after this, straight
    into the sorted order: sorting costs an argsort of the unique rows."""
    rows, position = tf.unique(indices)
    order = tf.argsort(rows)
    return tf.gather(rows, order), tf.gather(tf.math.invert_permutation(order), position)


def _all_finite(grads) -> tf.Tensor:
    """Whether every gradient value is finite: one reduction per tensor, inside the step."""
    checks = [tf.reduce_all(tf.math.is_finite(g[1] if isinstance(g, tuple) else g)) for g in grads]
    return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)


@contextlib.contextmanager
def _refusals():
    """A batch TensorFlow refuses inside a step (an index outside an embedding table, a shape
    the checks did not see) is the batch's fault, not the job's: BatchRejectedError."""
    try:
        yield
    except tf.errors.InvalidArgumentError as err:
        lines = [line.strip() for line in str(err.message).splitlines() if line.strip()]
        said = [line for line in lines if not line.startswith(("[[", "File ", "Graph execution", "Detected at"))]
        raise BatchRejectedError((said[-1] if said else lines[0] if lines else "rejected")[:300]) from None


def _maybe(value) -> Optional[float]:
    v = float(value)
    return None if np.isnan(v) else v
