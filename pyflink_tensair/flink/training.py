"""``train()``: wires the replicas and their gradient loop into the batches' Flink job.

Operator graph (``N`` = ``config.replicas``; every operator named ``<name>: ...`` with a uid; the
plumbing is :class:`~.loop.FeedbackLoop`'s)::

    batches ─► route (round-robin key, JVM) ─┐
    start markers (keyed) ───────────────────┴─► key_by (JVM) ─┐
                                                               ├─► replicas (N) ─► predictions (main output)
    feedback source (N) ─► fan-out (JVM) ─► key_by (JVM) ──────┘      ├─► metrics (side output, JSON)
          ▲ in-JVM queue, subtask i ◄─ subtask i                      ├─► models (side output, final weights)
          └──────────── feedback sink (N) ◄───────────────────────────┘   ├─► probes (side output, JSON)
                                                                              ├─► mode changes (side output, JSON)
                                                                              ├─► dead letters (side output, JSON)
                                                                              feedback (side output)

Only the replicas run Python (see :mod:`.loop` for the Java plumbing); the side outputs are the
replicas' own, with no Python operator behind them. The job ends by itself when
the batches end: every replica then sends a done marker, and the feedback sources end after them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from ..config import TrainConfig, as_train_config
from ..errors import ConfigError, ModelError
from ..validation import require_bool, require_callable, require_number
from . import types
from .checkpointing import replica_operator
from .replica_function import ReplicaFunction
from .loop import FeedbackLoop
from .relay import relay

if TYPE_CHECKING:
    from pyflink.datastream import DataStream


@dataclass(frozen=True)
class TrainOutput:
    """The streams ``train`` returns.

    Attributes:
        predictions: one row per input batch (see :func:`~pyflink_tensair.flink.types.decode_prediction`).
        metrics: JSON strings, one per trained batch and one ``"final"`` per replica
            (:class:`~pyflink_tensair.core.events.Metrics`).
        models: each replica's final weights once training ended
            (:func:`~pyflink_tensair.flink.types.decode_final_model`).
        probes: JSON strings of what ``probe`` returned while training and at the end (empty
            without a probe).
        mode_changes: JSON strings, one per change of a replica in ``mode="auto"`` between
            training and serving: converged, its own drift (with the detector's statistics), or
            a peer's (:class:`~pyflink_tensair.core.events.ModeChange`); empty in the other modes.
        dead_letters: JSON strings, one per input set aside instead of trained on: a bad record
            (from :func:`~pyflink_tensair.to_batches`), batch or corpus line, or a refused peer
            message, with the reason and the position (:class:`~pyflink_tensair.DeadLetter`;
            ``TrainConfig.guards``).
        updates: encoded model updates replica 0 publishes while it trains, with
            ``TrainConfig.updates`` (:func:`~pyflink_tensair.core.model_updates.decode_update`;
            :func:`~pyflink_tensair.serve` applies them); empty without.
        loop_id: identifies this job's feedback channel.
        model: the ``model`` argument ``train`` got (to rebuild the trained models).

    Any of the streams can be collected with ``execute_and_collect()``, which runs the whole job
    (the sinks attached to the other streams too) and ends with it.
    """

    predictions: "DataStream"
    metrics: "DataStream"
    models: "DataStream"
    probes: "DataStream"
    loop_id: str
    model: object = None
    mode_changes: Optional["DataStream"] = None
    dead_letters: Optional["DataStream"] = None
    updates: Optional["DataStream"] = None
    config: Optional[TrainConfig] = None

    def collect_keras_models(self) -> list:
        """Runs the job and returns each replica's trained ``keras.Model``, replica ``r`` at
        index ``r`` (:func:`~.results.keras_models` of ``models.execute_and_collect()``)."""
        from .results import keras_models

        with self.models.execute_and_collect() as records:
            return keras_models(records, self.model)


def check_sample(keras_model, sample, config: TrainConfig) -> None:
    """Raises ``ModelError`` when ``sample`` (a Batch) is not a batch ``keras_model`` can take."""
    from ..config import Mode
    from ..core.guards import check_batch
    from ..core.messages import Batch
    from ..models.keras_adapter import KerasModelAdapter

    if not isinstance(sample, Batch):
        raise ConfigError(f"sample must be a Batch. Received: sample={type(sample).__name__}")
    refusal = check_batch(sample, KerasModelAdapter(keras_model).batch_spec(), needs_labels=config.mode is not Mode.SERVE,
                          max_bytes=config.guards.max_batch_bytes)
    if refusal is not None:
        raise ModelError(f"the model does not fit the data ({refusal.reason}): {refusal.detail}. Build or load a model "
                         "for these batches, or pass batches that fit it")


def train(batches, *, model, config: TrainConfig = TrainConfig(), check_model: bool = True,
          probe: Optional[Callable] = None, probe_every_s: float = 5.0, sample=None) -> TrainOutput:
    """Trains ``config.replicas`` replicas of ``model`` on ``batches`` inside their Flink job.

    Args:
        batches: a PyFlink ``DataStream`` of encoded mini-batches (:func:`~pyflink_tensair.encode_batch`
            or :func:`~pyflink_tensair.to_batches`), of type ``Types.PRIMITIVE_ARRAY(Types.BYTE())``.
        model: a function returning a compiled ``keras.Model`` (it must be importable by the Python
            workers: a module-level function or a ``functools.partial`` of one), or the path of a
            saved ``.keras`` model to continue training.
        config: :class:`~pyflink_tensair.TrainConfig`.
        check_model: build the model once here, so a broken builder fails before the job starts
            (and run ``probe`` on it, so a broken probe does too, and check ``sample``).
        sample: optional, one :class:`~pyflink_tensair.Batch` like the stream's (e.g. the first):
            a model whose inputs, dtypes or classes do not fit it fails here with a
            ``ModelError``, instead of every batch becoming a dead letter in the job.
        probe: optional ``probe(keras_model) -> JSON-able`` that replica 0 runs on its model every
            ``probe_every_s`` seconds and once on its final model (e.g. nearest neighbours of a few
            words). Shipped like ``model``. Errors it raises at run time are reported in the
            probes stream under ``"error"``; they do not stop the training.

    Returns:
        :class:`TrainOutput` with the predictions, metrics and models streams.

    A bad argument (a stream of another type, a ``model`` that names none, ...) is refused here, before
    anything is built, with a ``ConfigError`` (``ModelError`` for ``model``) naming it and what it got.

    Example (the README's: ``tests/test_examples.py`` checks they are the same, ``tests/test_installed_wheel.py`` runs it)::

        import functools

        import numpy as np
        from pyflink.datastream import StreamExecutionEnvironment
        from pyflink_tensair import TrainConfig, to_batches, train
        from pyflink_tensair.models import zoo

        x = np.random.default_rng(0).normal(size=(2048, 20))
        y = (x[:, 0] > 0) + 2 * (x[:, 1] > 0)                     # 4 classes
        env = StreamExecutionEnvironment.get_execution_environment()
        records = env.from_collection([(f.tolist(), int(c)) for f, c in zip(x, y)])  # any DataStream of (features, label)
        batches = to_batches(records, batch_size=64)             # or batch_source(env, n, make_batch, rate=...)
        model = functools.partial(zoo.quickstart_classifier, learning_rate=0.03)  # a builder of a compiled
        out = train(batches, model=model, config=TrainConfig(replicas=2))  # keras.Model, or a saved .keras path
        models = out.collect_keras_models()                      # runs the job: replica r's keras.Model is models[r]
        print("accuracy", np.mean(models[0].predict(x, verbose=0).argmax(axis=1) == y))
    """
    from ..core.messages import Batch
    from ..models import check_model_argument

    config = as_train_config(config)
    check_model_argument(model)
    require_callable("probe", probe, "a function of the Keras model", optional=True)
    require_number("probe_every_s", probe_every_s, above=0, unit="seconds")
    require_bool("check_model", check_model)
    if sample is not None and not isinstance(sample, Batch):
        raise ConfigError(f"sample must be a Batch or None. Received: sample={sample!r:.100}")
    loop = FeedbackLoop(batches, config)  # checks the batches' type; prepares the environment
    from ..models.keras_adapter import load_model

    if check_model:
        built = load_model(model, seed=config.seed)
        if sample is not None:
            check_sample(built, sample, config)
        if probe is not None:
            try:
                json.dumps(probe(built), default=float)
            except Exception as err:
                raise ConfigError(f"the probe failed on the initial model: {err!r}") from err

    n = config.replicas
    replicas = replica_operator(loop.keyed_inputs(credit=config.backpressure).connect(loop.keyed_feedback(n)),
                                ReplicaFunction(model, config, loop.keys, probe, probe_every_s),
                                types.prediction_type(), loop.keys, config.python_in,
                                rescalable=config.staleness_bound != 0)  # synchronous steps in flight cannot merge
    replicas = loop.training_operator(loop.named(replicas, "replicas", "replicas"))
    loop.close(loop.side_output(replicas, types.FEEDBACK.tag(config.name)), n)
    if config.backpressure:
        loop.close_credit(loop.side_output(replicas, types.CREDIT.tag(config.name)))

    # raw JVM side outputs: PyFlink's get_side_output adds an identity Python map (a Beam bundle per record)
    streams = {field: loop.side_output(replicas, output.tag(config.name)) for field, output in types.TRAIN_OUTPUTS.items()}
    if config.updates is not None:  # off the barrier's path: a checkpoint must not stop the servers (relay.py)
        streams["updates"] = relay(streams["updates"], name=f"{config.name}: model updates",
                                   uid=f"{config.name}-updates-relay", beside=loop.feedback_source)
    return TrainOutput(predictions=replicas, loop_id=loop.loop_id, model=model, config=config, **streams)
